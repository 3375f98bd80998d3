// Thin PTX wrappers shared by kernels/<family>/*.cu: one inline `asm` per instruction,
// each function named after the instruction it issues.
//
// Owns: TMA tile loads (cp.async.bulk.tensor 2D..5D into shared memory, completing on an
// mbarrier), the mbarrier operations a TMA pipeline needs (init, arrive.expect_tx,
// try_wait.parity), the async-proxy fences, elect.sync and tensormap prefetch.
// Deliberately does not check: alignment (a TMA smem destination must be 128-byte aligned,
// an mbarrier 8-byte aligned, a CUtensorMap 64-byte aligned), that the byte count given to
// arrive.expect_tx equals the boxes issued, or that the caller is on sm_90 or newer. These
// are the kernel's contract; a violation hangs or faults on the device, it is not detected.
#pragma once

#include <cuda.h>
#include <cstdint>

namespace kernrt::ptx {

// Shared-memory address of a generic pointer, as the 32-bit operand PTX expects.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

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

// ---- elect ------------------------------------------------------------------------------------

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

// fence.proxy.async: orders this thread's generic-proxy view of memory (data acquired from
// other CTAs, shared memory it wrote) before its later async-proxy (TMA, bulk copy) accesses.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async;" ::: "memory");
}

// cp.async.bulk (1-D): `bytes` (a multiple of 16, both addresses 16-byte aligned) from global
// `src` to shared `dst`, completing as transaction bytes on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// ---- TMA ----------------------------------------------------------------------------------------

// prefetch.tensormap: pulls the descriptor (a __grid_constant__ param) into the cache.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// cp.async.bulk.tensor.<N>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes:
// copies the box at element coordinates (c0 innermost, ...) into `dst`; out-of-bounds
// elements are filled per the descriptor (zero or NaN) and still count toward the bytes.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
        "r"(c0), "r"(c1)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
        "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

__device__ __forceinline__ void tma_load_5d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            int32_t c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
        "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

}  // namespace kernrt::ptx
