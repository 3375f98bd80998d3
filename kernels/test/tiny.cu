// The tiny kernel of the runtime-overhead benchmark and the load-time manifest.
//
// Entries (grid 1, block 32):
//   test_tiny_sm90a(uint32_t* counter): counter[0] += KERNRT_TINY_VARIANT + 1
//   test_rank_sm90a(uint32_t* counter, int32_t rank): counter[0] += rank + 1 (the
//     topology manifest's op; only ever refused, never run, by the tests)
// KERNRT_TINY_VARIANT (default 0) makes the bytes of each cubin differ, so the ten-module
// manifest names ten distinct hashes. The work is one add, so a launch costs what the
// launch path costs.
#include <cstdint>

#ifndef KERNRT_TINY_VARIANT
#define KERNRT_TINY_VARIANT 0
#endif

extern "C" __global__ void __launch_bounds__(32) test_tiny_sm90a(uint32_t* counter) {
  if (threadIdx.x == 0) counter[0] += KERNRT_TINY_VARIANT + 1u;
}

extern "C" __global__ void __launch_bounds__(32) test_rank_sm90a(uint32_t* counter,
                                                                 int32_t rank) {
  if (threadIdx.x == 0) counter[0] += static_cast<uint32_t>(rank) + 1u;
}
