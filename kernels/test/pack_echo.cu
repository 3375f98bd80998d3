// The 1280-byte parameter block echo: the test of pack assembly.
//
// Entries:
//   test_mark_sm90a(uint8_t* mark): writes echo_mark(i) into mark[0..64) (launch 0 of the
//     op, so launch 1 reads scratch a previous launch wrote). Grid 1, block 64.
//   test_pack_echo_sm90a(const __grid_constant__ EchoBlock blk /* bytes<1280> */,
//                        const float* x, uint8_t* out): copies the block as the kernel
//     received it into out[0..1280), then the directly passed pointers, x[0] and the marker
//     read through the block's pointers, and the 32 floats the block's tensormap loads at
//     coordinate 0 (layout in params.h). Grid 1, block 128.
// Deliberately does not interpret the fields: the host test compares bytes.
#include <cstdint>

#include "common/ptx.cuh"
#include "test/params.h"

using kernrt::test::EchoBlock;

extern "C" __global__ void __launch_bounds__(64) test_mark_sm90a(uint8_t* mark) {
  if (threadIdx.x < kernrt::test::kEchoMarkBytes) {
    mark[threadIdx.x] = kernrt::test::echo_mark(threadIdx.x);
  }
}

extern "C" __global__ void __launch_bounds__(128)
    test_pack_echo_sm90a(const __grid_constant__ EchoBlock blk, const float* x, uint8_t* out) {
  // ---- smem layout: one TMA box of x and its barrier
  __shared__ alignas(128) float tile[32];
  __shared__ alignas(8) uint64_t bar;

  // ---- barrier init and the one TMA load through the packed descriptor
  if (threadIdx.x == 0) {
    kernrt::ptx::mbarrier_init(&bar, 1);
    kernrt::ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    kernrt::ptx::mbarrier_arrive_expect_tx(&bar, sizeof(tile));
    kernrt::ptx::tma_load_2d(tile, &blk.x_map, &bar, 0, 0);
  }

  // ---- echo the block byte by byte while the load is in flight
  const uint8_t* raw = reinterpret_cast<const uint8_t*>(&blk);
  for (uint32_t i = threadIdx.x; i < sizeof(EchoBlock); i += blockDim.x) {
    out[kernrt::test::kEchoOutBlock + i] = raw[i];
  }

  // ---- direct pointers and values read through the block's pointers
  if (threadIdx.x == 0) {
    const uint64_t px = reinterpret_cast<uint64_t>(x);
    const uint64_t po = reinterpret_cast<uint64_t>(out);
    const float xv = blk.x[0];
    uint32_t mark = 0;
    for (int b = 0; b < 4; ++b) mark |= static_cast<uint32_t>(blk.scratch[b]) << (8 * b);
    const uint32_t xbits = __float_as_uint(xv);
    for (int b = 0; b < 8; ++b) {
      out[kernrt::test::kEchoOutDirectX + b] = static_cast<uint8_t>(px >> (8 * b));
      out[kernrt::test::kEchoOutDirectOut + b] = static_cast<uint8_t>(po >> (8 * b));
    }
    for (int b = 0; b < 4; ++b) {
      out[kernrt::test::kEchoOutXViaPack + b] = static_cast<uint8_t>(xbits >> (8 * b));
      out[kernrt::test::kEchoOutMarkViaPack + b] = static_cast<uint8_t>(mark >> (8 * b));
    }
  }

  // ---- epilogue: the TMA tile
  kernrt::ptx::mbarrier_wait(&bar, 0);
  if (threadIdx.x < 32) {
    const uint32_t bits = __float_as_uint(tile[threadIdx.x]);
    for (int b = 0; b < 4; ++b) {
      out[kernrt::test::kEchoOutTmaTile + 4 * threadIdx.x + b] =
          static_cast<uint8_t>(bits >> (8 * b));
    }
  }
}
