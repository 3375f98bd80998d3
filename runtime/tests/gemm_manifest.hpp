// A small manifest exercising the three GEMM built-ins, shared by the CPU lowering tests and
// the GPU tests: A [m, lda] bf16 (row stride lda = 136 > k = 128), W [n, k] bf16,
// C [m, ldc] bf16 (ldc = 104 > n = 96) and Cf [m, n] f32; m is the var `m` (max 64).
// Program gemm_acc writes C = A·Wᵀ, then accumulates C += A·Wᵀ (an output is written first).
#pragma once

namespace kernrt::testing {

inline const char* kGemmManifest = R"({
  "schema_version": 4, "model": "kernrt-test-gemm",
  "vars": {"m": {"max": 64}},
  "buffers": {
    "a": {"dtype": "bf16", "shape": [64, 136], "kind": "input"},
    "w": {"dtype": "bf16", "shape": [96, 128], "kind": "input"},
    "c": {"dtype": "bf16", "shape": [64, 104], "kind": "output"},
    "cf": {"dtype": "f32", "shape": [64, 96], "kind": "output"}
  },
  "modules": {},
  "ops": {
    "proj": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "i32", "i32", "i32", "i32", "i32"],
             "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn"}]}},
    "proj_acc": {"params": ["in buffer<bf16>", "in buffer<bf16>", "inout buffer<bf16>", "i32", "i32", "i32", "i32", "i32"],
                 "impl": {"launches": [{"entry": "extern:cublaslt_bf16_tn_acc"}]}},
    "proj_f32": {"params": ["in buffer<bf16>", "in buffer<bf16>", "out buffer<f32>", "i32", "i32", "i32", "i32", "i32"],
                 "impl": {"launches": [{"entry": "extern:cublas_bf16_tn_f32"}]}}
  },
  "programs": {
    "gemm": {"calls": [{"op": "proj", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 96}, {"i32": 128}, {"i32": 104}, {"i32": 136}]}]},
    "gemm_acc": {"calls": [{"op": "proj", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 96}, {"i32": 128}, {"i32": 104}, {"i32": 136}]},
                           {"op": "proj_acc", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "c"}, {"var": "m"}, {"i32": 96}, {"i32": 128}, {"i32": 104}, {"i32": 136}]}]},
    "gemm_f32": {"calls": [{"op": "proj_f32", "args": [{"buf": "a"}, {"buf": "w"}, {"buf": "cf"}, {"var": "m"}, {"i32": 96}, {"i32": 128}, {"i32": 96}, {"i32": 136}]}]}
  }
})";

}  // namespace kernrt::testing
