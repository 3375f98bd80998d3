// KDA / GDN 64-token chunk: the state step alone with its operand loads pipelined (sm_90a).
// The same math and numerics as kda_chunk64_state.cu (kernels/kda/chunk64.md step 1: the
// per-chunk wgmma chain is chunk64_state_step.cuh's chunk64_step, run unchanged, so the state
// is bit-identical to that entry's on the same operands, and o equal to its fp32 o rounded to
// bf16). Pack Chunk64State2Params (chunk64_params.h): the same operands at the slots the preps
// write, dense or varlen sequences, v read and o written (bf16, round to nearest even) in the
// product layout [rows, HV, V], the states by line (a pool, or dense [N, HV, V, K]; none: zeros
// / not written). The reference entry reads v and writes fp32 o as chunk rows [N, HV, NC, 64,
// V]: 268 MB of the 960 MB it moved at B8 T4096 H16 V128; the bf16 o is 134 MB less. o leaves each
// consumer warp through a 2 KiB tile of shared memory (OutBf16: 4 stmatrix.trans, 4 LDS.128,
// 4 STG.128 of whole 32-byte sectors per thread and chunk, after the 16 bf16x2 packs) instead
// of 32 strided 2-byte stores of half-filled sectors from the accumulator layout (those need
// 16 PRMT for the high halves as well: 48 instructions against 12, and twice the L2 write
// requests); a bulk copy per 32-byte token row would be 64 per warp and chunk, a TMA tensor
// store needs tensor maps this entry does not take. The loop's SASS: 2112 instructions (2104
// with the fp32 o), STG 36 (64), F2FP 80 (64), 4 STSM, 168 registers, no local memory.
// What differs otherwise is how a chunk's operands (kq 32 KiB, kbt 16 KiB, tmb 8 KiB, aqk 8
// KiB, v 16 KiB, gamma 512 B) reach shared memory: the reference entry copies them with all threads before each chunk (74 % of its stall samples); here a
// producer warpgroup loads chunk c + 1 while chunk c computes: 883.2 -> 261.6 us at B8 T4096
// H16 V128 (the same process, with the fp32 o), 87 % of the copy floor of the 960 MB it moved
// then (chunk64.md); with the bf16 o (826 MB) 250.3 us (call k8a).
//
// Roles (block 384 = three warpgroups, warp specialised):
//   warpgroups 0-1 (consumers, setmaxnreg 232): X rows as in kda_chunk64_state.cu; per chunk
//     wait FULL[s][0], fence.proxy.async, chunk64_step on stage s (which waits for FULL[s][1]
//     after its first product), arrive on EMPTY[s];
//   warpgroup 2 (producer, setmaxnreg 40): per chunk wait EMPTY[s] (from the third chunk on),
//     issue the stage's 4768 16-byte cp.async (128 threads, ~37 each) to the 128B-swizzled
//     places copy_sw128 computes (v's chunks at v_chunk's, for the step's ldmatrix.trans),
//     with cp.async.mbarrier.arrive.noinc on FULL[s][0] after v
//     and [k a; q a] and on FULL[s][1] after the rest (load_stage).
// Blocks that keep no o (context parallel's phase 1 past segment 0: from-zero B tiles and
// X = I transition tiles) run chunk64_step without its o products (3 of its 8 waited wgmma
// groups) and load no q a or Aqk (24 of the stage's 82 KiB): B1 T32768 H16 CP 8 1176.8 ->
// 1090.8 us, GDN 1031.7 -> 939.7 (validation/kda/notes.md). With the transition bounds (GDN:
// Chunk64State2Params::bound) phase 1 runs a segment's trailing chunks alone where the decay
// allows (warm_start, plan_of): B1 T32768 H16 GDN 820.3 -> 619.6 us (bound 2^-24; now 2^-16).
// Two entries: KDA's, and GDN's (kScalarDecay: its prep leaves the per-token decay out of kq and
// writes no kbt; chunk64_step applies it, the stage loads 16 KiB less a chunk; with the prep's
// 16 KiB fewer writes: B1 T32768 H16 GDN 619.6 -> 573.3 us, validation/kda/notes.md).
// Each stage completes two barriers: v with [k a; q a] (what the step's first product reads)
// and the rest, which the consumers wait for after that product: B1 T32768 H16 one pass
// 2406.4 -> 2230.7 us, CP 8 1090.8 -> 1075.1 (validation/kda/notes.md, calls e3 / e6).
// tmb and aqk are lower block-triangular: their zero upper blocks are not copied (the stage's
// places zeroed once): 6 of 98 KiB a chunk, same bits, times within run-to-run spread (f1, f3).
// Two stages (2 x 82,944 bytes) + the o tiles (16 KiB): a third stage does not fit the
// 232,448-byte opt-in shared memory. No layout change and no tensor maps: the operands stay
// where the prep writes them (row-major tiles), the swizzle is applied on the shared side of
// each cp.async.
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
// Entries: kda_chunk64_state2{,_gdn}_sm90a_f16_k128, one `const __grid_constant__
// Chunk64State2Params`; grid (V / 128, HV, seqs), block 384, dynamic shared memory
// kChunk64State2Smem; kda_chunk64_cp_order_sm90a (chunk64_cp_order.cuh), the same pack, grid 1,
// block 1024, before a varlen exact context parallel's phase 1. Off sm_90a they trap
// (NV_HAS_FEATURE_SM_90a).
// Not checked here: V % 128, the extents of the buffers, the lines and cu_seqlens (the
// generator's manifest and the caller's); the operands of tokens past a sequence's end are the
// prep's (zeros: their o is not stored).
#include <cuda_fp16.h>
#include <nv/target>
#include <stdint.h>

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/warpgroup.cuh"
#include "kda/chunk64_cp_order.cuh"
#include "kda/chunk64_params.h"
#include "kda/chunk64_seqs.cuh"
#include "kda/chunk64_state_step.cuh"

