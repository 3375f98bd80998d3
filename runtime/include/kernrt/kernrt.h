/* kernrt.h: the C ABI of libkernrt, a thin shell over kernrt::Runtime (runtime.hpp).
 *
 * Opaque handle, status codes, no exception crosses it: every C++ failure becomes a
 * status plus a message. Every failing call sets its own message: on the handle it was
 * given (kernrt_last_error(rt)), or, when it has no usable handle (a load, a NULL handle),
 * per thread (kernrt_last_error(NULL)). A successful call on a handle clears its message.
 * Strings passed in are borrowed for the duration of the call; strings returned live until
 * the next call on the same handle (or, for NULL, the next failing call on the thread).
 *
 * Streams are CUstream / cudaStream_t values passed as `void*`; NULL means the runtime's
 * own compute stream (pass CU_STREAM_LEGACY or CU_STREAM_PER_THREAD for those).
 * Device addresses are CUdeviceptr values as uint64_t.
 * Growth: structs that may grow start with `uint32_t struct_size`, which the caller sets
 * to sizeof (the *_init functions do); fields past a smaller struct_size take defaults.
 * Not checked here: anything the C++ API checks (it does all validation). */
#ifndef KERNRT_KERNRT_H
#define KERNRT_KERNRT_H

#include <stddef.h>
#include <stdint.h>

#if defined(KERNRT_BUILDING_SHARED) && defined(__GNUC__)
#define KERNRT_API __attribute__((visibility("default")))
#else
#define KERNRT_API
#endif

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
  KERNRT_E_CALLER = 5,   /* bad argument: unknown name, var out of range, wrong size, NULL */
  KERNRT_E_IO = 6,       /* a file could not be read or written */
  KERNRT_E_INTERNAL = 7  /* a bug or resource exhaustion inside kernrt (e.g. out of memory) */
} kernrt_status;

/* "ok", "parse", "manifest", "artifact", "driver", "caller", "io", "internal", or
 * "unknown" for any other value. Static storage. */
KERNRT_API const char* kernrt_status_string(kernrt_status status);

typedef struct kernrt_load_options {
  uint32_t struct_size;          /* sizeof(kernrt_load_options); set by _init */
  const char* const* cubin_dirs; /* directories hashed for *.cubin */
  size_t n_cubin_dirs;
  const char* cache_dir;         /* NULL = $KERNRT_CACHE_DIR or ~/.cache/kernrt */
  int gpu;
  uint64_t token_capacity;       /* 0 = default (65536, rounded to the page unit) */
  uint64_t seq_slots;            /* 0 = seqs.max + 2 */
  const char* const* weight_files; /* safetensors files */
  size_t n_weight_files;
  size_t graph_cache_capacity;   /* 0 = default (64) */
  /* A topology manifest, one process per rank: this process's index in each named group
   * (groups of one rank may be left out), and a directory every rank of the job reaches,
   * fresh per job; each wait there gives up after rendezvous_timeout_s (0 = 120 s). */
  const char* const* rank_groups;
  const uint64_t* rank_indices;
  size_t n_ranks;
  const char* rendezvous;
  double rendezvous_timeout_s;
} kernrt_load_options;

/* Fills `options` with the defaults (struct_size, no dirs, gpu 0, default capacities). */
KERNRT_API void kernrt_load_options_init(kernrt_load_options* options);

/* Parses, verifies and loads a manifest. On success *out is a handle to destroy with
 * kernrt_destroy; on failure *out is NULL and kernrt_last_error(NULL) says why. */
KERNRT_API kernrt_status kernrt_load_file(const char* manifest_path,
                                          const kernrt_load_options* options,
                                          kernrt_runtime** out);
KERNRT_API kernrt_status kernrt_load_json(const char* json_text, size_t json_len,
                                          const kernrt_load_options* options,
                                          kernrt_runtime** out);

/* Parses and verifies a manifest without a GPU. KERNRT_OK when verified; otherwise the
 * status of the first problem. *report_json (if non-NULL) receives a JSON array of
 * {"kind", "path", "message"} objects, one per problem ("[]" when verified), valid until
 * the next call on this thread. */
KERNRT_API kernrt_status kernrt_verify_json(const char* json_text, size_t json_len,
                                            const char** report_json);

/* ---- data in and out ------------------------------------------------------------------- */

/* Host bytes into an `input` buffer through pinned staging, at a byte offset (a whole number
 * of elements), domain-checked, stream-ordered on the compute stream. */
KERNRT_API kernrt_status kernrt_write_input(kernrt_runtime* rt, const char* buffer,
                                            const void* data, size_t bytes);
KERNRT_API kernrt_status kernrt_write_input_at(kernrt_runtime* rt, const char* buffer,
                                               uint64_t offset, const void* data, size_t bytes);
/* Device-to-device copy into an `input` buffer at `offset`, ordered on `stream`. Not
 * domain-checked: the data never reaches the host. */
KERNRT_API kernrt_status kernrt_write_input_device(kernrt_runtime* rt, const char* buffer,
                                                   uint64_t offset, uint64_t src_device_ptr,
                                                   size_t bytes, void* stream);

/* Copies the whole `output` buffer into dst; capacity must be at least its size.
 * *written (if non-NULL) receives the size. */
KERNRT_API kernrt_status kernrt_read_output(kernrt_runtime* rt, const char* buffer, void* dst,
                                            size_t capacity, size_t* written);
