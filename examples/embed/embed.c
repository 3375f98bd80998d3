/* embed: the smallest engine on kernrt's C ABI, built against an installed kernrt with
 * find_package(kernrt) (see CMakeLists.txt).
 *
 * `embed --version` prints the library version and whether a device is present (it must
 * start on any machine, so the CUDA driver is opened at run time here too).
 * `embed MANIFEST CUBIN_DIR` loads the scratch_pair test manifest, writes x (n = 1000), runs
 * program `main` eagerly and as a CUDA graph, reads y and checks y[i] = 2 x[n-1-i] + x[i]
 * bit for bit.
 * `embed --engine [--exact] MANIFEST CUBIN_DIR PROGRAM INPUT_DIR [var=value ...]` is an
 * engine's loop: every input buffer with a file INPUT_DIR/<name>.bin is run once the plain way
 * (kernrt_write_input + kernrt_run + kernrt_read_output, the reference), then the engine's
 * way: it writes the same bytes in place through kernrt_buffer_device_ptr with its own copies
 * on its own stream, enqueues PROGRAM there as a replayed graph (3 steps), reads every output
 * in place and compares it with the reference. With --exact the bytes must be identical.
 * Without it a bf16 output may differ by 2 ulp of its largest element: the decode kernel's work-stealing
 * schedule (sequences of unequal length) merges split partials in the order its CTAs finish,
 * so two plain runs may differ in the last bits too; equal lengths take its static schedule,
 * whose merge order is fixed, and are the --exact case.
 * Exit codes: 0 ok, 1 wrong result or refused, 2 usage, 77 no CUDA device (ctest: skip). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernrt/kernrt.h"

enum { kN = 1000, kMaxN = 4096, kSkip = 77, kMaxVars = 16, kSteps = 3 };

static int fail(kernrt_runtime* rt, const char* what) {
  fprintf(stderr, "embed: %s: %s\n", what, kernrt_last_error(rt));
  if (rt) kernrt_destroy(rt);
  return 1;
}

static kernrt_runtime* load(const char* manifest, const char* cubins) {
  kernrt_load_options options;
  kernrt_load_options_init(&options);
  const char* dirs[1] = {cubins};
  options.cubin_dirs = dirs;
  options.n_cubin_dirs = 1;
  kernrt_runtime* rt = NULL;
  if (kernrt_load_file(manifest, &options, &rt) != KERNRT_OK) {
    fprintf(stderr, "embed: load: %s\n", kernrt_last_error(NULL));
    return NULL;
  }
  return rt;
}

static int scratch_pair(const char* manifest, const char* cubins) {
  kernrt_runtime* rt = load(manifest, cubins);
  if (!rt) return 1;
  static float x[kN], y[kMaxN];
  for (int i = 0; i < kN; ++i) x[i] = (float)((i * 37) % 101) * 0.125f - 6.0f;
  if (kernrt_write_input(rt, "x", x, sizeof(x)) != KERNRT_OK) return fail(rt, "write x");
  const char* names[1] = {"n"};
  const uint64_t values[1] = {kN};
  for (int graph = 0; graph <= 1; ++graph) {
    memset(y, 0, sizeof(y));
    if (kernrt_run(rt, "main", names, values, 1, graph) != KERNRT_OK) return fail(rt, "run");
    size_t written = 0;
    if (kernrt_read_output(rt, "y", y, sizeof(y), &written) != KERNRT_OK) return fail(rt, "read y");
    for (int i = 0; i < kN; ++i) {
      const float want = 2.0f * x[kN - 1 - i] + x[i];
      if (y[i] != want) {
        fprintf(stderr, "embed: %s y[%d] = %g, expected %g\n", graph ? "graph" : "eager", i,
                (double)y[i], (double)want);
        kernrt_destroy(rt);
        return 1;
      }
    }
  }
  kernrt_destroy(rt);
  printf("embed: scratch_pair n=%d correct, eager and graph\n", kN);
  return 0;
}

/* ---- the engine's own driver entry points (an engine has CUDA; it opens it like kernrt) ---- */
typedef int (*StreamCreate)(void**, unsigned);
typedef int (*StreamSync)(void*);
typedef int (*StreamDestroy)(void*);
typedef int (*CopyHtoD)(uint64_t, const void*, size_t, void*);
typedef int (*CopyDtoH)(void*, uint64_t, size_t, void*);
static struct {
  StreamCreate stream_create;
  StreamSync stream_sync;
  StreamDestroy stream_destroy;
  CopyHtoD htod;
  CopyDtoH dtoh;
} cu;

