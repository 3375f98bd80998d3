// The verifier tests' one tiny base manifest and the helpers that apply one edit to it.
//
// The base exercises the impl machinery: `lookup` is a single launch with defaulted
// params and args; `mix` has two launches, a scratch, a `bytes<192>` pack with a
// tensormap, a param pointer, a scalar and a var field, and a shared_mem expression.
// Each test edits a copy through JSON pointers, verifies the text, and asserts that
// one error has the expected pointer and a message containing the expected phrase.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernrt/manifest/verify.hpp"

namespace kernrt::manifest::testing {

using Json = nlohmann::json;
using JsonPtr = nlohmann::json::json_pointer;

inline constexpr const char* kBaseManifest = R"({
  "schema_version": 4, "model": "base",
  "vars": {"tokens": {"max": 64}},
  "states": {"cache": {"bytes_per_token": 512}},
  "buffers": {
    "ids": {"dtype": "i32", "shape": ["tokens"], "kind": "input", "domain": {"min": 0, "max": 999}},
    "table": {"dtype": "bf16", "shape": [1000, 128], "kind": "weight"},
    "hidden": {"dtype": "bf16", "shape": ["tokens", 128], "kind": "workspace"},
    "out": {"dtype": "bf16", "shape": ["tokens", 128], "kind": "output"}
  },
  "modules": {
    "kern": {"source": "base.cubin",
             "sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
  },
  "ops": {
    "lookup": {
      "params": ["in buffer<i32>", "in buffer<bf16>", "out buffer<bf16>", "i32"],
      "impl": {"launches": [
        {"module": "kern", "entry": "lookup_k", "block": [128, 1, 1],
         "grid": [{"ceil_div": ["tokens", 4]}, 1, 1]}
      ]}
    },
    "mix": {
      "params": ["in buffer<bf16>", "inout state", "out buffer<bf16>", "i32"],
      "impl": {
        "scratch": {"acc": {"dtype": "f32", "shape": ["tokens", 128]}},
        "launches": [
          {"module": "kern", "entry": "mix_k",
           "params": ["in buffer<bf16>", "inout state", "out buffer<f32>", "bytes<192>"],
           "block": [256, 1, 1], "grid": ["tokens", 1, 1], "shared_mem": {"mul": ["tokens", 64]},
           "args": [{"param": 0}, {"param": 1}, {"scratch": "acc"},
             {"pack": {"size": 192, "fields": [
               {"at": 0, "tensormap": {"param": 0, "dtype": "bf16", "dims": [128, 64],
                                       "strides": [256], "box": [64, 16], "swizzle": 128}},
               {"at": 128, "param": 3},
               {"at": 136, "var": "tokens"},
               {"at": 144, "param": 2}
             ]}}]},
          {"module": "kern", "entry": "mix_out_k", "params": ["in buffer<f32>", "out buffer<bf16>", "i32"],
           "block": [128, 1, 1], "grid": ["tokens", 1, 1],
           "args": [{"scratch": "acc"}, {"param": 2}, {"i32": 128}]}
        ]
      }
    }
  },
  "programs": {
    "step": {"calls": [
      {"label": "embed", "op": "lookup",
       "args": [{"buf": "ids"}, {"buf": "table"}, {"buf": "hidden"}, {"var": "tokens"}]},
      {"label": "mix", "op": "mix",
       "args": [{"buf": "hidden"}, {"state": "cache"}, {"buf": "out"}, {"expr": {"mul": ["tokens", 2]}}]}
    ]}
  }
})";

// Pointers into the base used by many tests.
inline const char* const kMixPack = "/ops/mix/impl/launches/0/args/3/pack";
inline const char* const kMixLaunch = "/ops/mix/impl/launches/0";
inline const char* const kLookupLaunch = "/ops/lookup/impl/launches/0";

inline Json base() { return Json::parse(kBaseManifest); }

// `base` + `rest`, for pointers below the constants above.
inline std::string at(const char* base_pointer, const std::string& rest) {
  return std::string(base_pointer) + rest;
}

// A whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline Json edited(const std::function<void(Json&)>& edit) {
  Json j = base();
  edit(j);
  return j;
}

inline Errors errors_of(const Json& j) {
  Result<Verified> r = verify_json(j.dump());
  return r.errors;
}

inline std::string listing(const Errors& errs) {
  std::string s;
  for (const Error& e : errs) s += "\n  " + e.to_string();
  return s.empty() ? std::string(" (none)") : s;
}

// Asserts one error sits at `path` with `needle` in its message.
inline void expect_error(const Json& j, const std::string& path, const std::string& needle) {
  const Errors errs = errors_of(j);
  bool found = false;
  for (const Error& e : errs) {
    found = found || (e.path == path && e.message.find(needle) != std::string::npos);
  }
  EXPECT_TRUE(found) << "expected `" << path << ": ..." << needle << "...`, got:" << listing(errs);
}

inline void expect_verified(const Json& j) {
  const Errors errs = errors_of(j);
  EXPECT_TRUE(errs.empty()) << "expected no errors, got:" << listing(errs);
}

inline void set(Json& j, const std::string& pointer, Json value) {
  j[JsonPtr(pointer)] = std::move(value);
}

inline void erase(Json& j, const std::string& pointer) {
  JsonPtr p(pointer);
  Json& parent = j[p.parent_pointer()];
  if (parent.is_array()) {
    parent.erase(std::stoul(p.back()));
  } else {
    parent.erase(p.back());
  }
}

}  // namespace kernrt::manifest::testing