namespace kernrt::kda::c64s2 {

using namespace kernrt::kda::c64;
using kernrt::kda::Chunk64State2Params;

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
constexpr int kConsumerWarps = kConsumerThreads / 32;
struct Smem {
  Stage st[kStages];
  // per consumer warp its o tile, bf16 [64 tokens][16 value rows] (32-byte token rows, the
  // two 16-byte halves swapped on rows with bit 2 set: OutBf16)
  uint16_t ot[kConsumerWarps][kC][16];
  uint64_t full[kStages][2];  // kProducerThreads noinc arrivals each: v and [k a; q a]
                              // landed, the rest landed (load_stage)
  uint64_t empty[kStages];  // kConsumerThreads arrivals: the stage's reads are done
};
// dynamic shared memory: the layout + the alignment of the base (the generator reads the literal)
constexpr int kChunk64State2Smem = 184320;
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

// The same for a [64][64] tile whose upper blocks (16 x 16 block row I < column J) are zero
// (tmb, aqk: the preps write those zeros): row r copies its 16-byte chunks j < 2 (r / 16 + 1)
// alone, 320 of the 512, so the 32-byte sectors of the zero blocks are never read (6 of a
// chunk's 98 KiB of traffic with o); their places in the stage were zeroed once by
// zero_upper_blocks and no copy writes them.
__device__ __forceinline__ void load_sw128_lower(__half (*dst)[64], const __half* src, int t) {
#pragma unroll
  for (int i = t; i < kC * 8; i += kProducerThreads) {
    const int r = i >> 3, j = i & 7;
    if ((j >> 1) <= (r >> 4)) ptx::cp_async_cg_16(&dst[r][8 * (j ^ (r & 7))], src + r * kC + 8 * j);
  }
}

// The operands of the chunk at slot `ch` into stage `st`, in the order the step reads them (v
// and k a first), in two parts: v and [k a; q a] complete `first` (the step's first product
// needs them), the rest `rest` (the step waits for it after that product). v: the chunk's
// token rows from `vc` (token stride `ld` elements), zeros past the sequence's `live` tokens
// (the step multiplies them by zero betas: they must be finite).
// Without o (kWithO false) the q a rows and Aqk stay in global memory: 24 of the 82 KiB.
// kScalarDecay (GDN's entry): no kbt (its u product reads k^'s rows transposed); the
// per-token decays from p.tok into eab with the first part (the step applies a_t right after
// its first product): 16 of the 82 KiB.
template <bool kWithO, bool kScalarDecay>
__device__ __forceinline__ void load_stage(const Chunk64State2Params& p, Chunk64Stage& st,
                                           int64_t ch, const uint16_t* vc, int64_t ld, int live,
                                           uint64_t* first, uint64_t* rest, int t) {
  static_assert(kProducerThreads % (kVT / 8) == 0 && (kProducerThreads / (kVT / 8)) % 8 == 0,
                "a thread's v chunk and its rows' r % 8 stay fixed");
  {  // v's chunk j of token row r at v_chunk(j, r), fixed per thread
    const int j = t % (kVT / 8), r0 = t / (kVT / 8), jp = v_chunk(j, r0);
#pragma unroll 4
    for (int r = r0; r < kC; r += kProducerThreads / (kVT / 8)) {
      const bool ok = r < live;
      ptx::cp_async_cg_16_zfill(&st.v[r][8 * jp], vc + (ok ? r * ld : 0) + 8 * j, ok ? 16u : 0u);
    }
  }
  constexpr int kq_rows = kWithO ? 2 * kC : kC;  // [k a; q a] or k a alone
  load_sw128(st.kq[0], p.kq + ch * 2 * kC * kK, kq_rows, kK, t);
  load_sw128(st.kq[1], p.kq + ch * 2 * kC * kK + 64, kq_rows, kK, t);
  if (kScalarDecay && t < 2 * kC / 4) ptx::cp_async_cg_16(&st.eab[0][4 * t], p.tok + ch * 2 * kC + 4 * t);
  ptx::cp_async_mbarrier_arrive_noinc(first);  // tracks every copy above
  load_sw128_lower(st.tmb, p.tmb + ch * kC * kC, t);
  if constexpr (kWithO) load_sw128_lower(st.aqk, p.aqk + ch * kC * kC, t);
  if constexpr (!kScalarDecay) load_sw128(st.kbt, p.kbt + ch * kK * kC, kK, kC, t);
  if (t < kK / 4) ptx::cp_async_cg_16(&st.gamma[4 * t], p.gamma + ch * kK + 4 * t);
  ptx::cp_async_mbarrier_arrive_noinc(rest);
}

// o of one chunk as bf16 in the product layout, for a consumer warp: its 16 value rows x 64
// tokens go through the warp's tile (4 stmatrix.trans: the accumulator's (value row, token
// pair) fragments land as token rows of 8 values) and leave as 16-byte stores, two per token
// row (32 bytes: whole sectors), 4 per lane. `ob` is token 0 of the chunk at the warp's first
// value row, `ld` the token stride (HV V elements), `live` the chunk's tokens before T.
// The stored row's halves are swapped on tokens with bit 2 set, so that the 8 rows of one
// stmatrix matrix (32-byte stride) and the 8 lanes of one 128-byte read fall on distinct banks.
struct OutBf16 {
  uint16_t (*tile)[16];
  uint16_t* ob;
  int64_t ld;
  int live, lane;
  __device__ __forceinline__ void operator()(const float (&o)[32]) const {
    uint32_t h[16];  // h[2j]: row ra, tokens 8j + 2q + {0,1}; h[2j + 1]: row rb
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      h[2 * j] = ptx::pack_bf16x2(o[4 * j], o[4 * j + 1]);
      h[2 * j + 1] = ptx::pack_bf16x2(o[4 * j + 2], o[4 * j + 3]);
    }
    const uint32_t base = ptx::smem_u32(tile);
    __syncwarp();  // the previous chunk's reads of the tile are done
    // matrix m = lane / 8 of stmatrix u: tokens 8 (2u + m / 2) + lane % 8, value half m % 2
    const int mi = lane >> 3, ti = lane & 7;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = 8 * (2 * u + (mi >> 1)) + ti, half = (mi & 1) ^ ((t >> 2) & 1);
      ptx::stmatrix_x4_trans(base + 32 * t + 16 * half, h[4 * u], h[4 * u + 1], h[4 * u + 2],
                             h[4 * u + 3]);
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int t = 16 * k + (lane >> 1), half = lane & 1;
      const uint4 w = *reinterpret_cast<const uint4*>(&tile[t][8 * (half ^ ((t >> 2) & 1))]);
      if (t < live) ptx::st_global_v4_b32(ob + t * ld + 8 * half, w);
    }
  }
};

