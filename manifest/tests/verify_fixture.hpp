// The verifier tests' one tiny base manifest (base.json) and the helpers that edit it.
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

// The base manifest's path: base.json next to this header, which the hostile catalogue
// (tools/verify/tests/hostile) edits too.
inline std::string base_manifest_path() {
  return std::string(KERNRT_SOURCE_DIR) + "/manifest/tests/base.json";
}

// Pointers into the base used by many tests.
inline const char* const kMixPack = "/ops/mix/impl/launches/0/args/3/pack";
inline const char* const kMixLaunch = "/ops/mix/impl/launches/0";
inline const char* const kLookupLaunch = "/ops/lookup/impl/launches/0";

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

// A fresh copy of the base manifest (read and parsed once per process).
inline Json base() {
  static const Json parsed = Json::parse(slurp(base_manifest_path()));
  return parsed;
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
