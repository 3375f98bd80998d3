// kernrt::Error formatting and RFC 6901 pointer building. Owns the text form of an
// error ("/path: message", "L:C: message", "message"); it does not decide wording.
#include "kernrt/manifest/error.hpp"

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
  std::string out = pointer;
  out.reserve(pointer.size() + token.size() + 1);
  out.push_back('/');
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
  return pointer + "/" + std::to_string(index);
}

}  // namespace kernrt