// What one block computes (context parallel: kernels/kda/README.md "Long sequences", the same
// plan as kda_chunk.cu's tile_plan): its chunks, where its rows start and end, o or not.
struct Plan {
  int c0, c1;         // chunks c0 .. c1 - 1 of the sequence
  const float* x0;    // initial rows (null: zeros)
  bool identity;      // X = I: the transition tile (v reads as zeros, no o)
  float* x1;          // final rows (null: not stored)
  bool out;           // o computed and stored (false: X's products alone, chunk64_step)
  bool exit;
  float* zero_m;      // a dropped transition: its [K, K] written as zeros, nothing else run
};

// Decay-bounded context parallel (Chunk64State2Params::bound, which GDN's prep writes). With
// S_w the state entering chunk w of a segment that ends at chunk c1 - 1, its end state is
// S_w Phi + (the end state from zero over w .. c1 - 1), |S_w Phi| <= 2^(the sum of the chunks'
// bounds) |S_w|. Where that sum is below 2^kWarmLog2, phase 1 runs the segment from zero over
// those trailing chunks alone and its transition M (|M| <= the same bound) is zero: the state
// gives up terms below 2^-16 |S_w| (1.5e-5 relative, 30x below the ~4.6e-4 of f16 rounding the
// state already carries, chunk64_model; fp32's 2^-24 was the bound before: B1 T32768 H16
// 549.3 -> 537.2 us with the combine's zero skip, the checks' error unchanged), and the inputs
// of the dropped chunks do not reach the end state. flash-qla's GDN does the same with e^-10
// (2^-14.4). With fla's init gates at B1 T32768 H16 most heads need a few chunks, the
// longest-lived ~20 (validation/kda/notes.md). Without a bound, or where no suffix of the
// segment sums below it, the segment is exact (phase 1 from zero and from X = I, as KDA's).
constexpr float kWarmLog2 = -16.f;

