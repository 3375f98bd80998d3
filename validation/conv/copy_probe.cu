// Copy probes (measurement only, never shipped): y = x over n 16-byte vectors, one entry per
// (schedule, load hint, store hint, loads in flight per thread U), to find which property
// of an SM copy decides its rate on the H200 (validation/conv/notes.md run 9). Built by
// validation/conv/build_variants.sh (SET=run9) into copy_probe.sm90a.cubin and timed by
// copy_bench.py next to torch's copy and the driver's cuMemcpyDtoDAsync.
// Schedules (block size and grid are the launcher's choice):
//   gs    grid-strided over every thread of the grid: thread i loads i, i + T, ..., i + (U-1)T
//         (T = all threads), stores them, moves on by U*T (walk 9 of conv_fwd.cu at U = 4);
//   tile  block tiles: tile b is blockDim*U contiguous vectors, thread t loads t + u*blockDim;
//         block b walks tiles b, b + grid, ... (grid = tiles: one short tile per block);
//   warp  warp tiles: 32*U contiguous vectors per warp (lane + u*32), warps grid-strided.
// Load hints: nc256 (ld.global.nc.L1::no_allocate.L2::256B, the conv's), ld (plain), nc
// (ld.global.nc), lu (ld.global.lu). Store hints: cs (st.global.cs, the conv's), wb (plain),
// na (st.global.L1::no_allocate), wt (st.global.wt).
//
// Not checked here: alignment of x and y (16 bytes) and overlap (the launcher passes
// separate tensors); n fits the grid in any schedule (every loop bounds each access by n).
#include <stdint.h>

struct CopyParams {
  const uint4* x;
  uint4* y;
  int64_t n;  // 16-byte vectors
};

namespace {

template <int L>
__device__ __forceinline__ uint4 load(const uint4* p) {
  uint4 v;
  if (L == 0)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if (L == 1)
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if (L == 2)
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else
    asm volatile("ld.global.lu.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

template <int S>
__device__ __forceinline__ void store(uint4* p, uint4 v) {
  if (S == 0)
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w) : "memory");
  else if (S == 1)
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w) : "memory");
  else if (S == 2)
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x),
                 "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  else
    asm volatile("st.global.wt.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w) : "memory");
}

// U vectors at base + u * step (u < U), each bounded by n: all loads, then all stores.
template <int L, int S, int U>
__device__ __forceinline__ void move(const CopyParams& p, int64_t base, int64_t step) {
  uint4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (base + u * step < p.n) v[u] = load<L>(p.x + base + u * step);
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (base + u * step < p.n) store<S>(p.y + base + u * step, v[u]);
}

template <int K, int L, int S, int U>
__device__ __forceinline__ void probe(const CopyParams& p) {
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (K == 0) {  // gs
    const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll 1
    for (int64_t i = first; i < p.n; i += U * threads) move<L, S, U>(p, i, threads);
  } else if (K == 1) {  // tile
    const int64_t tile = static_cast<int64_t>(blockDim.x) * U;
#pragma unroll 1
    for (int64_t b = blockIdx.x; b * tile < p.n; b += gridDim.x)
      move<L, S, U>(p, b * tile + threadIdx.x, blockDim.x);
  } else {  // warp
    const int64_t chunk = 32 * U;
    const int64_t warps = threads / 32;
    const int lane = threadIdx.x & 31;
#pragma unroll 1
    for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
         w * chunk < p.n; w += warps)
      move<L, S, U>(p, w * chunk + lane, 32);
  }
}

}  // namespace

#define PROBE(kname, K, lname, L, sname, S, U)                                            \
  extern "C" __global__ void copy_##kname##_##lname##_##sname##_u##U(                      \
      const __grid_constant__ CopyParams p) {                                               \
    probe<K, L, S, U>(p);                                                                   \
  }
#define PROBE_U(kname, K, lname, L, sname, S) \
  PROBE(kname, K, lname, L, sname, S, 4)      \
  PROBE(kname, K, lname, L, sname, S, 8)      \
  PROBE(kname, K, lname, L, sname, S, 12)     \
  PROBE(kname, K, lname, L, sname, S, 16)
#define PROBE_S(kname, K, lname, L) \
  PROBE_U(kname, K, lname, L, cs, 0) \
  PROBE_U(kname, K, lname, L, wb, 1) \
  PROBE_U(kname, K, lname, L, na, 2) \
  PROBE_U(kname, K, lname, L, wt, 3)
#define PROBE_L(kname, K)      \
  PROBE_S(kname, K, nc256, 0) \
  PROBE_S(kname, K, ld, 1)    \
  PROBE_S(kname, K, nc, 2)    \
  PROBE_S(kname, K, lu, 3)

PROBE_L(gs, 0)
PROBE_L(tile, 1)
PROBE_L(warp, 2)
