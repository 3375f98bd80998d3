// The GEMM built-ins of kern schema v4 (reference/kern-schema.md §1.10, §3.4): what an
// `extern:` launch means, checked once at lowering.
//
// Owns: the three names and their meaning (row-major C[m, n] = A[m, k] · W[n, k]ᵀ):
//   extern:cublaslt_bf16_tn      bf16 A, W, C; C = A·Wᵀ (beta 0)
//   extern:cublaslt_bf16_tn_acc  bf16 A, W, C; C += A·Wᵀ (beta 1)
//   extern:cublas_bf16_tn_f32    bf16 A, W; f32 C = A·Wᵀ
// their arity ([a, w, c, m, n, k], then optionally C's row stride, then A's, in elements),
// the param kinds each position takes, and the bounds at the vars' maxima (lda >= k,
// ldc >= n, every matrix inside the bytes its pointer has left). Expressions are monotone,
// so bounds that hold at the maxima hold for every run. Pure: no driver, no cuBLAS.
// Does not check: the values per run (exec evaluates them; they are within the maxima).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

enum class GemmKind { Bf16, Bf16Acc, Bf16F32 };

// The built-in an entry names, or nullopt ("unsupported extern `x`").
std::optional<GemmKind> gemm_kind(const std::string& entry);
const char* gemm_name(GemmKind k);
bool gemm_output_f32(GemmKind k);

// Arg positions of a GEMM launch.
enum GemmArg : uint32_t { kGemmA = 0, kGemmW, kGemmC, kGemmM, kGemmN, kGemmK, kGemmLdc, kGemmLda };

// One launch's GEMM as lowering sees it: the param types of its args, and for the three
// pointers the bytes left after the call's offset (0 when the arg is not a pointer).
struct GemmArgs {
  std::vector<manifest::ParamType> params;
  std::vector<uint64_t> pointer_bytes;  // per arg
  std::vector<uint64_t> at_max;         // per arg: the scalar's value at the vars' maxima
};

// Every problem of the launch at `path`, naming the arg; empty when it is a valid GEMM.
Errors check_gemm(GemmKind kind, const GemmArgs& args, const std::string& path);

// The problem dimensions of one run, from the args as evaluated (u64 slots).
struct GemmShape {
  uint64_t m = 0, n = 0, k = 0, lda = 0, ldc = 0;
};
GemmShape gemm_shape(const uint64_t* scalars, size_t n_args);

}  // namespace kernrt::rt
