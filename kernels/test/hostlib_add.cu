// One of the two translation units of libkernrt_test_hostlib.so, the runtime's test of a
// kernel artifact that is a host shared library (a torch-extension-like .so): nvcc writes
// one fatbin container per translation unit into the library's `.nv_fatbin` section, so
// this entry and hostlib_scale.cu's live in different containers.
//
// test_hostlib_add_one_sm90a(const float* x, float* y, int32_t n): y[i] = x[i] + 1 for
// i < n. Grid ceil(n / 128), block 128.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(128)
    test_hostlib_add_one_sm90a(const float* __restrict__ x, float* __restrict__ y, int32_t n) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[i] + 1.0f;
}
