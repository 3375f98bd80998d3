// Node, the checked reader over the DOM that read_json (json_reader.cpp) builds: JSON kind
// and numeric range checks, unknown and missing keys, `constants` substitution, pointers
// computed only when an error is raised. See json_reader.hpp for the contract. This file
// does not know the manifest schema: which keys a position allows is the caller's.
#include <cmath>
#include <limits>

#include "json_reader.hpp"

namespace kernrt::manifest::detail {

std::string describe(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: {
      std::string s = j.get<std::string>();
      if (s.size() > 64) {
        std::size_t cut = 61;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
        s = s.substr(0, cut) + "...";
      }
      return "string \"" + s + "\"";
    }
    case Json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case Json::value_t::null: return "null";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return j.dump();
    default: return "a binary value";
  }
}

Constants Constants::from_root(const Json& root) {
  Constants c;
  if (!root.is_object()) return c;
  auto it = root.find("constants");
  if (it == root.end()) return c;
  if (!it->is_object()) fail("/constants", "expected an object of named numbers, found " + describe(*it));
  c.declared_ = true;
  const Json* vars = nullptr;
  auto v = root.find("vars");
  if (v != root.end() && v->is_object()) vars = &*v;
  for (auto e = it->begin(); e != it->end(); ++e) {
    std::string path = json_pointer_append("/constants", e.key());
    if (e.key().empty()) fail(path, "a constant needs a non-empty name");
    if (!e->is_number()) fail(path, "constant `" + e.key() + "` must be a number, found " + describe(*e));
    if (vars && vars->contains(e.key())) fail(path, "constant `" + e.key() + "` conflicts with a var");
    c.values_.emplace(e.key(), *e);
  }
  return c;
}

const Json* Constants::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {

// Depth-first search for `target` below `j`; appends the reference tokens on the way back.
bool find_pointer(const Json& j, const Json* target, std::string* out) {
  if (&j == target) return true;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string below;
      if (find_pointer(*it, target, &below)) {
        *out = json_pointer_append(std::string(), it.key()) + below;
        return true;
      }
    }
  } else if (j.is_array()) {
    uint64_t i = 0;
    for (const Json& v : j) {
      std::string below;
      if (find_pointer(v, target, &below)) {
        *out = json_pointer_append(std::string(), i) + below;
        return true;
      }
      ++i;
    }
  }
  return false;
}

}  // namespace

std::string Node::path() const {
  std::string p;
  find_pointer(*root_, at_, &p);
  return p;
}

void Node::expect_object(const char* what) const {
  if (!j_->is_object()) fail(path(), std::string("expected ") + what + " object, found " + describe(*j_));
}

void Node::allow_keys(std::initializer_list<std::string_view> allowed) const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    const std::string& key = it.key();
    bool ok = false;
    for (std::string_view k : allowed) ok = ok || key == k;  // sizes first, then bytes
    if (!ok) {
      std::string expected;
      for (std::string_view k : allowed) {
        expected += expected.empty() ? "`" : ", `";
        expected.append(k.data(), k.size()) += "`";
      }
      fail(json_pointer_append(path(), key),
           "unknown field `" + key + "`, expected " + (allowed.size() == 1 ? "" : "one of ") + expected);
    }
  }
}

bool Node::has(const char* key) const { return j_->is_object() && j_->contains(key); }

Node Node::at(const char* key) const {
  auto it = j_->find(key);
  if (it == j_->end()) fail(path(), std::string("missing field `") + key + "`");
  return child(*it);
}

std::optional<Node> Node::get(const char* key) const {
  auto it = j_->find(key);
  if (it == j_->end()) return std::nullopt;
  return child(*it);
}

std::vector<std::string> Node::keys() const {
  std::vector<std::string> out;
  if (!j_->is_object()) return out;
  for (auto it = j_->begin(); it != j_->end(); ++it) out.push_back(it.key());
  return out;
}

std::vector<std::pair<std::string, Node>> Node::entries(const char* what) const {
  if (!j_->is_object()) fail(path(), std::string("expected an object of ") + what + ", found " + describe(*j_));
  std::vector<std::pair<std::string, Node>> out;
  out.reserve(j_->size());
  for (auto it = j_->begin(); it != j_->end(); ++it) out.emplace_back(it.key(), child(*it));
  return out;
}

