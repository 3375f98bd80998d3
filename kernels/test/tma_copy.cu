// TMA tile copy through a runtime-encoded CUtensorMap: the test of tensormap pack fields.
//
// Entries: test_tma_copy2d_sm90a, test_tma_copy3d_sm90a
//   (const __grid_constant__ CUtensorMap map /* bytes<128> pack */, float* dst,
//    int32_t rows, int32_t cols)
// Grid (cols / 32, rows / 8, depth), block 128 threads: block (bx, by, bz) loads the f32 box
// [32 cols, 8 rows(, 1)] at element coordinates (32 bx, 8 by(, bz)) with one TMA and writes
// it to the dense output dst[bz][8 by + r][32 bx + c] (rows x cols per z slice).
// Smem: one 1 KiB tile + one mbarrier. Out-of-bounds box elements arrive zero-filled (the
// manifest leaves oob_nan off), which is how the tests observe a spanning outer dim.
// Supported shapes: rows a multiple of 8, cols a multiple of 32 (the grid must match).
#include <cstdint>

#include "common/ptx.cuh"
#include "test/params.h"

namespace kernrt::test {
namespace {

constexpr uint32_t kCols = kTmaBoxCols;
constexpr uint32_t kRows = kTmaBoxRows;
constexpr uint32_t kTileBytes = kCols * kRows * sizeof(float);
static_assert(kTileBytes % 128 == 0, "a TMA box lands in 128-byte aligned smem");

template <int kRank>
__device__ __forceinline__ void copy_tile(const CUtensorMap* map, float* dst, int32_t rows,
                                          int32_t cols) {
  // ---- smem layout
  __shared__ alignas(128) float tile[kCols * kRows];
  __shared__ alignas(8) uint64_t bar;

  const int32_t x0 = static_cast<int32_t>(blockIdx.x * kCols);
  const int32_t y0 = static_cast<int32_t>(blockIdx.y * kRows);
  const int32_t z = static_cast<int32_t>(blockIdx.z);

  // ---- barrier init
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(map);
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  // ---- producer: one thread issues the box and the byte count it will complete
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(&bar, kTileBytes);
    if constexpr (kRank == 2) {
      ptx::tma_load_2d(tile, map, &bar, x0, y0);
    } else {
      ptx::tma_load_3d(tile, map, &bar, x0, y0, z);
    }
  }

  // ---- consumer: everyone waits for phase 0, then writes the tile out densely
  ptx::mbarrier_wait(&bar, 0);
  for (uint32_t i = threadIdx.x; i < kCols * kRows; i += blockDim.x) {
    const int64_t r = y0 + static_cast<int32_t>(i / kCols);
    const int64_t c = x0 + static_cast<int32_t>(i % kCols);
    dst[(static_cast<int64_t>(z) * rows + r) * cols + c] = tile[i];
  }
}

}  // namespace
}  // namespace kernrt::test

extern "C" __global__ void __launch_bounds__(128)
    test_tma_copy2d_sm90a(const __grid_constant__ CUtensorMap map, float* dst, int32_t rows,
                          int32_t cols) {
  kernrt::test::copy_tile<2>(&map, dst, rows, cols);
}

extern "C" __global__ void __launch_bounds__(128)
    test_tma_copy3d_sm90a(const __grid_constant__ CUtensorMap map, float* dst, int32_t rows,
                          int32_t cols) {
  kernrt::test::copy_tile<3>(&map, dst, rows, cols);
}
