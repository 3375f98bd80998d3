// Helpers for core's manifest tests: one small base manifest that exercises every v4
// form, edits through JSON pointers, and error assertions (path + message substring).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernrt/manifest/error.hpp"

namespace core_test {

using Json = nlohmann::json;

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string corpus(const std::string& rel) {
  return read_file(std::string(KERNRT_SHARED_DIR) + "/corpus/" + rel);
}

inline std::string errors_text(const kernrt::Errors& errors) {
  std::string s;
  for (const auto& e : errors) s += e.to_string() + "\n";
  return s.empty() ? "(no errors)" : s;
}

// Every v4 form the parser knows, in one manifest (not meant to verify).
inline const char* kBase = R"({
 "schema_version": 4,
 "model": "base",
 "topology": {"groups": {"ep": 2}},
 "vars": {"tokens": {"max": 64}, "seqs": {"max": 4}},
 "states": {"kv": {"bytes_per_token": 512}, "conv": {"bytes_per_seq": 96}, "flag": {"bytes": 8}},
 "buffers": {
  "x": {"dtype": "bf16", "shape": ["tokens", 128], "kind": "input", "fill": "token",
        "domain": {"min": -1.5, "max": {"mul": ["tokens", 2]}}},
  "idx": {"dtype": "i32", "shape": ["seqs", 4], "kind": "input",
          "domain": {"index_into": "kv", "stride": 16, "monotone": false}},
  "lo": {"dtype": "i64", "shape": [1], "kind": "weight", "domain": {"min": -7, "max": 9}},
  "y": {"dtype": "bf16", "shape": ["tokens", 128], "kind": "output", "export": true},
  "peers": {"dtype": "u64", "shape": [2], "kind": "peer", "of": "y", "group": "ep"}
 },
 "modules": {"m": {"source": "m.cubin", "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}},
 "ops": {
  "op": {
   "params": ["in buffer<bf16>", "in buffer<i32>", "out buffer<bf16>", "inout state", "i32"],
   "impl": {
    "scratch": {"tmp": {"dtype": "f32", "shape": ["tokens", 2]}},
    "launches": [
     {"module": "m", "entry": "k1",
      "params": ["in buffer<bf16>", "out buffer<f32>", "bytes<192>", "i64", "f32", "u8", "i32"],
      "block": [128, 1, 1], "grid": [{"ceil_div": ["tokens", 4]}, 1, {"mul": ["seqs", 2]}],
      "shared_mem": 1024, "cluster": [1, 1, 1], "pdl": true,
      "args": [{"param": 0}, {"scratch": "tmp"},
       {"pack": {"size": 192, "fields": [
        {"at": 0, "tensormap": {"param": 2, "dtype": "bf16", "dims": [128, 0], "strides": [256],
                                "box": [64, 8], "swizzle": 128, "l2_promotion": 256, "oob_nan": true}},
        {"at": 128, "var": "tokens", "width": 4},
        {"at": 132, "expr": {"mul": ["seqs", 8]}},
        {"at": 136, "i32": -3},
        {"at": 140, "f32": 0.5},
        {"at": 144, "u8": 7},
        {"at": 152, "i64": -9000000000},
        {"at": 160, "param": 3},
        {"at": 168, "scratch": "tmp"},
        {"at": 176, "rank": "ep"}]}},
       {"i64": 5}, {"f32": 1.25}, {"u8": 3}, {"rank": "ep"}]},
     {"entry": "extern:cublaslt_bf16_tn", "params": ["in buffer<bf16>", "out buffer<bf16>", "i32"],
      "args": [{"param": 0}, {"param": 2}, {"i32": 128}]},
     {"module": "m", "entry": "k2", "block": [32, 1, 1], "grid": ["seqs", 1, 1]}
    ]
   }
  }
 },
 "programs": {
  "step": {"batch": {"groups": 2, "rows": 1, "span": "seqs"}, "calls": [
   {"label": "first", "op": "op", "args": [{"buf": "x"}, {"buf": "idx", "offset": 16}, {"buf": "y"},
    {"state": "kv", "offset": 1024}, {"var": "tokens"}]}
  ]},
  "chunk": {"batch": {"groups": 1, "rows": "tokens"}, "calls": [
   {"op": "op", "args": [{"buf": "x"}, {"buf": "idx"}, {"buf": "y"}, {"state": "kv"},
    {"expr": {"ceil_div": ["tokens", 2]}}]}
  ]},
  "init": {"once": true, "calls": [
   {"op": "op", "args": [{"i32": -1}, {"i64": 2}, {"f32": 0.25}, {"u8": 255}, {"rank": "ep"}]}
  ]}
 }
})";

inline Json base() { return Json::parse(kBase); }

inline void set(Json& j, const std::string& pointer, Json v) { j[Json::json_pointer(pointer)] = std::move(v); }

inline void erase(Json& j, const std::string& pointer) {
  Json::json_pointer p(pointer);
  j[p.parent_pointer()].erase(p.back());
}

// Asserts exactly one error at `path` whose message contains `needle`.
inline ::testing::AssertionResult has_error(const kernrt::Errors& errors, const std::string& path,
                                           const std::string& needle) {
  if (errors.size() != 1) {
    return ::testing::AssertionFailure() << "expected one error, got " << errors.size() << ":\n"
                                         << errors_text(errors);
  }
  const auto& e = errors.front();
  if (e.path != path || e.message.find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "expected `" << path << ": ..." << needle << "...`, got `"
                                         << e.to_string() << "` (path `" << e.path << "`)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace core_test
