/* embed: the smallest engine on kernrt's C ABI, built against an installed kernrt with
 * find_package(kernrt) (see CMakeLists.txt).
 *
 * `embed --version` prints the library version and whether a device is present (it must
 * start on any machine). `embed MANIFEST CUBIN_DIR` loads the scratch_pair test manifest,
 * writes x (n = 1000), runs program `main` eagerly and as a CUDA graph, reads y and checks
 * y[i] = 2 x[n-1-i] + x[i] bit for bit. Exit codes: 0 ok, 1 wrong result or refused,
 * 2 usage, 77 no CUDA device (ctest reports a skip). It checks nothing else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernrt/kernrt.h"

enum { kN = 1000, kMaxN = 4096, kSkip = 77 };

static int fail(kernrt_runtime* rt, const char* what) {
  fprintf(stderr, "embed: %s: %s\n", what, kernrt_last_error(rt));
  if (rt) kernrt_destroy(rt);
  return 1;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--version") == 0) {
    printf("kernrt %s, CUDA device %s\n", kernrt_version(),
           kernrt_device_available() ? "present" : "absent");
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: embed --version | embed MANIFEST CUBIN_DIR\n");
    return 2;
  }
  if (!kernrt_device_available()) {
    fprintf(stderr, "embed: no CUDA driver/device: nothing to run\n");
    return kSkip;
  }

  kernrt_load_options options;
  kernrt_load_options_init(&options);
  const char* dirs[1] = {argv[2]};
  options.cubin_dirs = dirs;
  options.n_cubin_dirs = 1;
  kernrt_runtime* rt = NULL;
  if (kernrt_load_file(argv[1], &options, &rt) != KERNRT_OK) return fail(NULL, "load");

  static float x[kN], y[kMaxN];
  for (int i = 0; i < kN; ++i) x[i] = (float)((i * 37) % 101) * 0.125f - 6.0f;
  if (kernrt_write_input(rt, "x", x, sizeof(x)) != KERNRT_OK) return fail(rt, "write x");

  const char* names[1] = {"n"};
  const uint64_t values[1] = {kN};
  for (int graph = 0; graph <= 1; ++graph) {
    memset(y, 0, sizeof(y));
    if (kernrt_run(rt, "main", names, values, 1, graph) != KERNRT_OK) return fail(rt, "run");
    size_t written = 0;
    if (kernrt_read_output(rt, "y", y, sizeof(y), &written) != KERNRT_OK) {
      return fail(rt, "read y");
    }
    if (written != sizeof(y)) {
      fprintf(stderr, "embed: y has %zu bytes, expected %zu\n", written, sizeof(y));
      kernrt_destroy(rt);
      return 1;
    }
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
