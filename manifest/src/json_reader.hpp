// Internal: strict JSON text reading (json_reader.cpp) and the one typed reader every parse
// goes through (Node, json_node.cpp).
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

// Throws a Parse error at `path`; the error goes through kernrt::bounded().
[[noreturn]] void fail(const std::string& path, std::string message);

// Strict text -> DOM. One Parse error on failure; std::bad_alloc is rethrown after the
// partial DOM is freed with free_without_allocating.
Result<Json> read_json(std::string_view text);

// Frees a DOM without allocating. nlohmann's destructor first reserves a stack as large as
// a container's children, so when memory is what ran out, destroying a DOM during the
// unwinding of a std::bad_alloc throws again and terminates the process; this empties it
// bottom-up instead (depth bounded by kMaxDepth), leaving `j` an empty container.
void free_without_allocating(Json& j) noexcept;

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

// A position in the DOM being parsed. The RFC 6901 pointer of a position is computed only
// when an error is raised (a search from the root for the position's DOM value): building a
// pointer string for every value was a third of the parse time of a 1 MB manifest. The DOM
// must outlive every Node made from it. Parsing edits it in one way only: release() empties
// a subtree that has been converted (so the DOM shrinks as the model grows); the positions
// of everything else, and so the pointers of later errors, stay the same.
class Node {
 public:
  // The document root: pointer "".
  Node(const Json& root, const Constants* constants)
      : j_(&root), at_(&root), root_(&root), constants_(constants) {}

  const Json& json() const { return *j_; }
  std::string path() const;  // the pointer of this position (computed: use on error paths)
  const Constants* constants() const { return constants_; }
  // The same position holding another value (a substituted constant).
  Node with_json(const Json& j) const { return Node(j, *this); }
  // The same position, with constants switched off (schema_version is never substituted).
  Node without_constants() const {
    Node n = *this;
    n.constants_ = nullptr;
    return n;
  }

  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  bool is_string() const { return j_->is_string(); }
  bool is_number() const { return j_->is_number(); }

  // Objects with a fixed key set: errors "unknown field `k`" at the key's pointer.
  void expect_object(const char* what) const;
  void allow_keys(std::initializer_list<std::string_view> allowed) const;
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

  // Frees the DOM value at this position (it becomes null) once the caller has converted
  // it. Only for positions read straight from the document (not substituted constants).
  void release() const;

 private:
  // A child value of this position (an object member or array element of the DOM).
  Node child(const Json& j) const { return Node(j, j, root_, constants_); }
  Node(const Json& value, const Node& place)
      : j_(&value), at_(place.at_), root_(place.root_), constants_(place.constants_) {}
  Node(const Json& value, const Json& at, const Json* root, const Constants* constants)
      : j_(&value), at_(&at), root_(root), constants_(constants) {}
  Node resolved_number() const;

  const Json* j_;     // the value read here
  const Json* at_;    // the DOM value whose pointer names this position
  const Json* root_;  // the DOM root, where a pointer search starts
  const Constants* constants_;
};

}  // namespace kernrt::manifest::detail