/* `bytes` of an `output` buffer from byte `offset`. */
KERNRT_API kernrt_status kernrt_read_output_at(kernrt_runtime* rt, const char* buffer,
                                               uint64_t offset, void* dst, size_t bytes);

/* Zero-copy: the device address and size of a runtime-owned buffer or state, for an
 * engine's own kernels to write inputs and read outputs in place (their contents are the
 * caller's to keep inside the buffer's domain). Either out pointer may be NULL. */
KERNRT_API kernrt_status kernrt_buffer_device_ptr(kernrt_runtime* rt, const char* buffer,
                                                  uint64_t* device_ptr, size_t* bytes);
KERNRT_API kernrt_status kernrt_state_device_ptr(kernrt_runtime* rt, const char* state,
                                                 uint64_t* device_ptr, size_t* bytes);

/* Size in bytes of a buffer as allocated; KERNRT_E_CALLER for an unknown name. */
KERNRT_API kernrt_status kernrt_buffer_bytes(kernrt_runtime* rt, const char* buffer,
                                             size_t* bytes);

#define KERNRT_MAX_RANK 8
typedef struct kernrt_buffer_info {
  uint32_t struct_size;  /* sizeof(kernrt_buffer_info), set by the caller */
  const char* dtype;     /* "bf16", "f32", ... (static storage) */
  const char* kind;      /* "input", "output", "weight", "workspace", "carry", "peer" */
  uint32_t rank;
  uint64_t shape[KERNRT_MAX_RANK]; /* at the vars' maxima, outermost first */
  uint64_t bytes;
  uint64_t device_ptr;
} kernrt_buffer_info;
KERNRT_API kernrt_status kernrt_get_buffer_info(kernrt_runtime* rt, const char* buffer,
                                                kernrt_buffer_info* info);

/* Names, sorted; index past the count gives NULL. Valid while the handle lives. */
KERNRT_API size_t kernrt_buffer_count(const kernrt_runtime* rt);
KERNRT_API const char* kernrt_buffer_name(const kernrt_runtime* rt, size_t index);
KERNRT_API size_t kernrt_state_count(const kernrt_runtime* rt);
KERNRT_API const char* kernrt_state_name(const kernrt_runtime* rt, size_t index);
KERNRT_API size_t kernrt_program_count(const kernrt_runtime* rt);
KERNRT_API const char* kernrt_program_name(const kernrt_runtime* rt, size_t index);

/* ---- running ------------------------------------------------------------------------------ */

/* vars as parallel arrays of n_vars names and values; graph != 0 replays a cached graph.
 * Runs to completion on the compute stream. */
KERNRT_API kernrt_status kernrt_run(kernrt_runtime* rt, const char* program,
                                    const char* const* var_names, const uint64_t* var_values,
                                    size_t n_vars, int graph);

/* Enqueues a program on `stream` without waiting. graph != 0 captures one graph per
 * (program, vars) on first use and replays it on `stream` (any stream). Ordered after the
 * runtime's pending copies and runs and before its next ones. While `stream` is being
 * captured by the caller, only the launches are issued (graph must be 0): they become part
 * of the caller's graph. */
KERNRT_API kernrt_status kernrt_enqueue(kernrt_runtime* rt, const char* program,
                                        const char* const* var_names,
                                        const uint64_t* var_values, size_t n_vars, int graph,
                                        void* stream);

/* The caller's device memory standing in for a whole buffer or state during one call. */
typedef struct kernrt_binding {
  const char* buffer;  /* a buffer's name, or a state's */
  uint64_t device_ptr; /* 16-byte aligned, inside one allocation of this context */
  uint64_t bytes;      /* at least the buffer's allocation */
} kernrt_binding;

/* kernrt_enqueue, eagerly, with the bindings' memory in place of those buffers for this
 * call only (zero-copy: how a drop-in runs on a framework's tensors). */
KERNRT_API kernrt_status kernrt_enqueue_bound(kernrt_runtime* rt, const char* program,
                                              const char* const* var_names,
                                              const uint64_t* var_values, size_t n_vars,
                                              const kernrt_binding* bindings,
                                              size_t n_bindings, void* stream);

/* Waits for everything enqueued on the compute stream and the last caller stream. */
KERNRT_API kernrt_status kernrt_synchronize(kernrt_runtime* rt);

typedef struct kernrt_timing {
  double median_us, min_us, mean_us;
  int iters;
} kernrt_timing;
/* Runs once (warm-up, capture in graph mode), then `iters` timed runs on the compute
 * stream, each bracketed by CUDA events. */
KERNRT_API kernrt_status kernrt_time(kernrt_runtime* rt, const char* program,
                                     const char* const* var_names, const uint64_t* var_values,
                                     size_t n_vars, int graph, int iters, kernrt_timing* out);

/* ---- errors and the rest -------------------------------------------------------------------- */

/* The message of the last failure on `rt` ("" if none), or of the last failure on this
 * thread that had no usable handle when rt is NULL. */
KERNRT_API const char* kernrt_last_error(const kernrt_runtime* rt);
/* The same as a JSON array of {"kind", "path", "message"} ("[]" if none). */
KERNRT_API const char* kernrt_last_error_json(const kernrt_runtime* rt);

/* 1 when a CUDA driver and device are present, else 0. */
KERNRT_API int kernrt_device_available(void);

KERNRT_API const char* kernrt_version(void);

KERNRT_API void kernrt_destroy(kernrt_runtime* rt);

#ifdef __cplusplus
}
#endif

#endif /* KERNRT_KERNRT_H */