static int open_cuda(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  cu.stream_create = (StreamCreate)dlsym(h, "cuStreamCreate");
  cu.stream_sync = (StreamSync)dlsym(h, "cuStreamSynchronize");
  cu.stream_destroy = (StreamDestroy)dlsym(h, "cuStreamDestroy_v2");
  cu.htod = (CopyHtoD)dlsym(h, "cuMemcpyHtoDAsync_v2");
  cu.dtoh = (CopyDtoH)dlsym(h, "cuMemcpyDtoHAsync_v2");
  return cu.stream_create && cu.stream_sync && cu.stream_destroy && cu.htod && cu.dtoh;
}

static void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc(n > 0 ? (size_t)n : 1);
  if (data && n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = n > 0 ? (size_t)n : 0;
  return data;
}

static float bf16_value(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Every bf16 element of a within 2 units of the last place of the largest |b| of b. A sum
 * taken in another order moves by a few ulp of its largest terms, not of the result (an
 * attention output is a weighted mean of values of both signs: many results lie near zero),
 * so the scale is the buffer's, not the element's. */
static int close_bf16(const void* a, const void* b, size_t bytes) {
  const uint16_t* x = a;
  const uint16_t* y = b;
  float scale = 0.0f;
  for (size_t i = 0; i < bytes / 2; ++i) {
    const float fy = bf16_value(y[i]);
    const float m = fy < 0 ? -fy : fy;
    if (m != m) return 0;  /* NaN */
    if (m > scale) scale = m;
  }
  for (size_t i = 0; i < bytes / 2; ++i) {
    const float d = bf16_value(x[i]) - bf16_value(y[i]);
    if (!((d < 0 ? -d : d) <= scale * (2.0f / 128.0f))) return 0;
  }
  return 1;
}

static int engine(int argc, char** argv) {
  const int exact = strcmp(argv[2], "--exact") == 0;
  if (exact) {  /* drop the flag: the positional arguments follow it */
    --argc;
    ++argv;
  }
  if (argc < 6) {
    fprintf(stderr, "embed: --engine needs MANIFEST CUBIN_DIR PROGRAM INPUT_DIR\n");
    return 2;
  }
  const char* program = argv[4];
  const char* input_dir = argv[5];
  const char* names[kMaxVars];
  uint64_t values[kMaxVars];
  size_t n_vars = 0;
  for (int i = 6; i < argc && n_vars < kMaxVars; ++i, ++n_vars) {
    char* eq = strchr(argv[i], '=');
    if (!eq) {
      fprintf(stderr, "embed: `%s` is not var=value\n", argv[i]);
      return 2;
    }
    *eq = '\0';
    names[n_vars] = argv[i];
    values[n_vars] = strtoull(eq + 1, NULL, 10);
  }
  if (!open_cuda()) {
    fprintf(stderr, "embed: cannot open the CUDA driver's entry points\n");
    return 1;
  }
  kernrt_runtime* rt = load(argv[2], argv[3]);
  if (!rt) return 1;
  const size_t n_buffers = kernrt_buffer_count(rt);
  void** inputs = calloc(n_buffers, sizeof(void*));
  size_t* input_bytes = calloc(n_buffers, sizeof(size_t));
  void** reference = calloc(n_buffers, sizeof(void*));
  int status = 0, n_inputs = 0, n_outputs = 0;
  for (size_t b = 0; b < n_buffers && status == 0; ++b) {  /* the plain way */
    kernrt_buffer_info info;
    info.struct_size = sizeof info;
    const char* name = kernrt_buffer_name(rt, b);
    if (kernrt_get_buffer_info(rt, name, &info) != KERNRT_OK) status = fail(rt, "buffer info");
    if (status == 0 && strcmp(info.kind, "input") == 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.bin", input_dir, name);
      inputs[b] = read_file(path, &input_bytes[b]);
      if (inputs[b] && kernrt_write_input(rt, name, inputs[b], input_bytes[b]) != KERNRT_OK) {
        status = fail(rt, "write_input");
      }
      n_inputs += inputs[b] != NULL;
    }
  }
  /* The reference runs the same graph path the engine uses (kernrt_run with graph = 1). */
  if (status == 0 && kernrt_run(rt, program, names, values, n_vars, 1) != KERNRT_OK) {
    status = fail(rt, "run");
  }
  for (size_t b = 0; b < n_buffers && status == 0; ++b) {
    kernrt_buffer_info info;
    info.struct_size = sizeof info;
    kernrt_get_buffer_info(rt, kernrt_buffer_name(rt, b), &info);
    if (strcmp(info.kind, "output") != 0) continue;
    reference[b] = malloc(info.bytes);
    if (kernrt_read_output(rt, kernrt_buffer_name(rt, b), reference[b], info.bytes, NULL) != KERNRT_OK) {
      status = fail(rt, "read_output");
    }
    ++n_outputs;
  }
  void* stream = NULL;  /* the engine's way: its own stream, in-place I/O, replayed graphs */
  if (status == 0 && cu.stream_create(&stream, 1 /* non-blocking */) != 0) {
    fprintf(stderr, "embed: cuStreamCreate failed\n");
    status = 1;
  }
  for (int step = 0; step < kSteps && status == 0; ++step) {
    for (size_t b = 0; b < n_buffers && status == 0; ++b) {
      if (!inputs[b]) continue;
      uint64_t ptr = 0;
      size_t bytes = 0;
      if (kernrt_buffer_device_ptr(rt, kernrt_buffer_name(rt, b), &ptr, &bytes) != KERNRT_OK) {
        status = fail(rt, "buffer_device_ptr");
      } else if (cu.htod(ptr, inputs[b], input_bytes[b], stream) != 0) {
        fprintf(stderr, "embed: cuMemcpyHtoDAsync failed\n");
        status = 1;
      }
    }
    if (status == 0 && kernrt_enqueue(rt, program, names, values, n_vars, 1, stream) != KERNRT_OK) {
      status = fail(rt, "enqueue");
    }
  }
  int rounding_only = 0;
  for (size_t b = 0; b < n_buffers && status == 0; ++b) {
    if (!reference[b]) continue;
    const char* name = kernrt_buffer_name(rt, b);
    uint64_t ptr = 0;
    size_t bytes = 0;
    kernrt_buffer_device_ptr(rt, name, &ptr, &bytes);
    void* mine = malloc(bytes);
    if (cu.dtoh(mine, ptr, bytes, stream) != 0 || cu.stream_sync(stream) != 0) {
      fprintf(stderr, "embed: reading `%s` in place failed\n", name);
      status = 1;
    } else if (memcmp(mine, reference[b], bytes) != 0) {
      kernrt_buffer_info info;
      info.struct_size = sizeof info;
      kernrt_get_buffer_info(rt, name, &info);
      if (exact || strcmp(info.dtype, "bf16") != 0 || !close_bf16(mine, reference[b], bytes)) {
        fprintf(stderr, "embed: output `%s` differs from kernrt_run's%s\n", name,
                exact ? " (--exact: the bytes must be identical)" : " beyond bf16 rounding");
        status = 1;
      } else {
        rounding_only = 1;
      }
    }
    free(mine);
  }
  if (stream) cu.stream_destroy(stream);
  for (size_t b = 0; b < n_buffers; ++b) {
    free(inputs[b]);
    free(reference[b]);
  }
  free(inputs);
  free(input_bytes);
  free(reference);
  if (status == 0) {
    printf("embed: engine loop on `%s`: %d inputs written in place, %d graph steps on its own "
           "stream, %d outputs read in place, %s\n", program, n_inputs, kSteps, n_outputs,
           rounding_only ? "equal to kernrt_run's within bf16 rounding (split partials merged in "
                           "completion order)"
                         : "byte-identical to kernrt_run's");
    kernrt_destroy(rt);
  }
  return status;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("kernrt %s, CUDA device %s\n", kernrt_version(),
           kernrt_device_available() ? "present" : "absent");
    return 0;
  }
  const int is_engine = argc >= 6 && strcmp(argv[1], "--engine") == 0;
  if (!is_engine && argc != 3) {
    fprintf(stderr, "usage: embed --version | embed MANIFEST CUBIN_DIR |\n"
                    "       embed --engine [--exact] MANIFEST CUBIN_DIR PROGRAM INPUT_DIR [var=value ...]\n");
    return 2;
  }
  if (!kernrt_device_available()) {
    fprintf(stderr, "embed: no CUDA driver/device: nothing to run\n");
    return kSkip;
  }
  return is_engine ? engine(argc, argv) : scratch_pair(argv[1], argv[2]);
}
