// PTX wrappers for plain and asynchronous loads and stores (one inline `asm` per instruction,
// each function named after it), and the shared-memory address every other wrapper takes.
//
// Owns: the 32-bit shared-window address of a generic pointer, its image in another CTA of the
// cluster (mapa) and 8-byte loads from there; per-thread cp.async into shared memory (16 bytes,
// and the zero-filling 16- and 4-byte forms) with its commit/wait groups and its mbarrier
// arrival (cp.async.mbarrier.arrive.noinc); 2- to 16-byte global loads through the non-coherent
// path (one with cache hints), a 32-bit load cached in L2 only, plain 8- and 16-byte global
// stores and streaming 16-byte global stores.
// Deliberately does not check: alignment (16 bytes for every address here, 8 for the 8-byte
// store), that a pointer given as shared really points into shared memory, or that data read
// through the non-coherent path is not written by the same grid (the caller's contract).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace kernrt::ptx {

// Shared-memory address of a generic pointer, as the 32-bit operand PTX expects.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mapa.shared::cluster.u32: the address in CTA `rank` of the cluster of the shared-memory
// location at `addr` in this CTA (the same offset in the other CTA's shared memory).
__device__ __forceinline__ uint32_t mapa_shared_cluster(uint32_t addr, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}

// ld.shared::cluster.v2.f32: 8 bytes from a shared::cluster address (mapa's result).
__device__ __forceinline__ float2 ld_shared_cluster_v2_f32(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr)
               : "memory");
  return v;
}

// ---- cp.async (sm_80+): one thread, 16 bytes, global -> shared ------------------------------

// cp.async.cg.shared.global: 16 bytes, cached in L2 only (not L1).
__device__ __forceinline__ void cp_async_cg_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src)
               : "memory");
}

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: copies src_bytes (0..16) and zero
// fills the rest of the 16 bytes, so a masked row lands as zeros.
__device__ __forceinline__ void cp_async_cg_16_zfill(void* dst, const void* src,
                                                     uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// The same with an immediate byte offset on the source, [src + kOff]: the address form the
// instruction takes, so a run of copies from one base needs no 64-bit add per copy (ptxas
// does not fold a C++ pointer add into LDGSTS on sm_90a).
template <int kOff>
__device__ __forceinline__ void cp_async_cg_16_zfill_off(void* dst, const void* src,
                                                         uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1+%3], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes), "n"(kOff)
               : "memory");
}

// cp.async.ca.shared.global [dst], [src], 4, src_bytes: the 4-byte form (may allocate in L1),
// zero filling past src_bytes (0..4).
__device__ __forceinline__ void cp_async_ca_4_zfill(void* dst, const void* src,
                                                    uint32_t src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// cp.async.commit_group: closes the group of this thread's cp.async issued since the last one.
__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// cp.async.wait_group N: waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// cp.async.mbarrier.arrive.noinc.shared::cta.b64: one arrival on the mbarrier at `bar` once
// every cp.async this thread issued before it has completed (its writes then visible to the
// threads that observe the phase). .noinc: the arrival is one of the `count` the barrier was
// initialised with (no pending-count increment), so no plain arrive follows it.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar))
               : "memory");
}

// ---- global loads and stores ------------------------------------------------------------------

// ld.global.nc.{u16,u32,v2.u32,v4.u32}: 2 to 16 bytes through the non-coherent (read-only)
// path; only for data no thread of the grid writes.
__device__ __forceinline__ uint16_t ld_global_nc_u16(const void* p) {
  uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_global_nc_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_global_nc_v2(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_global_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// ld.global.cg.s32: 32 bits cached in L2 only, so no L1 line keeps the value (a read that may
// race with another grid's write, used only as a hint).
__device__ __forceinline__ int32_t ld_global_cg_s32(const void* p) {
  int32_t v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// ld.global.nc.L1::no_allocate.L2::256B.v4.u32: 16 bytes through the read-only path without
// allocating in L1, asking L2 to fetch the whole 256-byte line (streams read once).
__device__ __forceinline__ uint4 ld_global_nc_na_l2_256_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// st.global.v4.b32 / st.global.v2.b32: one plain 16- / 8-byte store. Written out because NVVM
// split the conv strip's y stores (a uint16_t pointer advanced by a runtime stride, cast to
// uint4*) into four 32-bit stores.
__device__ __forceinline__ void st_global_v4_b32(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_global_v2_b32(void* p, uint2 v) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

// st.global.cs.v4.u32: 16 bytes with the streaming (evict-first) hint: written once, not re-read.
__device__ __forceinline__ void st_global_cs_v4(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

}  // namespace kernrt::ptx