// The latest chunk w in [c0, c1) whose bounds w .. c1 - 1 sum below kWarmLog2, or -1 (none).
// Each warp computes it alone (no shared memory, no barrier; all its lanes converged), 32
// chunks a round from the end: lane l takes chunk base - l, an inclusive scan, a ballot. A NaN
// bound ends the search at it: the chunks before it are never dropped.
__device__ __forceinline__ int warm_start(const float* bound, const SeqChunks& sc, int c0, int c1) {
  const int lane = threadIdx.x & 31;
  float carry = 0.f;
  for (int base = c1 - 1; base >= c0; base -= 32) {
    const int c = base - lane;
    float b = c >= c0 ? bound[sc.slot0 + int64_t(c) * sc.step] : 0.f;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, b, d);
      if (lane >= d) b += y;
    }
    b += carry;
    const uint32_t hit = __ballot_sync(0xffffffffu, c >= c0 && b < kWarmLog2);
    if (hit) return base - (__ffs(hit) - 1);
    carry = __shfl_sync(0xffffffffu, b, 31);
    if (carry != carry) return -1;  // NaN: nothing before it is dropped
  }
  return -1;
}

template <bool kWithO, bool kScalarDecay>
__device__ __forceinline__ void produce(const Chunk64State2Params& p, Smem& sm, const SeqChunks& sc,
                                        const Plan& pl, int v0) {
  const int t = threadIdx.x - kConsumerThreads;
  const int64_t ld = int64_t(gridDim.y) * p.dim_v;  // HV V: the token stride of v
  const uint16_t* vb = p.v + sc.row0 * ld + int64_t(blockIdx.y) * p.dim_v + v0;
  for (int c = pl.c0; c < pl.c1; ++c) {
    const int s = (c - pl.c0) % kStages, n = (c - pl.c0) / kStages;
    if (n > 0) {
      ptx::mbarrier_wait(&sm.empty[s], (n - 1) & 1);  // chunk c - kStages has read stage s
      ptx::fence_proxy_async_shared();                // its wgmma reads before these writes
    }
    load_stage<kWithO, kScalarDecay>(p, sm.st[s].t, sc.slot0 + int64_t(c) * sc.step,
                       vb + int64_t(c) * kC * ld, ld, pl.identity ? 0 : sc.len - kC * c,
                       &sm.full[s][0], &sm.full[s][1], t);
  }
  ptx::cp_async_commit_group();  // leave no copy of this thread in flight at its exit
  ptx::cp_async_wait_group<0>();
}

