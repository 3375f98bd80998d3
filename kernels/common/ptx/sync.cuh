// PTX wrappers for synchronisation (one inline `asm` per instruction, each function named
// after it): mbarriers, proxy fences, elect.sync, named barriers, programmatic dependent
// launch, and the special registers the schedulers read.
//
// Owns: mbarrier init / arrive / arrive.expect_tx / try_wait.parity (and a spin wait over it),
// the mbarrier-init and async-proxy fences, elect.sync, bar.sync / bar.arrive with a count,
// the cluster barrier (arrive.release / wait.acquire), griddepcontrol.wait /
// launch_dependents, %nsmid and %cluster_ctarank.
// Deliberately does not check: alignment (an mbarrier is 8-byte aligned shared memory), that
// arrival counts and expected transaction bytes match what is issued, phase bookkeeping, or
// that the caller is on sm_90 or newer. These are the kernel's contract; a violation hangs
// or faults on the device, it is not detected.
#pragma once

#include <cstdint>

#include "common/ptx/ldst.cuh"

namespace kernrt::ptx {

// ---- mbarrier ----------------------------------------------------------------------------

// mbarrier.init.shared::cta.b64: `count` arrivals complete a phase.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}

// fence.mbarrier_init.release.cluster: makes barrier inits visible to the async proxy (TMA)
// and to the other CTAs of a cluster before anyone waits on them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive.expect_tx.shared::cta.b64: one arrival plus `bytes` of pending
// transactions that TMA completions will count down.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
               ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// mbarrier.arrive.shared::cta.b64: one plain arrival.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// mbarrier.try_wait.parity.shared::cta.b64: true once the phase with `parity` completed.
// The hardware may suspend the thread for a bounded time before it returns false.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "  selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Spins on try_wait until the phase with `parity` completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// ---- fences ---------------------------------------------------------------------------------

// fence.proxy.async.shared::cta: orders this thread's generic-proxy shared-memory writes
// before later async-proxy reads of them (TMA store, wgmma). Not needed after a TMA load:
// completing the mbarrier phase already makes the loaded bytes visible to waiters.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// fence.proxy.async: orders this thread's generic-proxy view of memory (data acquired from
// other CTAs, shared memory it wrote) before its later async-proxy (TMA, bulk copy) accesses.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async;" ::: "memory");
}

// ---- warps and named barriers -----------------------------------------------------------------

// elect.sync: true in exactly one active lane of the warp (all lanes must call it).
__device__ __forceinline__ bool elect_one_sync() {
  uint32_t pred = 0;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  elect.sync _|p, %1;\n"
      "  selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(pred)
      : "r"(0xffffffffu));
  return pred != 0;
}

// bar.sync id, count: a barrier among `count` threads (a multiple of 32) of the CTA. Not checked:
// the id is 1-15 (0 is __syncthreads) and not in use with another count at the same time.
__device__ __forceinline__ void bar_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// bar.arrive id, count: arrives at named barrier `id` (of `count` threads) without waiting.
__device__ __forceinline__ void bar_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// ---- clusters (sm_90+) ----------------------------------------------------------------------

// barrier.cluster.arrive.release.aligned: this thread's arrival at the cluster barrier; its
// earlier memory accesses (shared memory of any CTA of the cluster included) are released to
// the threads that wait. Every thread of the warp executes it.
__device__ __forceinline__ void barrier_cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

// barrier.cluster.wait.acquire.aligned: waits until every non-exited thread of the cluster
// arrived, acquiring what they released. Every thread of the warp executes it.
__device__ __forceinline__ void barrier_cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- programmatic dependent launch (sm_90+) -----------------------------------------------

// griddepcontrol.wait: blocks until the previous grid in the stream has completed and its
// writes are visible (a no-op when the launch was not programmatic).
__device__ __forceinline__ void griddepcontrol_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// griddepcontrol.launch_dependents: lets the next grid in the stream start its prologue.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ---- special registers ---------------------------------------------------------------------

// %cluster_ctarank: this CTA's rank in its cluster (0 without a cluster launch).
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// %nsmid: the number of SM ids. PTX allows it to exceed the SMs present (sparse SM ids), so a
// schedule sized by it may overestimate one wave. Not volatile: constant within a launch.
__device__ __forceinline__ int nsmid() {
  uint32_t n;
  asm("mov.u32 %0, %%nsmid;" : "=r"(n));
  return static_cast<int>(n);
}

}  // namespace kernrt::ptx
