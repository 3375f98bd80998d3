// PTX wrappers for Hopper warpgroup tensor-core math (sm_90a; one inline `asm` per
// instruction, each function named after it): wgmma.mma_async in the two shapes the prefill
// attention kernel issues, its fence / commit / wait, the shared-memory matrix descriptor,
// and the register fence that keeps the compiler from touching an accumulator or an A
// fragment while an asynchronous wgmma still owns it.
//
// Owns: wgmma.fence, wgmma.commit_group, wgmma.wait_group N, wgmma.mma_async m64n64k16 (A and
// B from shared memory, f32 += bf16 x bf16) and m64n256k16 (A from registers, B from shared
// memory, B transposed), the 64-bit descriptor of a 128B-swizzled shared-memory operand, and a
// broadcast that keeps a descriptor in uniform registers.
// Deliberately does not check: that the 128 threads of a warpgroup execute each call together
// (.sync.aligned), descriptor validity (1024-byte aligned swizzle atoms, the strides given),
// fragment layouts, or that the caller is on sm_90a (wgmma does not exist on sm_100a: the
// wrappers compile to a trap there, see NV_HAS_FEATURE_SM_90a below). A violation gives wrong numbers or a
// fault on the device, it is not detected.
#pragma once

#include <nv/target>

#include <cstdint>

// wgmma is sm_90a only (sm_100 replaced it with tcgen05): elsewhere (NV_IF_TARGET) the fences
// compile to nothing and the products trap.

namespace kernrt::ptx {

// Descriptor of a K-major (rows of 128 contiguous bytes) or MN-major operand tile in shared
// memory with the 128B swizzle: start address >> 4 in bits 0-13, leading byte offset >> 4 in
// 16-29, stride byte offset >> 4 in 32-45, base offset 0 (atoms 1024-byte aligned), layout
// type 1 (128B swizzle) in bits 62-63.
//   K-major:  8-row groups `stride` bytes apart (1024 for dense 128-byte rows); `leading`
//             unused (1).
//   MN-major: 64-element column blocks `leading` bytes apart, 8-row (K) groups `stride`.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t leading,
                                                     uint32_t stride) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3FFF) |
         (static_cast<uint64_t>((leading >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// A descriptor as the 32 lanes' common value, recomputed where it is used: the asm volatile
// mov keeps the compiler from hoisting per-k-step descriptors into vector registers (each then
// needs an R2UR between two wgmma, which serialises them), and the broadcast from lane 0 lets it
// keep the value in uniform registers, where the k-step offsets are uniform adds.
__device__ __forceinline__ uint64_t wgmma_desc_uniform(uint64_t desc) {
  uint64_t v;
  asm volatile("mov.b64 %0, %1;" : "=l"(v) : "l"(desc));
  const uint32_t lo = __shfl_sync(0xffffffffu, static_cast<uint32_t>(v), 0);
  const uint32_t hi = __shfl_sync(0xffffffffu, static_cast<uint32_t>(v >> 32), 0);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// wgmma.fence.sync.aligned: orders this warpgroup's register writes (accumulators, A
// fragments) before the wgmma.mma_async that read them.
__device__ __forceinline__ void wgmma_fence() {
  NV_IF_TARGET(NV_HAS_FEATURE_SM_90a,
               (asm volatile("wgmma.fence.sync.aligned;" ::: "memory");))
}

// wgmma.commit_group.sync.aligned: closes the group of wgmma.mma_async issued since the last.
__device__ __forceinline__ void wgmma_commit_group() {
  NV_IF_TARGET(NV_HAS_FEATURE_SM_90a,
               (asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");))
}

// wgmma.wait_group.sync.aligned N: waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  NV_IF_TARGET(NV_HAS_FEATURE_SM_90a,
               (asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");))
}

// An empty asm that claims to read and write `r`: the compiler can neither move accesses of
// `r` across it nor reuse its register. Placed around asynchronous wgmma that own `r`.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

#define KERNRT_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KERNRT_F16(d, i) \
  KERNRT_F4(d, i), KERNRT_F4(d, i + 4), KERNRT_F4(d, i + 8), KERNRT_F4(d, i + 12)
#define KERNRT_F32(d, i) KERNRT_F16(d, i), KERNRT_F16(d, i + 16)

// wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16: d (64x64 f32, 32 per thread) =
// A (64x16, K-major in shared memory) x B (16x64 given as 64 rows of K, K-major) + d when
// `accumulate`, else without d. Accumulator layout per warp w of the group: rows 16w + lane/4
// (+8), columns 8j + 2*(lane%4) (+1): d[4j + {0,1}] row lane/4, d[4j + {2,3}] row lane/4 + 8.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a,
                                                   uint64_t desc_b, int accumulate) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16,"
        "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n"
        "}\n"
        : KERNRT_F32(d, 0)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
  ), (__trap();))
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 with A in registers: d (64x256 f32,
// 128 per thread) += A (64x16 bf16: a0 = row lane/4 cols 2t..2t+1, a1 = row +8, a2 = cols
// +8, a3 = both, t = lane%4, per warp 16 rows) x B (16x256, MN-major in shared memory:
// imm-trans-b = 1). Same accumulator layout as above with j = 0..31.
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], uint32_t a0, uint32_t a1,
                                                    uint32_t a2, uint32_t a3, uint64_t desc_b,
                                                    int accumulate) {
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16,"
        "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46,"
        "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61,"
        "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76,"
        "%77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91,"
        "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105,"
        "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118,"
        "%119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n"
        "}\n"
        : KERNRT_F32(d, 0), KERNRT_F32(d, 32), KERNRT_F32(d, 64), KERNRT_F32(d, 96)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(accumulate)
        : "memory");
  ), (__trap();))
}

#undef KERNRT_F32
#undef KERNRT_F16
#undef KERNRT_F4

}  // namespace kernrt::ptx
