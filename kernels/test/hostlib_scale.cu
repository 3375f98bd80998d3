// The second translation unit of libkernrt_test_hostlib.so (see hostlib_add.cu): its own
// fatbin container, so the runtime must look past the first container to find it.
//
// test_hostlib_scale_sm90a(float* y, int32_t n, float s): y[i] *= s for i < n.
// Grid ceil(n / 128), block 128.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(128)
    test_hostlib_scale_sm90a(float* __restrict__ y, int32_t n, float s) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] *= s;
}
