// A one-rank topology manifest with the three NCCL collectives, shared by the CPU lowering
// tests and the GPU tests: group `tp` of 1 rank; all_reduce sums bf16 x -> y (n of 1024
// elements, n a var), all_gather lays f32 g -> gy (256), reduce_scatter sums i32 h -> hy
// (256). With one rank each collective is a copy of its first n elements, which is what
// the GPU test checks, eager and under graph replay.
#pragma once

namespace kernrt::testing {

inline const char* kNcclManifest = R"({
  "schema_version": 4, "model": "kernrt-test-nccl",
  "topology": {"groups": {"tp": 1}},
  "vars": {"n": {"max": 1024}},
  "buffers": {
    "x": {"dtype": "bf16", "shape": [1024], "kind": "input"},
    "y": {"dtype": "bf16", "shape": [1024], "kind": "output"},
    "g": {"dtype": "f32", "shape": [256], "kind": "input"},
    "gy": {"dtype": "f32", "shape": [256], "kind": "output"},
    "h": {"dtype": "i32", "shape": [256], "kind": "input"},
    "hy": {"dtype": "i32", "shape": [256], "kind": "output"}
  },
  "modules": {},
  "ops": {
    "ar": {"params": ["in buffer<bf16>", "out buffer<bf16>", "i64"],
           "impl": {"launches": [{"entry": "extern:nccl_allreduce_bf16",
                                  "params": ["in buffer<bf16>", "out buffer<bf16>", "i64", "i32"],
                                  "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}},
    "ag": {"params": ["in buffer<f32>", "out buffer<f32>", "i64"],
           "impl": {"launches": [{"entry": "extern:nccl_allgather_f32",
                                  "params": ["in buffer<f32>", "out buffer<f32>", "i64", "i32"],
                                  "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}},
    "rs": {"params": ["in buffer<i32>", "out buffer<i32>", "i64"],
           "impl": {"launches": [{"entry": "extern:nccl_reducescatter_i32",
                                  "params": ["in buffer<i32>", "out buffer<i32>", "i64", "i32"],
                                  "args": [{"param": 0}, {"param": 1}, {"param": 2}, {"rank": "tp"}]}]}}
  },
  "programs": {
    "all_reduce": {"calls": [{"op": "ar", "args": [{"buf": "x"}, {"buf": "y"}, {"var": "n"}]}]},
    "all_gather": {"calls": [{"op": "ag", "args": [{"buf": "g"}, {"buf": "gy"}, {"i64": 256}]}]},
    "reduce_scatter": {"calls": [{"op": "rs", "args": [{"buf": "h"}, {"buf": "hy"}, {"i64": 256}]}]}
  }
})";

}  // namespace kernrt::testing
