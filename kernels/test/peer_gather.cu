// The peer-buffer test kernel: reads every rank's exported slab through the addresses the
// runtime wrote into the peer buffer (kern-schema §1.7 `peer`, §3.7 "Peers").
//
// Entry (grid 1, block 32): test_peer_gather_sm90a(const uint64_t* peers, uint32_t* out,
// int32_t ranks): out[r * 4 + j] = slab of rank r, element j, for r < ranks, j < 4. The
// loads are volatile so they go to memory another process writes, not a cached copy.
#include <cstdint>

extern "C" __global__ void __launch_bounds__(32) test_peer_gather_sm90a(const uint64_t* peers,
                                                                       uint32_t* out,
                                                                       int32_t ranks) {
  const int r = static_cast<int>(threadIdx.x) / 4;
  const int j = static_cast<int>(threadIdx.x) % 4;
  if (r >= ranks) return;
  const volatile uint32_t* slab = reinterpret_cast<const volatile uint32_t*>(peers[r]);
  out[r * 4 + j] = slab[j];
}