// Sequence n's state line in `base` (chunk64_params.h: null, or line 0 of a table: none).
template <class T>
__device__ __forceinline__ T* state_line(T* base, const int32_t* lines, int64_t stride, int n) {
  if (base == nullptr) return nullptr;
  const int line = lines ? lines[n] : n;
  if (lines && line == 0) return nullptr;
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(base) + uint64_t(line) * stride);
}

// The consumer's chunks of the plan, with o (kOut) or X's products alone (chunk64_step).
template <bool kOut, bool kTree, bool kScalarDecay>
__device__ __forceinline__ void consume_chunks(float (&xl)[32], float (&xh)[32], Smem& sm,
                                               const SeqChunks& sc, const Plan& pl, uint16_t* ob,
                                               int64_t ld, int ra, int rb, int q) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int c = pl.c0; c < pl.c1; ++c) {
    const int s = (c - pl.c0) % kStages, n = (c - pl.c0) / kStages;
    ptx::mbarrier_wait_converged(&sm.full[s][0], n & 1);
    ptx::fence_proxy_async_shared();  // the acquired cp.async writes before the wgmma reads
    const OutBf16 out{sm.ot[warp], ob + int64_t(c) * kC * ld, ld, sc.len - kC * c, lane};
    const auto rest = [&] {  // the step's other operands, after its first product
      ptx::mbarrier_wait_converged(&sm.full[s][1], n & 1);
      ptx::fence_proxy_async_shared();
    };
    chunk64_step<OutBf16, kOut, kTree, kScalarDecay>(xl, xh, sm.st[s].t, out, ra, rb, q, rest);
    ptx::mbarrier_arrive(&sm.empty[s]);  // every wgmma of the step has completed (waited)
  }
}

template <bool kScalarDecay>
__device__ __forceinline__ void consume(const Chunk64State2Params& p, Smem& sm, const SeqChunks& sc,
                                        const Plan& pl, int v0) {
  const int tid = threadIdx.x, lane = tid & 31, q = lane & 3;
  const int wg = tid >> 7, wi = (tid >> 5) & 3;
  const int ra = 64 * wg + 16 * wi + (lane >> 2), rb = ra + 8;  // this thread's tile rows
  const int V = p.dim_v, HV = gridDim.y, warp = tid >> 5;
  // o: token 0 of the sequence at this warp's 16 value rows
  const int64_t ld = int64_t(HV) * V;
  uint16_t* ob = p.o + sc.row0 * ld + int64_t(blockIdx.y) * V + v0 + 16 * warp;
  float xl[32], xh[32];
  if (pl.x0 != nullptr) {
    chunk64_load_state(xl, xh, pl.x0, ra, rb, q);
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // zeros, or the identity: row r has 1 at key channel r
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * j + 2 * q + e;
        const float a = pl.identity && col == ra ? 1.f : 0.f, b = pl.identity && col == rb ? 1.f : 0.f;
        if (j < 8) xl[4 * j + e] = a, xl[4 * j + 2 + e] = b;
        else xh[4 * (j - 8) + e] = a, xh[4 * (j - 8) + 2 + e] = b;
      }
    }
  }
  // two loops: one loop branching between the steps a chunk spills 8 bytes at 168 registers.
  // The scales' max (chunk64_step's kTree): a tree of FMNMX with o, the serial chain without
  // (the same bits). Timed in one process against the chain everywhere (calls h1-h3,
  // kda_profile.py variants): the tree took 2.6-8 us off the dense prefills (B8 T4096 V128
  // 704.2 -> 699.6 us, V256 933.3 -> 926.0 in call h1) but added 5-9 us at B1 T32768 context
  // parallel, whose phase 1 runs without o; with the chain there it ran as the chain did
  // (call h3: 1009.8 and 1010.7 us, the tree everywhere 1015.3).
  if (pl.out)
    consume_chunks<true, true, kScalarDecay>(xl, xh, sm, sc, pl, ob, ld, ra, rb, q);
  else  // context parallel's phase 1 past segment 0: only X's end rows are kept
    consume_chunks<false, false, kScalarDecay>(xl, xh, sm, sc, pl, ob, ld, ra, rb, q);
  if (pl.x1 != nullptr) chunk64_store_state(xl, xh, pl.x1, ra, rb, q);
}

