// The conv kernels' PTX wrappers, one inline `asm` per instruction, each named after it:
// per-thread 16-byte cp.async with its commit/wait groups (the forward ring), 16- and 8-byte
// global stores, and the two griddepcontrol instructions of programmatic dependent launch.
//
// Duplicates, to be folded into kernels/common/ptx/ when that split lands (the names are
// already those of kernels/common/ptx/{ldst,sync}.cuh there): `smem_u32` is
// kernrt::ptx::smem_u32 of kernels/common/ptx.cuh; `cp_async_cg_16`,
// `cp_async_commit_group`, `cp_async_wait_group` (ldst.cuh) and `griddepcontrol_wait`,
// `griddepcontrol_launch_dependents` (sync.cuh). `st_global_v4_b32` / `st_global_v2_b32`
// are new (ldst.cuh has only the .cs store). Callers write `ptx::name`, which resolves
// to kernrt::ptx::name once this header is gone.
//
// Not checked here: alignment (16 bytes for both cp.async addresses) and group bookkeeping,
// which the caller owns.
#pragma once

#include <stdint.h>

namespace kernrt::conv::ptx {

// Shared-memory address of a generic pointer, as the 32-bit operand PTX expects.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async.cg.shared.global: 16 bytes, cached in L2 only. Without the `.L2::256B` prefetch
// size: the ring ran 0.7-0.9 % faster without it on the H200 (validation/conv/notes.md).
__device__ __forceinline__ void cp_async_cg_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src)
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

// st.global.v4.b32 / st.global.v2.b32: one 16- / 8-byte store. Written out because NVVM
// split the y stores of the strips' straight-line rows (a uint16_t pointer advanced by a
// runtime stride, cast to uint4*) into four 32-bit stores.
__device__ __forceinline__ void st_global_v4_b32(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_global_v2_b32(void* p, uint2 v) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

// griddepcontrol.wait: blocks until the previous grid in the stream has completed and its
// writes are visible (a no-op unless the launch set PDL).
__device__ __forceinline__ void griddepcontrol_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// griddepcontrol.launch_dependents: lets the next grid start its prologue early.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace kernrt::conv::ptx
