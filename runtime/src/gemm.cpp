// The GEMM built-ins' meaning and load-time checks (see gemm.hpp).
#include "gemm.hpp"

namespace kernrt::rt {

std::optional<GemmKind> gemm_kind(const std::string& entry) {
  if (entry == "extern:cublaslt_bf16_tn") return GemmKind::Bf16;
  if (entry == "extern:cublaslt_bf16_tn_acc") return GemmKind::Bf16Acc;
  if (entry == "extern:cublas_bf16_tn_f32") return GemmKind::Bf16F32;
  return std::nullopt;
}

const char* gemm_name(GemmKind k) {
  switch (k) {
    case GemmKind::Bf16: return "extern:cublaslt_bf16_tn";
    case GemmKind::Bf16Acc: return "extern:cublaslt_bf16_tn_acc";
    case GemmKind::Bf16F32: return "extern:cublas_bf16_tn_f32";
  }
  return "extern:?";
}

bool gemm_output_f32(GemmKind k) { return k == GemmKind::Bf16F32; }

Errors check_gemm(GemmKind kind, const GemmArgs& args, const std::string& path) {
  Errors errors;
  const std::string name = gemm_name(kind);
  auto fail = [&](const std::string& where, const std::string& message) {
    errors.push_back(Error{ErrorKind::Manifest, where, "`" + name + "`: " + message});
  };
  const size_t n = args.params.size();
  if (n < 6 || n > 8) {
    fail(path + "/params", "takes [a, w, c, m, n, k] and optionally C's then A's row stride "
                           "(6 to 8 args), got " + std::to_string(n));
    return errors;
  }
  using Kind = manifest::ParamType::Kind;
  const char* names[8] = {"a", "w", "c", "m", "n", "k", "ldc", "lda"};
  for (uint32_t i = 0; i < n; ++i) {
    const auto& p = args.params[i];
    const std::string where = json_pointer_append(path + "/params", i);
    if (i <= kGemmC) {
      const manifest::DType want = i == kGemmC && gemm_output_f32(kind) ? manifest::DType::f32
                                                                         : manifest::DType::bf16;
      const bool out_ok = i != kGemmC || p.dir != manifest::Direction::in;
      if (p.kind != Kind::Buffer || p.dtype != want || !out_ok) {
        fail(where, std::string("`") + names[i] + "` must be " + (i == kGemmC ? "an out" : "an in") +
                        " buffer<" + manifest::to_string(want) + ">, got `" + p.to_string() + "`");
      }
    } else if (p.kind != Kind::I32 && p.kind != Kind::I64) {
      fail(where, std::string("`") + names[i] + "` must be an i32 or i64 scalar, got `" +
                      p.to_string() + "`");
    }
  }
  if (!errors.empty()) return errors;
  const uint64_t m = args.at_max[kGemmM], nn = args.at_max[kGemmN], k = args.at_max[kGemmK];
  const uint64_t ldc = n > kGemmLdc ? args.at_max[kGemmLdc] : nn;
  const uint64_t lda = n > kGemmLda ? args.at_max[kGemmLda] : k;
  if (m == 0 || nn == 0 || k == 0 || m > INT32_MAX || nn > INT32_MAX || k > INT32_MAX) {
    fail(path, "m, n and k must be in [1, 2^31 - 1] at the vars' maxima, got m=" +
                   std::to_string(m) + " n=" + std::to_string(nn) + " k=" + std::to_string(k));
    return errors;
  }
  if (ldc < nn) fail(path, "C's row stride " + std::to_string(ldc) + " is below n = " + std::to_string(nn));
  if (lda < k) fail(path, "A's row stride " + std::to_string(lda) + " is below k = " + std::to_string(k));
  if (!errors.empty()) return errors;
  // Elements each matrix spans; products of values below 2^31 stay far inside u64.
  const uint64_t c_elem = gemm_output_f32(kind) ? 4 : 2;
  const uint64_t need[3] = {((m - 1) * lda + k) * 2, nn * k * 2, ((m - 1) * ldc + nn) * c_elem};
  for (uint32_t i = 0; i <= kGemmC; ++i) {
    if (need[i] > args.pointer_bytes[i]) {
      fail(json_pointer_append(path + "/args", i),
           std::string("`") + names[i] + "` spans " + std::to_string(need[i]) +
               " bytes at the vars' maxima (m=" + std::to_string(m) + " n=" + std::to_string(nn) +
               " k=" + std::to_string(k) + ") but its buffer has " +
               std::to_string(args.pointer_bytes[i]) + " bytes left");
    }
  }
  return errors;
}

GemmShape gemm_shape(const uint64_t* s, size_t n_args) {
  GemmShape g;
  g.m = s[kGemmM];
  g.n = s[kGemmN];
  g.k = s[kGemmK];
  g.ldc = n_args > kGemmLdc ? s[kGemmLdc] : g.n;
  g.lda = n_args > kGemmLda ? s[kGemmLda] : g.k;
  return g;
}

}  // namespace kernrt::rt