// The block's plan: one pass (cp_phase 0), or its part of context parallel. Segments as
// cp_segment (chunk64_seqs.cuh): L = seg_chunks chunks each from the sequence's end, segment 0
// the rest; a sequence of nseg <= cp_segs populated segments:
// - phase 1: segment 0 for real into B (a one-segment sequence: into the final state); the
//   segments between from zero into B and, in the extra tile, X = I into M; the last segment
//   exits (its transition feeds nothing: phase 3 runs it and writes the final state);
// - phase 3: segments 1 .. nseg - 1 from their combined initial states I, with o.
// Decay-bounded (p.bound, warm_start): a segment before the last whose trailing chunks w ..
// suffice runs in phase 1 from zero over them alone into B, its transition tile writes M = 0;
// segment 0 then runs for real in phase 3 (from the sequence's initial state, with o).
__device__ __forceinline__ Plan plan_of(const Chunk64State2Params& p, const SeqChunks& sc, int n,
                                        int seg, int v0) {
  const int nc = sc.len > 0 ? (sc.len + kC - 1) / kC : 0;
  const int hv = blockIdx.y, V = p.dim_v;
  const int64_t rows = (int64_t(hv) * V + v0) * kK;  // the tile's rows in a [HV, V, K] line
  const float* x0 = state_line(p.x0, p.x0_lines, p.x0_stride, n);
  float* xt = state_line(p.xt, p.xt_lines, p.xt_stride, n);
  Plan pl{0, nc, x0 ? x0 + rows : nullptr, false, xt ? xt + rows : nullptr, true, false, nullptr};
  if (p.cp_phase == 0) return pl;
  const int segs = p.cp_segs;
  const CpSegment cs = cp_segment(nc, segs, p.seg_chunks, seg);
  const int nseg = cs.nseg;
  pl.c0 = cs.c0, pl.c1 = cs.c1;
  const bool mtile = v0 >= V, last = seg == nseg - 1;
  pl.exit = seg >= nseg;  // a segment past its sequence's end
  const int64_t units = int64_t(p.seqs) * segs * gridDim.y;
  const int64_t unit = (int64_t(n) * segs + seg) * gridDim.y + hv;
  float* b = p.cp_scratch + (unit * V + v0) * kK;
  // the bounds serve phase 1 of a segment before the last and phase 3 of segment 0 (M's
  // address is spelled where it is used: held in a variable, it spilled 64 bytes at 168)
  const int w = p.bound != nullptr && !pl.exit && !last && (p.cp_phase == 1 || seg == 0)
                    ? warm_start(p.bound, sc, pl.c0, pl.c1) : -1;
  if (w >= 0) {
    if (p.cp_phase == 1) {  // the trailing chunks from zero into B; M = 0 (none for segment 0)
      if (mtile) {
        pl.exit = true;
        if (seg > 0) pl.zero_m = p.cp_scratch + units * V * kK + unit * kK * kK;
      }
      pl.c0 = w, pl.x0 = nullptr, pl.out = false, pl.x1 = b;
    } else {  // phase 3: the segment for real from its initial state, with o
      pl.exit |= mtile;
      if (seg > 0) pl.x0 = p.cp_scratch + units * (V + kK) * kK + (unit * V + v0) * kK;
      pl.x1 = nullptr;
    }
    return pl;
  }
  if (p.cp_phase == 1) {
    if (seg == 0) {
      pl.exit |= mtile;
      if (!last) pl.x1 = b;
    } else if (last) {
      pl.exit = true;
    } else if (mtile) {
      pl.x0 = nullptr, pl.identity = true, pl.out = false;
      pl.x1 = p.cp_scratch + units * V * kK + unit * kK * kK;
    } else {
      pl.x0 = nullptr, pl.out = false, pl.x1 = b;
    }
    return pl;
  }
  pl.exit |= seg == 0 || mtile;  // phase 3: segment 0 ran in phase 1
  pl.x0 = p.cp_scratch + units * (V + kK) * kK + (unit * V + v0) * kK;
  if (!last) pl.x1 = nullptr;  // the last segment's end is the final state
  return pl;
}