std::vector<Node> Node::items(const char* what) const {
  if (!j_->is_array()) fail(path(), std::string("expected an array of ") + what + ", found " + describe(*j_));
  std::vector<Node> out;
  out.reserve(j_->size());
  for (const Json& v : *j_) out.push_back(child(v));
  return out;
}

std::vector<Node> Node::items_exactly(std::size_t n, const char* what) const {
  std::vector<Node> out = items(what);
  if (out.size() != n) {
    fail(path(), "expected " + std::to_string(n) + " " + what + ", found " + std::to_string(out.size()));
  }
  return out;
}

std::string Node::str() const {
  if (!j_->is_string()) fail(path(), "expected a string, found " + describe(*j_));
  return j_->get<std::string>();
}

bool Node::boolean() const {
  if (!j_->is_boolean()) fail(path(), "expected a boolean, found " + describe(*j_));
  return j_->get<bool>();
}

Node Node::substituted() const {
  if (j_->is_string() && constants_) {
    if (const Json* c = constants_->find(j_->get<std::string>())) return with_json(*c);
  }
  return *this;
}

void Node::release() const {
  // The DOM is built by read_json and owned, non-const, by the parse entry point; Nodes
  // carry it as const only so that conversion code cannot edit it by accident.
  if (j_ == at_) *const_cast<Json*>(j_) = nullptr;
}

Node Node::resolved_number() const {
  if (j_->is_string() && constants_ && constants_->declared()) {
    std::string name = j_->get<std::string>();
    const Json* c = constants_->find(name);
    if (!c) fail(path(), "undefined constant `" + name + "`");
    return with_json(*c);
  }
  return *this;  // a non-number fails in the caller's kind check with its range
}

namespace {

// Checks an integer against [lo, hi] before any conversion. The message is built only on
// failure: this runs for every number of a manifest.
[[noreturn]] void out_of_range(const Node& n, const std::string& range, bool is_number) {
  fail(n.path(), "expected " + range + ", found " + (is_number ? n.json().dump() : describe(n.json())));
}

std::string signed_range(int64_t lo, int64_t hi, const char* type) {
  return std::string(type) + " (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
}

int64_t signed_in(const Node& n, int64_t lo, int64_t hi, const char* type) {
  const Json& j = n.json();
  if (j.type() == Json::value_t::number_unsigned) {
    uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(hi)) out_of_range(n, signed_range(lo, hi, type), true);
    return static_cast<int64_t>(v);
  }
  if (j.type() == Json::value_t::number_integer) {
    int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) out_of_range(n, signed_range(lo, hi, type), true);
    return v;
  }
  out_of_range(n, signed_range(lo, hi, type), false);
}

uint64_t unsigned_in(const Node& n, uint64_t hi, const char* type) {
  const Json& j = n.json();
  auto range = [&] { return std::string(type) + " (0.." + std::to_string(hi) + ")"; };
  if (j.type() == Json::value_t::number_unsigned) {
    uint64_t v = j.get<uint64_t>();
    if (v > hi) out_of_range(n, range(), true);
    return v;
  }
  if (j.type() == Json::value_t::number_integer && j.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(j.get<int64_t>());  // "-0" reads as a signed zero
  }
  out_of_range(n, range(), false);
}

}  // namespace

uint64_t Node::u64() const {
  return unsigned_in(resolved_number(), std::numeric_limits<uint64_t>::max(), "u64");
}
uint32_t Node::u32() const {
  return static_cast<uint32_t>(unsigned_in(resolved_number(), std::numeric_limits<uint32_t>::max(), "u32"));
}
uint8_t Node::u8() const {
  return static_cast<uint8_t>(unsigned_in(resolved_number(), 255, "u8"));
}
int32_t Node::i32() const {
  return static_cast<int32_t>(signed_in(resolved_number(), std::numeric_limits<int32_t>::min(),
                                        std::numeric_limits<int32_t>::max(), "i32"));
}
int64_t Node::i64() const {
  return signed_in(resolved_number(), std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max(), "i64");
}

double Node::number() const {
  Node n = resolved_number();
  if (!n.json().is_number()) fail(path(), "expected a number, found " + describe(n.json()));
  return n.json().get<double>();
}

double Node::f32() const {
  double v = number();
  if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
    fail(path(), "expected an f32, found " + j_->dump() + " (out of f32 range)");
  }
  return v;
}

}  // namespace kernrt::manifest::detail
