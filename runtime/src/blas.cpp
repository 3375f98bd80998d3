// cuBLASLt opened at run time for the GEMM built-ins (see blas.hpp).
//
// cublasLt.h is used for its types only; every entry point comes from dlsym on the library
// found at run time, so the runtime still starts (and says why) where cuBLASLt is absent.
#include "blas.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace kernrt::rt {

struct Blas::Api {
  void* lib = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  ~Api() {
    if (lib) dlclose(lib);
  }
};

// One shape's descriptors and algorithm, destroyed with the runtime.
struct Blas::Plan {
  const Api* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (!api) return;
    for (auto* l : {w, a, c}) {
      if (l) api->layout_destroy(l);
    }
    if (desc) api->desc_destroy(desc);
  }
};

namespace {

template <class Fn>
bool sym(void* lib, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  return *out != nullptr;
}

std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* env = std::getenv("KERNRT_CUBLASLT")) c.push_back(env);
  for (const char* so : {"libcublasLt.so.13", "libcublasLt.so.12"}) c.push_back(so);
  if (const char* home = std::getenv("CUDA_HOME")) {
    c.push_back(std::string(home) + "/lib64/libcublasLt.so.13");
    c.push_back(std::string(home) + "/lib64/libcublasLt.so.12");
  }
  c.push_back("/usr/local/cuda/lib64/libcublasLt.so.13");
  c.push_back("/usr/local/cuda/lib64/libcublasLt.so.12");
  return c;
}

}  // namespace

Result<std::unique_ptr<Blas>> Blas::open() {
  using R = Result<std::unique_ptr<Blas>>;
  auto api = std::make_unique<Api>();
  std::string tried;
  for (const auto& path : candidates()) {
    api->lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->lib) break;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + path + " (" + (why ? why : "?") + ")";
  }
  if (!api->lib) {
    return R::fail(Error{ErrorKind::Driver, "",
                         "the GEMM built-ins need cuBLASLt, which is not installed where kernrt "
                         "looks (set KERNRT_CUBLASLT to libcublasLt.so): tried " + tried});
  }
  const bool ok = sym(api->lib, "cublasLtCreate", &api->create) &&
                  sym(api->lib, "cublasLtDestroy", &api->destroy) &&
                  sym(api->lib, "cublasLtMatmulDescCreate", &api->desc_create) &&
                  sym(api->lib, "cublasLtMatmulDescDestroy", &api->desc_destroy) &&
                  sym(api->lib, "cublasLtMatmulDescSetAttribute", &api->desc_set) &&
                  sym(api->lib, "cublasLtMatrixLayoutCreate", &api->layout_create) &&
                  sym(api->lib, "cublasLtMatrixLayoutDestroy", &api->layout_destroy) &&
                  sym(api->lib, "cublasLtMatmulPreferenceCreate", &api->pref_create) &&
                  sym(api->lib, "cublasLtMatmulPreferenceDestroy", &api->pref_destroy) &&
                  sym(api->lib, "cublasLtMatmulPreferenceSetAttribute", &api->pref_set) &&
                  sym(api->lib, "cublasLtMatmulAlgoGetHeuristic", &api->heuristic) &&
                  sym(api->lib, "cublasLtMatmul", &api->matmul);
  if (!ok) return R::fail(Error{ErrorKind::Driver, "", "libcublasLt lacks an entry point kernrt needs"});
  std::unique_ptr<Blas> blas(new Blas());
  cublasLtHandle_t h = nullptr;
  if (cublasStatus_t st = api->create(&h); st != CUBLAS_STATUS_SUCCESS) {
    return R::fail(Error{ErrorKind::Driver, "", "cublasLtCreate failed with status " +
                                                    std::to_string(static_cast<int>(st))});
  }
  blas->handle_ = h;
  blas->api_ = std::move(api);
  return R::ok(std::move(blas));
}

Blas::~Blas() {
  plans_.clear();
  if (handle_ && api_) api_->destroy(static_cast<cublasLtHandle_t>(handle_));
}

std::optional<Error> Blas::gemm(GemmKind kind, const GemmShape& s, uint64_t a, uint64_t w,
                                uint64_t c, CUstream stream, const std::string& where) {
  const Api& x = *api_;
  auto failed = [&](const char* what, cublasStatus_t st) {
    return Error{ErrorKind::Driver, where, std::string(what) + " failed with cuBLAS status " +
                                               std::to_string(static_cast<int>(st)) + " for `" +
                                               gemm_name(kind) + "` m=" + std::to_string(s.m) +
                                               " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k)};
  };
  const auto key = std::make_tuple(static_cast<int>(kind), s.m, s.n, s.k, s.lda, s.ldc);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto p = std::make_unique<Plan>();
    p->api = &x;
    const cudaDataType_t c_type = gemm_output_f32(kind) ? CUDA_R_32F : CUDA_R_16BF;
    cublasStatus_t st = x.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmulDescCreate", st);
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    x.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    x.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n);
    // W' is k x n (ld k) transposed; A' is k x m (ld lda); C' is n x m (ld ldc).
    if ((st = x.layout_create(&p->w, CUDA_R_16BF, s.k, s.n, static_cast<int64_t>(s.k))) ||
        (st = x.layout_create(&p->a, CUDA_R_16BF, s.k, s.m, static_cast<int64_t>(s.lda))) ||
        (st = x.layout_create(&p->c, c_type, s.n, s.m, static_cast<int64_t>(s.ldc)))) {
      return failed("cublasLtMatrixLayoutCreate", st);
    }
    cublasLtMatmulPreference_t pref = nullptr;
    if ((st = x.pref_create(&pref))) return failed("cublasLtMatmulPreferenceCreate", st);
    const uint64_t ws = workspace_bytes_;
    x.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    st = x.heuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->w, p->a, p->c, p->c, pref,
                     1, &result, &found);
    x.pref_destroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      return failed("cublasLtMatmulAlgoGetHeuristic (no algorithm for this shape and alignment)",
                    st == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_SUPPORTED : st);
    }
    p->algo = result.algo;
    it = plans_.emplace(key, std::move(p)).first;
  }
  const Plan& p = *it->second;
  const float alpha = 1.0f, beta = kind == GemmKind::Bf16Acc ? 1.0f : 0.0f;
  cublasStatus_t st = x.matmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha,
                               reinterpret_cast<const void*>(w), p.w, reinterpret_cast<const void*>(a), p.a,
                               &beta, reinterpret_cast<const void*>(c), p.c, reinterpret_cast<void*>(c), p.c,
                               &p.algo, reinterpret_cast<void*>(workspace_), workspace_bytes_,
                               reinterpret_cast<cudaStream_t>(stream));
  if (st != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmul", st);
  return std::nullopt;
}

}  // namespace kernrt::rt
