// A two-launch op through scratch: the test of scratch allocation and launch order.
//
// Entries (grid ceil_div(n, 128), block 128, one thread per element):
//   test_double_sm90a(const float* x, float* t, int32_t n):        t[i] = 2 x[i]
//   test_reverse_add_sm90a(const float* t, const float* x, float* y, int32_t n):
//                                                                  y[i] = t[n-1-i] + x[i]
// Element i of launch 2 reads what another block of launch 1 wrote, so a missing order
// between the launches shows up as wrong values. Both steps are exact or one IEEE add, so
// a host reference matches bit for bit.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(128)
    test_double_sm90a(const float* x, float* t, int32_t n) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) t[i] = 2.0f * x[i];
}

extern "C" __global__ void __launch_bounds__(128)
    test_reverse_add_sm90a(const float* t, const float* x, float* y, int32_t n) {
  const int32_t i = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = t[n - 1 - i] + x[i];
}
