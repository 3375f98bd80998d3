// Strict JSON reading (duplicate keys, depth, NUL, UTF-8, non-finite numbers, line:column)
// and Node, the checked reader over the DOM. See json_reader.hpp for the contract. This
// file does not know the manifest schema: which keys a position allows is the caller's.
#include "json_reader.hpp"

#include <cmath>
#include <limits>

namespace kernrt::manifest::detail {

void fail(const std::string& path, std::string message) {
  Error e;
  e.kind = ErrorKind::Parse;
  e.path = path;
  e.message = std::move(message);
  throw ParseFailure{bounded(std::move(e))};
}

namespace {

// 1-based line and column (in bytes) of the byte at `offset`.
std::pair<uint32_t, uint32_t> line_column(std::string_view text, std::size_t offset) {
  uint32_t line = 1;
  uint32_t column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Returns the offset of the first byte that is not valid UTF-8, or npos.
std::size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// Replaces bytes that are not valid UTF-8 (e.g. a token cut mid-character in a
// nlohmann message) with '?', so an error can always be written as JSON.
std::string sanitize_utf8(std::string s) {
  for (std::size_t at = first_invalid_utf8(s); at != std::string_view::npos; at = first_invalid_utf8(s)) {
    s[at] = '?';
  }
  return s;
}

Error syntax_error(std::string_view text, std::size_t offset, std::string message) {
  Error e;
  e.kind = ErrorKind::Parse;
  auto [line, column] = line_column(text, offset);
  e.line = line;
  e.column = column;
  // nlohmann quotes the token it last read, which can be most of the text: cut first, so
  // the repairs below look at a few kilobytes at most.
  e.message = sanitize_utf8(message.size() <= 4096 ? std::move(message) : shortened(message, 4096));
  return bounded(std::move(e));
}

// Builds the DOM from SAX events; rejects duplicate keys and excessive depth with the
// pointer of the offending value.
class StrictSax {
 public:
  explicit StrictSax(std::string_view text) : text_(text) {}

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string&) {
    if (!std::isfinite(v)) return reject("number is not finite");
    return put(Json(v));
  }
  bool string(std::string& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return reject("binary values are not json text"); }
  bool start_object(std::size_t) { return open(Json::object(), true); }
  // One map insertion per key: a key already present is a duplicate (the DOM would keep
  // the last value silently); otherwise its value slot waits for the value.
  bool key(std::string& k) {
    Frame& f = frames_.back();
    auto [it, inserted] = f.value->get_ref<Json::object_t&>().emplace(std::move(k), nullptr);
    if (!inserted) {
      duplicate_ = it->first;
      f.key = &duplicate_;
      return reject("duplicate name `" + duplicate_ + "`");
    }
    f.key = &it->first;
    f.slot = &it->second;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(Json::array(), false); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& ex) {
    if (error_) return false;
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error
    // while parsing value - invalid literal; last read: 'x'" -> the part after " - ".
    std::size_t dash = what.find(" - ");
    std::string detail = dash == std::string::npos ? what.substr(what.find(']') + 1)
                                                   : what.substr(dash + 3);
    while (!detail.empty() && detail.front() == ' ') detail.erase(detail.begin());
    if (ex.id == 406) detail = "number is not finite";
    std::size_t offset = position == 0 ? 0 : position - 1;
    error_ = syntax_error(text_, offset, "invalid json: " + detail);
    return false;
  }

  Json& root() { return root_; }
  std::optional<Error>& error() { return error_; }

 private:
  struct Frame {
    Json* value = nullptr;
    bool object = false;
    const std::string* key = nullptr;  // objects: the key whose value comes next
    Json* slot = nullptr;              // objects: where that value goes
  };

  std::string pointer() const {
    std::string p;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        p = json_pointer_append(p, f.key ? *f.key : std::string());
      } else {
        // An outer array already holds the child being built; the innermost one does not.
        uint64_t n = f.value->size();
        p = json_pointer_append(p, i + 1 < frames_.size() ? n - 1 : n);
      }
    }
    return p;
  }

  bool reject(std::string message) {
    Error e;
    e.kind = ErrorKind::Parse;
    e.path = pointer();
    e.message = std::move(message);
    error_ = bounded(std::move(e));
    return false;
  }

  Json* insert(Json v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.object) {
      *f.slot = std::move(v);
      return f.slot;
    }
    f.value->push_back(std::move(v));
    return &f.value->back();
  }

  bool put(Json v) {
    insert(std::move(v));
    return true;
  }

  bool open(Json v, bool object) {
    if (frames_.size() >= kMaxDepth) {
      return reject("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    Json* slot = insert(std::move(v));
    Frame f;
    f.value = slot;
    f.object = object;
    frames_.push_back(std::move(f));
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  std::string_view text_;
  Json root_;
  std::vector<Frame> frames_;
  std::string duplicate_;
  std::optional<Error> error_;
};

}  // namespace

Result<Json> read_json(std::string_view text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return Result<Json>::fail(syntax_error(text, text.size(), "empty input"));
  }
  std::size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    return Result<Json>::fail(syntax_error(text, nul, "NUL byte in json text"));
  }
  std::size_t bad = first_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    return Result<Json>::fail(syntax_error(text, bad, "invalid utf-8 in json text"));
  }
  StrictSax sax(text);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const nlohmann::json::exception& ex) {
    return Result<Json>::fail(syntax_error(text, 0, std::string("invalid json: ") + ex.what()));
  }
  if (!ok || sax.error()) {
    if (sax.error()) return Result<Json>::fail(std::move(*sax.error()));
    return Result<Json>::fail(syntax_error(text, 0, "invalid json"));
  }
  return Result<Json>::ok(std::move(sax.root()));
}

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
