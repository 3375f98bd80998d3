// The conv kernels' PTX wrappers, one inline `asm` per instruction, each named after it:
// 16- and 8-byte global stores and the two griddepcontrol instructions of programmatic
// dependent launch.
//
// Duplicates, to be folded into kernels/common/ptx/: `griddepcontrol_wait` and
// `griddepcontrol_launch_dependents` are kernrt::ptx's of kernels/common/ptx/sync.cuh;
// `st_global_v4_b32` / `st_global_v2_b32` are new (ldst.cuh has only the .cs store).
// Callers write `ptx::name`, which resolves to kernrt::ptx::name once this header is gone.
//
// Not checked here: alignment (16 / 8 bytes for the stores), which the caller owns.
#pragma once

#include <stdint.h>

namespace kernrt::conv::ptx {

// st.global.v4.b32 / st.global.v2.b32: one 16- / 8-byte store. Written out because NVVM
// split the y stores of the strip's straight-line rows (a uint16_t pointer advanced by a
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
