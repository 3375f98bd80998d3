// PTX wrappers for Hopper warpgroup tensor-core math with f16 operands (sm_90a; one inline
// `asm` per instruction, named after it), beside wgmma.cuh's bf16 shapes: wgmma.mma_async
// m64n64k16, f32 += f16 x f16, A from registers, B K-major or MN-major in shared memory,
// with the product's sign as a template parameter (imm-scale-a). Used by the KDA 64-token
// chunk step (kernels/kda/chunk64.md), whose f16 operands keep 11 bits at any magnitude
// through a power-of-two scale per warp (bf16 operands miss its precision gate).
// Deliberately does not check what wgmma.cuh does not (warpgroup convergence, descriptor
// validity, fragment layouts); off sm_90a the wrappers trap (NV_HAS_FEATURE_SM_90a, wgmma.cuh).
#pragma once

#include <nv/target>

#include <cstdint>

#include "common/ptx/wgmma.cuh"

namespace kernrt::ptx {

#define KERNRT_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KERNRT_F16(d, i) \
  KERNRT_F4(d, i), KERNRT_F4(d, i + 4), KERNRT_F4(d, i + 8), KERNRT_F4(d, i + 12)
#define KERNRT_F32(d, i) KERNRT_F16(d, i), KERNRT_F16(d, i + 16)

// wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 with A in registers: d (64x64 f32,
// 32 per thread) = kScaleA * A (64x16 f16, the a0..a3 layout of wgmma.cuh's m64n256k16_rs) x
// B (16x64 in shared memory: K-major, 64 rows of 16 K-elements, with kTransB = 0; MN-major,
// 16 rows of 64 N-elements, with kTransB = 1: imm-trans-b) + d when `accumulate`. kScaleA = -1
// negates the product (imm-scale-a). Accumulator layout as wgmma.cuh's m64n64k16_ss with
// j = 0..7.
template <int kScaleA, int kTransB = 0>
__device__ __forceinline__ void wgmma_m64n64k16_rs_f16(float (&d)[32], uint32_t a0, uint32_t a1,
                                                     uint32_t a2, uint32_t a3, uint64_t desc_b,
                                                     int accumulate) {
  static_assert(kScaleA == 1 || kScaleA == -1, "imm-scale-a is +1 or -1");
  static_assert(kTransB == 0 || kTransB == 1, "imm-trans-b is 0 or 1");
  NV_IF_ELSE_TARGET(NV_HAS_FEATURE_SM_90a, (
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, %38, 1, %39;\n"
        "}\n"
        : KERNRT_F32(d, 0)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(accumulate), "n"(kScaleA),
          "n"(kTransB)
        : "memory");
  ), (__trap();))
}

#undef KERNRT_F32
#undef KERNRT_F16
#undef KERNRT_F4

}  // namespace kernrt::ptx
