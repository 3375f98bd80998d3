// KDA / GDN 64-token chunk: the state step alone with its operand loads pipelined (sm_90a).
// The same contract, math and numerics as kda_chunk64_state.cu (kernels/kda/chunk64.md step 1:
// Chunk64StateParams in, o and the final state out; the per-chunk wgmma chain is
// chunk64_state_step.cuh's chunk64_step, run unchanged, so o and the state are bit-identical
// to that entry's on the same operands). What differs is how a chunk's operands (kq 32 KiB,
// kbt 16 KiB, tmb 8 KiB, aqk 8 KiB, v 16 KiB, gamma 512 B) reach shared memory: the reference
// entry copies them with all threads before each chunk (74 % of its stall samples); here a
// producer warpgroup loads chunk c + 1 while chunk c computes: 883.2 -> 261.6 us at B8 T4096
// H16 V128 (the same process), 87 % of the copy floor of the 960 MB it moves (chunk64.md).
//
// Roles (block 384 = three warpgroups, warp specialised):
//   warpgroups 0-1 (consumers, setmaxnreg 232): X rows as in kda_chunk64_state.cu; per chunk
//     wait FULL[s], fence.proxy.async, chunk64_step on stage s, arrive on EMPTY[s];
//   warpgroup 2 (producer, setmaxnreg 40): per chunk wait EMPTY[s] (from the third chunk on),
//     issue the stage's 5152 16-byte cp.async (128 threads, ~40 each) to the 128B-swizzled
//     places copy_sw128 computes, then cp.async.mbarrier.arrive.noinc on FULL[s].
// Two stages (2 x 82,944 bytes): a third (248,832) does not fit the 232,448-byte opt-in
// shared memory. No layout change and no tensor maps: the operands stay where the prep
// writes them (row-major tiles), the swizzle is applied on the shared side of each cp.async.
//
// Proxies: cp.async writes shared memory in the generic proxy; wgmma reads its B operands
// through the async proxy. The producer arrives without waiting for its copies (noinc: the
// hardware arrives when they complete), so it cannot fence them; each consumer thread instead
// executes fence.proxy.async.shared::cta after it observed FULL (the copies' writes are then
// visible to it in the generic proxy) and before its first wgmma of the chunk. The reverse
// (wgmma reads of stage s, then the producer's generic writes of chunk c + 2) is ordered by
// wgmma_wait_group<0> inside chunk64_step, the consumers' arrive (release) and the producer's
// wait (acquire); the producer adds a proxy fence after that wait as well (one instruction a
// chunk), so the order does not rest on an async-proxy read counting as complete at the wait.
//
// Entry: kda_chunk64_state2_sm90a_f16_k128, one `const __grid_constant__ Chunk64StateParams`;
// grid (V / 128, HV, N), block 384, dynamic shared memory kChunk64State2Smem. Off sm_90a it
// traps (NV_HAS_FEATURE_SM_90a).
// Not checked here (as kda_chunk64_state.cu): V % 128, the operand layouts, that NC chunks of
// operands exist; tails are the caller's.
#include <cuda_fp16.h>
#include <nv/target>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/warpgroup.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_state_step.cuh"

