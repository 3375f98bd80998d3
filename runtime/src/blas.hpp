// cuBLASLt for the GEMM built-ins, opened at run time like the driver.
//
// Owns: finding and opening libcublasLt (soname, then $KERNRT_CUBLASLT, $CUDA_HOME/lib64,
// /usr/local/cuda/lib64), one handle per runtime, a device workspace the runtime owns (so
// every matmul is capturable: cuBLASLt allocates nothing while a stream is captured), and
// one cached plan (descriptors + heuristic algorithm) per problem shape, so a shape pays
// the heuristic once and graph replays never reach this code.
// Row-major C[m, n] = A[m, k] · W[n, k]ᵀ runs as the column-major problem
// C' (n x m, ld ldc) = W' ᵀ (W' = W as k x n, ld k) x A' (A as k x m, ld lda).
// Does not check: the pointers' bounds (gemm.hpp proved them at load) or alignment beyond
// what cuBLASLt reports (a failing heuristic is an error naming the launch).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "gemm.hpp"
#include "kernrt/manifest/error.hpp"

namespace kernrt::rt {

class Blas {
 public:
  // Opens cuBLASLt and creates a handle; Driver error naming every place tried.
  static Result<std::unique_ptr<Blas>> open();
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // The workspace (owned by the runtime, allocated by the caller once).
  void set_workspace(CUdeviceptr ptr, size_t bytes) { workspace_ = ptr; workspace_bytes_ = bytes; }

  // Enqueues one GEMM on `stream`. Error{Driver} with the cuBLASLt status and the launch.
  std::optional<Error> gemm(GemmKind kind, const GemmShape& shape, uint64_t a, uint64_t w,
                            uint64_t c, CUstream stream, const std::string& where);

  static constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt's largest Hopper need

  struct Api;
  struct Plan;

 private:
  Blas() = default;
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
  CUdeviceptr workspace_ = 0;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>, std::unique_ptr<Plan>> plans_;
};

}  // namespace kernrt::rt