// Every stage's tmb and aqk tiles zeroed by the whole block before the first copy (the places
// load_sw128_lower never writes), fenced for the consumers' wgmma reads (async proxy) before
// the block's barrier: 32 KiB, ~6 16-byte stores a thread once per block.
__device__ __forceinline__ void zero_upper_blocks(Smem& sm) {
  constexpr int kWords = kC * 64 * 2 / 16;  // 16-byte words of one tile
  const uint4 z = make_uint4(0u, 0u, 0u, 0u);
  for (int i = threadIdx.x; i < kStages * 2 * kWords; i += kThreads) {
    Chunk64Stage& st = sm.st[i / (2 * kWords)].t;
    const int w = i % (2 * kWords);
    __half* tile = w < kWords ? &st.tmb[0][0] : &st.aqk[0][0];
    reinterpret_cast<uint4*>(tile)[w % kWords] = z;
  }
  ptx::fence_proxy_async_shared();
}

template <bool kScalarDecay>
__device__ __forceinline__ void state2_block(const Chunk64State2Params& p, Smem& sm) {
  // PDL: launched while the prep drains; every operand and input is read after it completed
  ptx::griddepcontrol_launch_dependents();
  ptx::griddepcontrol_wait();
  const int segs = p.cp_phase == 0 ? 1 : p.cp_segs;
  // context parallel: phase 1 longest blocks first, phase 3 as listed (chunk64_cp_order.cuh)
  const int item = p.cp_phase == 0 ? int(blockIdx.z) : cp_item(p, blockIdx.z);
  if (item < 0) return;  // past the last listed item
  const int n = item / segs, seg = item % segs;
  const SeqChunks sc = seq_chunks(p.cu_seqlens, n, p.tokens, p.chunks, blockIdx.y, gridDim.y);
  const int v0 = kVT * blockIdx.x;
  const Plan pl = plan_of(p, sc, n, seg, v0);
  if (pl.zero_m != nullptr) {  // a dropped transition (decay-bounded context parallel)
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i = threadIdx.x; i < kK * kK / 4; i += kThreads) reinterpret_cast<float4*>(pl.zero_m)[i] = z;
  }
  if (pl.exit) return;
  zero_upper_blocks(sm);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&sm.full[s][0], kProducerThreads);
      ptx::mbarrier_init(&sm.full[s][1], kProducerThreads);
      ptx::mbarrier_init(&sm.empty[s], kConsumerThreads);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumerThreads) {
    ptx::setmaxnreg_dec<kProducerRegs>();
    if (pl.out)
      produce<true, kScalarDecay>(p, sm, sc, pl, v0);
    else  // the consumers compute no o (consume): its operands are not loaded
      produce<false, kScalarDecay>(p, sm, sc, pl, v0);
  } else {
    ptx::setmaxnreg_inc<kConsumerRegs>();
    consume<kScalarDecay>(p, sm, sc, pl, v0);
  }
}

template <bool kScalarDecay>
__device__ __forceinline__ void entry(const Chunk64State2Params& p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // aligned by an offset from the shared array itself, as kda_chunk64_state.cu
  const uint32_t pad = (1024u - (ptx::smem_u32(smem_raw) & 1023u)) & 1023u;
  state2_block<kScalarDecay>(p, *reinterpret_cast<Smem*>(smem_raw + pad));
}

}  // namespace kernrt::kda::c64s2

// KDA (prep v4's operands, a decay per key channel).
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64s2::kThreads, 1)
    kda_chunk64_state2_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64State2Params p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (kernrt::kda::c64s2::entry<false>(p);), (__trap();))
}
// GDN (its prep's operands: k^, q^ without the decay, the decays per token in p.tok, no kbt).
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64s2::kThreads, 1)
    kda_chunk64_state2_gdn_sm90a_f16_k128(const __grid_constant__ kernrt::kda::Chunk64State2Params p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (kernrt::kda::c64s2::entry<true>(p);), (__trap();))
}
// Varlen exact context parallel's phase-1 order (chunk64_cp_order.cuh): grid 1, block 1024,
// the phase's pack.
extern "C" __global__ void __launch_bounds__(kernrt::kda::c64::kOrderThreads, 1)
    kda_chunk64_cp_order_sm90a(const __grid_constant__ kernrt::kda::Chunk64State2Params p) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (kernrt::kda::c64::cp_order_block(p);), (__trap();))
}
