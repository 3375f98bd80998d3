// kernrt::Error formatting and RFC 6901 pointer building. Owns the text form of an
// error ("/path: message", "L:C: message", "/: message", "message"), how quoted input is
// shown (shortened, printable); it does not decide wording.
#include "kernrt/manifest/error.hpp"

#include <charconv>

namespace kernrt {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Parse: return "parse";
    case ErrorKind::Manifest: return "manifest";
    case ErrorKind::Artifact: return "artifact";
    case ErrorKind::Driver: return "driver";
    case ErrorKind::Caller: return "caller";
    case ErrorKind::Io: return "io";
  }
  return "unknown";
}

std::string Error::to_string() const {
  if (line != 0) {
    return std::to_string(line) + ":" + std::to_string(column) + ": " + printable(message);
  }
  if (!path.empty()) return printable(path) + ": " + printable(message);
  // The empty pointer is the whole document; shown as `/` so every manifest problem has a
  // location a reader can see.
  if (kind == ErrorKind::Parse || kind == ErrorKind::Manifest) return "/: " + printable(message);
  return printable(message);
}

namespace {

// Length of the UTF-8 sequence starting at s[i] and its code point, or 0 if the bytes
// there are not a well-formed sequence (overlong, surrogate, above U+10FFFF, truncated).
std::size_t utf8_at(std::string_view s, std::size_t i, uint32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned c = b(0);
  std::size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    *cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    *cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned t = b(k);
    if (t < (k == 1 ? lo : 0x80u) || t > (k == 1 ? hi : 0xBFu)) return 0;
    *cp = (*cp << 6) | (t & 0x3F);
  }
  return len;
}

bool hidden_format(uint32_t cp) {
  return cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

void append_hex(std::string* out, const char* prefix, uint32_t v, int digits) {
  static const char kHex[] = "0123456789abcdef";
  out->append(prefix);
  for (int d = digits - 1; d >= 0; --d) out->push_back(kHex[(v >> (4 * d)) & 0xF]);
}

}  // namespace

std::string shortened(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t cut = max;
  // Back up over continuation bytes so a multi-byte character is kept whole or dropped.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  std::string out(s.substr(0, cut));
  out += "\xe2\x80\xa6";  // U+2026 HORIZONTAL ELLIPSIS
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {  // the common case: printable ASCII
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const std::size_t len = utf8_at(s, i, &cp);
    if (len == 0) {
      append_hex(&out, "\\x", c, 2);
      ++i;
      continue;
    }
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) {
      append_hex(&out, "\\x", cp, 2);
    } else if (hidden_format(cp)) {
      append_hex(&out, "\\u", cp, 4);
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

namespace {

// Every reference token of a pointer longer than kShownNameBytes, shortened.
std::string bounded_pointer(const std::string& pointer) {
  std::string out;
  std::size_t start = 0;
  while (start < pointer.size()) {
    std::size_t end = pointer.find('/', start + 1);
    if (end == std::string::npos) end = pointer.size();
    // A token with its leading '/'.
    out += shortened(std::string_view(pointer).substr(start, end - start), kShownNameBytes + 1);
    start = end;
  }
  return out;
}

// Every `quoted` or 'quoted' span of a message longer than kShownNameBytes, shortened;
// the whole message at most kMaxMessage bytes. One pass: a quote with no closing partner
// means no later quote of that kind has one either, so no span is searched twice.
std::string bounded_message(const std::string& message) {
  constexpr std::size_t kMaxMessage = 2048;
  std::string out;
  bool unclosed_tick = false, unclosed_apostrophe = false;
  std::size_t i = 0;
  while (i < message.size() && out.size() <= kMaxMessage) {
    const char q = message[i];
    bool* unclosed = q == '`' ? &unclosed_tick : q == '\'' ? &unclosed_apostrophe : nullptr;
    const std::size_t close =
        unclosed && !*unclosed ? message.find(q, i + 1) : std::string::npos;
    if (close == std::string::npos) {
      if (unclosed) *unclosed = true;
      out.push_back(q);
      ++i;
      continue;
    }
    out.push_back(q);
    out += shortened(std::string_view(message).substr(i + 1, close - i - 1));
    out.push_back(q);
    i = close + 1;
  }
  return out.size() <= kMaxMessage ? out : shortened(out, kMaxMessage);
}

}  // namespace

Error bounded(Error e) {
  if (e.path.size() > kShownNameBytes) e.path = bounded_pointer(e.path);
  if (e.message.size() > kShownNameBytes) e.message = bounded_message(e.message);
  return e;
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string json_pointer_append(const std::string& pointer, const std::string& token) {
  std::string out;
  out.reserve(pointer.size() + token.size() + 1);
  out.append(pointer).push_back('/');
  bool plain = true;
  for (char c : token) plain = plain && c != '~' && c != '/';
  if (plain) return out.append(token);  // the common case: nothing to escape
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string json_pointer_append(const std::string& pointer, uint64_t index) {
  char digits[24];
  char* end = std::to_chars(digits, digits + sizeof digits, index).ptr;
  std::string out;
  out.reserve(pointer.size() + 1 + static_cast<std::size_t>(end - digits));
  out.append(pointer).push_back('/');
  return out.append(digits, end);
}

}  // namespace kernrt