namespace kernrt::kda::c64s2 {

using namespace kernrt::kda::c64;
using kernrt::kda::Chunk64StateParams;

constexpr int kStages = 2;
constexpr int kConsumerThreads = 256;  // two warpgroups of 64 value rows
constexpr int kProducerThreads = 128;  // one warpgroup: setmaxnreg acts per warpgroup
constexpr int kThreads = kConsumerThreads + kProducerThreads;
constexpr int kConsumerRegs = 232, kProducerRegs = 40;
static_assert(kConsumerThreads * kConsumerRegs + kProducerThreads * kProducerRegs <= 65536,
              "the warpgroups' registers fit the register file");

// A stage padded to a multiple of 1024 bytes (82,944): every stage's tiles keep the swizzle atom alignment.
struct alignas(1024) Stage {
  Chunk64Stage t;
};
struct Smem {
  Stage st[kStages];
  uint64_t full[kStages];   // kProducerThreads noinc arrivals: the stage's copies landed
  uint64_t empty[kStages];  // kConsumerThreads arrivals: the stage's reads are done
};
// dynamic shared memory: the layout + the alignment of the base (the generator reads the literal)
constexpr int kChunk64State2Smem = 167936;
static_assert(int(sizeof(Smem)) + 1024 == kChunk64State2Smem, "kChunk64State2Smem is the layout + 1024");
static_assert(kChunk64State2Smem <= 232448, "one block fits the opt-in shared memory");

// cp.async of a [rows][64-element] f16 row block (global row stride `ld` elements) into a
// swizzled shared tile, by producer thread t of kProducerThreads (copy_sw128's places).
__device__ __forceinline__ void load_sw128(__half (*dst)[64], const __half* src, int rows, int ld,
                                           int t) {
#pragma unroll 4
  for (int i = t; i < rows * 8; i += kProducerThreads) {
    const int r = i >> 3, j = i & 7;
    ptx::cp_async_cg_16(&dst[r][8 * (j ^ (r & 7))], src + int64_t(r) * ld + 8 * j);
  }
}

// Chunk `ch`'s operands into stage `st`, in the order the step reads them (v and k a first).
__device__ __forceinline__ void load_stage(const Chunk64StateParams& p, Chunk64Stage& st,
                                           int64_t ch, int v0, int t) {
  const int V = p.dim_v;
#pragma unroll 4
  for (int i = t; i < kC * kVT / 8; i += kProducerThreads) {
    const int r = i / (kVT / 8), j = i % (kVT / 8);
    ptx::cp_async_cg_16(&st.v[r][8 * j], p.v + (ch * kC + r) * V + v0 + 8 * j);
  }
  load_sw128(st.kq[0], p.kq + ch * 2 * kC * kK, 2 * kC, kK, t);
  load_sw128(st.kq[1], p.kq + ch * 2 * kC * kK + 64, 2 * kC, kK, t);
  load_sw128(st.tmb, p.tmb + ch * kC * kC, kC, kC, t);
  load_sw128(st.aqk, p.aqk + ch * kC * kC, kC, kC, t);
  load_sw128(st.kbt, p.kbt + ch * kK * kC, kK, kC, t);
  if (t < kK / 4) ptx::cp_async_cg_16(&st.gamma[4 * t], p.gamma + ch * kK + 4 * t);
}

__device__ __forceinline__ void produce(const Chunk64StateParams& p, Smem& sm, int64_t head,
                                        int v0) {
  const int t = threadIdx.x - kConsumerThreads;
  for (int c = 0; c < p.chunks; ++c) {
    const int s = c % kStages, n = c / kStages;
    if (n > 0) {
      ptx::mbarrier_wait(&sm.empty[s], (n - 1) & 1);  // chunk c - kStages has read stage s
      ptx::fence_proxy_async_shared();                // its wgmma reads before these writes
    }
    load_stage(p, sm.st[s].t, head * p.chunks + c, v0, t);
    ptx::cp_async_mbarrier_arrive_noinc(&sm.full[s]);
  }
  ptx::cp_async_commit_group();  // leave no copy of this thread in flight at its exit
  ptx::cp_async_wait_group<0>();
}

__device__ __forceinline__ void consume(const Chunk64StateParams& p, Smem& sm, int64_t head,
                                        int v0) {
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  const int wg = tid >> 7, wi = (tid >> 5) & 3;
  const int ra = 64 * wg + 16 * wi + (lane >> 2), rb = ra + 8;  // this thread's tile rows
  const int V = p.dim_v;
  float xl[32], xh[32];
  chunk64_load_state(xl, xh, p.x0 + (head * V + v0) * kK, ra, rb, q);
  for (int c = 0; c < p.chunks; ++c) {
    const int s = c % kStages, n = c / kStages;
    const int64_t ch = head * p.chunks + c;
    ptx::mbarrier_wait_converged(&sm.full[s], n & 1);
    ptx::fence_proxy_async_shared();  // the acquired cp.async writes before the wgmma reads
    chunk64_step(xl, xh, sm.st[s].t, p.o + ch * kC * V + v0, V, ra, rb, q);
    ptx::mbarrier_arrive(&sm.empty[s]);  // every wgmma of the step has completed (waited)
  }
  chunk64_store_state(xl, xh, p.xt + (head * V + v0) * kK, ra, rb, q);
}

__device__ __forceinline__ void state2_block(const Chunk64StateParams& p, Smem& sm) {
  const int64_t head = int64_t(blockIdx.z) * gridDim.y + blockIdx.y;
  const int v0 = kVT * blockIdx.x;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&sm.full[s], kProducerThreads);
      ptx::mbarrier_init(&sm.empty[s], kConsumerThreads);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumerThreads) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    produce(p, sm, head, v0);
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consume(p, sm, head, v0);
  }
}

}  // namespace kernrt::kda::c64s2

extern "C" __global__ void __launch_bounds__(kernrt::kda::c64s2::kThreads, 1)
    kda_chunk64_state2_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64StateParams p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // aligned by an offset from the shared array itself, as kda_chunk64_state.cu
    const uint32_t pad = (1024u - (kernrt::ptx::smem_u32(smem_raw) & 1023u)) & 1023u;
    kernrt::kda::c64s2::state2_block(p, *reinterpret_cast<kernrt::kda::c64s2::Smem*>(smem_raw + pad));
  ), (__trap();))
}
