// Internal: strict JSON text reading and the one typed reader every parse goes through.
//
// read_json() turns text into a DOM and rejects what the default DOM would accept or
// mangle: duplicate keys (the DOM keeps the last one), nesting deeper than kMaxDepth,
// NUL bytes, invalid UTF-8, non-finite numbers (1e400), empty input. Syntax errors carry
// line:column. Node wraps one DOM value with its RFC 6901 pointer and the manifest's
// `constants`; it checks JSON kind and numeric range before converting and reports
// unknown and missing keys. Failures are thrown as ParseFailure and turned into a
// Result at the public entry points only; nothing here knows the manifest schema.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernrt/manifest/error.hpp"

namespace kernrt::manifest::detail {

using Json = nlohmann::json;

// Deep enough for every schema-v4 position (13 levels) plus nested expressions.
constexpr std::size_t kMaxDepth = 128;

struct ParseFailure {
  Error error;
};

[[noreturn]] void fail(const std::string& path, std::string message);

// Strict text -> DOM. One Parse error on failure.
Result<Json> read_json(std::string_view text);

// A short description of a JSON value for "found ..." messages.
std::string describe(const Json& j);

// Named numbers of the late-v4 `constants` table (§1.16).
class Constants {
 public:
  Constants() = default;
  // Reads `/constants` of a manifest root (absent = empty); checks names are non-empty,
  // values are numbers and no name is also a var.
  static Constants from_root(const Json& root);
  const Json* find(const std::string& name) const;
  bool declared() const { return declared_; }

 private:
  std::map<std::string, Json> values_;
  bool declared_ = false;
};

class Node {
 public:
  Node(const Json& j, std::string path, const Constants* constants)
      : j_(&j), path_(std::move(path)), constants_(constants) {}

  const Json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  const Constants* constants() const { return constants_; }
  Node with_json(const Json& j) const { return Node(j, path_, constants_); }

  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  bool is_string() const { return j_->is_string(); }
  bool is_number() const { return j_->is_number(); }

  // Objects with a fixed key set: errors "unknown field `k`" at the key's pointer.
  void expect_object(const char* what) const;
  void allow_keys(std::initializer_list<const char*> allowed) const;
  bool has(const char* key) const;
  Node at(const char* key) const;  // required: "missing field `key`"
  std::optional<Node> get(const char* key) const;
  std::vector<std::string> keys() const;

  // name -> value maps (keys sorted) and arrays.
  std::vector<std::pair<std::string, Node>> entries(const char* what) const;
  std::vector<Node> items(const char* what) const;
  std::vector<Node> items_exactly(std::size_t n, const char* what) const;

  // Scalars. Numeric positions resolve a string that names a constant; an unknown
  // name there is "undefined constant `X`".
  std::string str() const;
  bool boolean() const;
  uint64_t u64() const;
  uint32_t u32() const;
  uint8_t u8() const;
  int32_t i32() const;
  int64_t i64() const;
  double f32() const;
  double number() const;

  // For positions that accept a number or a name: a string naming a constant becomes
  // the constant's value; any other string stays. Non-strings are returned unchanged.
  Node substituted() const;

 private:
  Node resolved_number() const;
  const Json* j_;
  std::string path_;
  const Constants* constants_;
};

}  // namespace kernrt::manifest::detail
