// Asynchronous global -> shared copies of the conv forward's shared-memory ring (sm_90):
// per-thread 16-byte cp.async (LDGSTS) with commit/wait groups, and 1-D bulk copies
// (cp.async.bulk, the TMA engine) completing on an mbarrier with a transaction count, and
// bulk L2 prefetches.
// Thin wrappers over the PTX instructions; every address below is a generic pointer into
// global or shared memory, converted here. cp.async's hints: KERNRT_CONV_CP_L2 0 (default:
// no L2 prefetch size hint; run 9: the ring 0.7-0.9 % faster, and plain ld.global.nc copies
// 2.5-2.9 % faster than with .L1::no_allocate.L2::256B) or 256 (.L2::256B, runs 3-8);
// KERNRT_CONV_CP_CA 1 (measurement): cp.async.ca (may allocate in L1) instead of .cg.
//
// Not checked here: alignment (16 bytes for both sources and destinations, bulk sizes a
// multiple of 16) and barrier phase bookkeeping, which the caller owns.
#pragma once

#include <stdint.h>

#ifndef KERNRT_CONV_CP_L2
#define KERNRT_CONV_CP_L2 0
#endif
#ifndef KERNRT_CONV_CP_CA
#define KERNRT_CONV_CP_CA 0
#endif

namespace kernrt_conv {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async (one thread, 16 bytes, bypassing L1 unless .ca) ------------------------------------
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if KERNRT_CONV_CP_CA
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src)
               : "memory");
#elif KERNRT_CONV_CP_L2 == 0
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src)
               : "memory");
#else
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(smem_addr(dst)),
               "l"(src)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Wait until at most N of this thread's committed groups are still pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// ---- mbarrier --------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Make barrier initialisation visible to the other threads and to the async (TMA) proxy.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Arrive and add `bytes` to the phase's expected transaction count.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// Block until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// ---- bulk copy (TMA, 1-D) --------------------------------------------------------------
// `bytes` from global `src` to shared `dst`; completion counts `bytes` against `bar`.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Ask L2 for `bytes` from global `src` (bulk prefetch through the TMA engine): nothing
// lands in shared memory and nothing is waited on.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

}  // namespace kernrt_conv
