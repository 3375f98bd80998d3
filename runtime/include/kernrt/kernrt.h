/* kernrt.h: the C ABI of libkernrt, a thin shell over kernrt::Runtime (runtime.hpp).
 *
 * Opaque handle, status codes, no exception crosses it: every C++ failure becomes a
 * status plus a message read with kernrt_last_error. A failed load has no handle, so its
 * message is kept per thread and read with kernrt_last_error(NULL). Strings passed in are
 * borrowed for the duration of the call; the string kernrt_last_error returns lives until
 * the next call on the same handle (or, for NULL, the next load on the same thread).
 * Not checked here: anything the C++ API checks (it does all validation). */
#ifndef KERNRT_KERNRT_H
#define KERNRT_KERNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kernrt_runtime kernrt_runtime;

typedef enum kernrt_status {
  KERNRT_OK = 0,
  KERNRT_E_PARSE = 1,    /* the text is not a schema-v4 manifest */
  KERNRT_E_MANIFEST = 2, /* a verifier rule is violated */
  KERNRT_E_ARTIFACT = 3, /* a cubin or weight is missing, changed or mismatched */
  KERNRT_E_DRIVER = 4,   /* the CUDA driver or device failed or is absent */
  KERNRT_E_CALLER = 5,   /* bad argument: unknown name, var out of range, wrong size */
  KERNRT_E_IO = 6        /* a file could not be read or written */
} kernrt_status;

typedef struct kernrt_load_options {
  const char* const* cubin_dirs; /* directories hashed for *.cubin */
  size_t n_cubin_dirs;
  const char* cache_dir;         /* NULL = $KERNRT_CACHE_DIR or ~/.cache/kernrt */
  int gpu;
  uint64_t token_capacity;       /* 0 = default (65536, rounded to the page unit) */
  uint64_t seq_slots;            /* 0 = seqs.max + 2 */
  const char* const* weight_files; /* safetensors files */
  size_t n_weight_files;
  size_t graph_cache_capacity;   /* 0 = default (64) */
} kernrt_load_options;

/* Fills `options` with the defaults (no dirs, gpu 0, default capacities). */
void kernrt_load_options_init(kernrt_load_options* options);

/* Parses, verifies and loads a manifest. On success *out is a handle to destroy with
 * kernrt_destroy; on failure *out is NULL and kernrt_last_error(NULL) says why. */
kernrt_status kernrt_load_file(const char* manifest_path, const kernrt_load_options* options,
                               kernrt_runtime** out);
kernrt_status kernrt_load_json(const char* json_text, size_t json_len,
                               const kernrt_load_options* options, kernrt_runtime** out);

kernrt_status kernrt_write_input(kernrt_runtime* rt, const char* buffer, const void* data,
                                 size_t bytes);

/* vars as parallel arrays of n_vars names and values; graph != 0 replays a cached graph. */
kernrt_status kernrt_run(kernrt_runtime* rt, const char* program, const char* const* var_names,
                         const uint64_t* var_values, size_t n_vars, int graph);

/* Copies the whole `output` buffer into dst; capacity must be at least its size.
 * *written (if non-NULL) receives the size. */
kernrt_status kernrt_read_output(kernrt_runtime* rt, const char* buffer, void* dst,
                                 size_t capacity, size_t* written);

/* Size in bytes of a buffer as allocated; KERNRT_E_CALLER for an unknown name. */
kernrt_status kernrt_buffer_bytes(kernrt_runtime* rt, const char* buffer, size_t* bytes);

/* The message of the last failure on `rt` ("" if none), or of the last failed load on
 * this thread when rt is NULL. */
const char* kernrt_last_error(const kernrt_runtime* rt);

/* 1 when a CUDA driver and device are present, else 0. */
int kernrt_device_available(void);

const char* kernrt_version(void);

void kernrt_destroy(kernrt_runtime* rt);

#ifdef __cplusplus
}
#endif

#endif /* KERNRT_KERNRT_H */
