// PTX wrappers for editing a TMA descriptor on the device (sm_90a and later; one inline `asm`
// per instruction, each function named after it).
//
// Owns: tensormap.replace of one box dimension of a descriptor in shared memory, the copy of
// a descriptor from shared to global memory with the release fence the tensormap proxy needs
// (tensormap.cp_fenceproxy), and the acquire fence a thread issues before its first TMA
// through the edited global copy (fence.proxy.tensormap::generic.acquire).
// Deliberately does not check: 128-byte alignment of both copies, that the edited box still
// fits the descriptor's other fields (box <= 256 per dimension, inner box bytes <= the
// swizzle span), or that all 32 lanes execute the warp-collective copy (.sync.aligned).
// A bad descriptor faults or hangs the TMA that uses it; it is not detected here.
#pragma once

#include <cuda.h>

#include <nv/target>

#include <cstdint>

#include "common/ptx.cuh"

namespace kernrt::ptx {

// The tensormap edits exist on sm_90a and sm_100 on; elsewhere (NV_DISPATCH_TARGET) the
// wrappers compile to nothing. KERNRT_TENSORMAP_ASM(code): `code` on those targets only.
#define KERNRT_TENSORMAP_ASM(code) \
  NV_DISPATCH_TARGET(NV_HAS_FEATURE_SM_90a, code, NV_PROVIDES_SM_100, code)

// tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [map], Ord, value: sets the box extent
// of dimension Ord (0 = innermost, the order cuTensorMapEncodeTiled takes) to `value` elements.
template <int Ord>
__device__ __forceinline__ void tensormap_replace_box_dim(CUtensorMap* smem_map, uint32_t value) {
  KERNRT_TENSORMAP_ASM((
    asm volatile("tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], %1, %2;"
                 ::"r"(smem_u32(smem_map)), "n"(Ord), "r"(value) : "memory");
  ))
}

// tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned:
// the warp copies the 128-byte descriptor from shared to global memory and releases it to the
// tensormap proxy. Every lane of the warp calls it.
__device__ __forceinline__ void tensormap_cp_fenceproxy(CUtensorMap* global_map,
                                                        const CUtensorMap* smem_map) {
  KERNRT_TENSORMAP_ASM((
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%0], [%1], 128;"
        ::"l"(reinterpret_cast<uint64_t>(global_map)), "r"(smem_u32(smem_map)) : "memory");
  ))
}

// fence.proxy.tensormap::generic.acquire.gpu [map], 128: orders the release above before this
// thread's TMA operations that read the descriptor at `global_map`.
__device__ __forceinline__ void fence_proxy_tensormap_acquire(const CUtensorMap* global_map) {
  KERNRT_TENSORMAP_ASM((
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;"
                 ::"l"(reinterpret_cast<uint64_t>(global_map)) : "memory");
  ))
}

}  // namespace kernrt::ptx
