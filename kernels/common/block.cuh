// Block-wide reductions over ints for kernels of `Warps` full warps (Warps * 32 threads):
// a sum, an exclusive prefix sum in thread order, and an argmax, each returned to every
// thread. Warp shuffles, then one int (two for argmax) per warp through shared `tmp`.
//
// Contract: every thread of the block calls with the same `tmp`, `warp` = threadIdx.x / 32
// and `lane` = threadIdx.x % 32. Each call holds one __syncthreads (after the per-warp
// writes); the caller's next __syncthreads separates a second use of the same `tmp`.
// Deliberately does not check: overflow of the sum, or that the block has exactly Warps warps.
#pragma once

namespace kernrt::block {

// Sum over the block's threads. `tmp` holds Warps ints.
template <int Warps>
__device__ __forceinline__ int sum(int v, int* tmp, int warp, int lane) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) tmp[warp] = v;
  __syncthreads();
  int total = 0;
#pragma unroll
  for (int w = 0; w < Warps; ++w) total += tmp[w];
  return total;
}

// Exclusive prefix sum over the block's threads in thread order. `tmp` holds Warps ints.
template <int Warps>
__device__ __forceinline__ int exclusive_scan(int v, int* tmp, int warp, int lane) {
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) tmp[warp] = x;
  __syncthreads();
  for (int w = 0; w < warp; ++w) x += tmp[w];
  return x - v;
}

// The index of the block's (value, index) with the largest value, ties to the smaller index.
// `tmp` holds 2 x Warps ints.
template <int Warps>
__device__ __forceinline__ int argmax(int v, int idx, int* tmp, int warp, int lane) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const int v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    if (v2 > v || (v2 == v && i2 < idx)) {
      v = v2;
      idx = i2;
    }
  }
  if (lane == 0) {
    tmp[2 * warp] = v;
    tmp[2 * warp + 1] = idx;
  }
  __syncthreads();
  int bv = tmp[0], bi = tmp[1];
#pragma unroll
  for (int w = 1; w < Warps; ++w) {
    if (tmp[2 * w] > bv || (tmp[2 * w] == bv && tmp[2 * w + 1] < bi)) {
      bv = tmp[2 * w];
      bi = tmp[2 * w + 1];
    }
  }
  return bi;
}

}  // namespace kernrt::block
