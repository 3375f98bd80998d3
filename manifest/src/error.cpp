// kernrt::Error formatting and RFC 6901 pointer building. Owns the text form of an
// error ("/path: message", "L:C: message", "message"); it does not decide wording.
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
    return std::to_string(line) + ":" + std::to_string(column) + ": " + message;
  }
  if (!path.empty()) return path + ": " + message;
  return message;
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
