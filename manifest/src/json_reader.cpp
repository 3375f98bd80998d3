// Strict JSON reading (duplicate keys, depth, NUL, UTF-8, non-finite numbers, line:column)
// into a DOM, and freeing a DOM without allocating. See json_reader.hpp for the contract;
// Node, the checked reader over the DOM, is in json_node.cpp. This file does not know the
// manifest schema.
#include "json_reader.hpp"

#include <cmath>
#include <iterator>
#include <new>

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

void free_without_allocating(Json& j) noexcept {
  // Children first: a container is emptied in place, so each element destroyed is a
  // scalar or an empty container, whose destructor allocates nothing. Recursion depth is
  // the DOM's nesting, which the reader caps at kMaxDepth.
  if (j.is_array()) {
    auto& a = j.get_ref<Json::array_t&>();
    while (!a.empty()) {
      free_without_allocating(a.back());
      a.pop_back();
    }
  } else if (j.is_object()) {
    auto& o = j.get_ref<Json::object_t&>();
    while (!o.empty()) {
      auto last = std::prev(o.end());
      free_without_allocating(last->second);
      o.erase(last);
    }
  }
}

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
  } catch (const std::bad_alloc&) {
    free_without_allocating(sax.root());  // before ~StrictSax, whose DOM destructor allocates
    throw;
  }
  if (!ok || sax.error()) {
    if (sax.error()) return Result<Json>::fail(std::move(*sax.error()));
    return Result<Json>::fail(syntax_error(text, 0, "invalid json"));
  }
  return Result<Json>::ok(std::move(sax.root()));
}

}  // namespace kernrt::manifest::detail
