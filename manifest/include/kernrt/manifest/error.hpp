// kernrt::Error: the one error type of the project.
//
// Every problem a user can cause carries who must act (kind), where (an RFC 6901 JSON
// pointer into the manifest, or a file/buffer name for runtime errors) and a lowercase
// message with names in backticks. Syntax errors also carry line:column (1-based).
// No exception type crosses a library boundary: functions return errors as values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kernrt {

enum class ErrorKind {
  Parse,     // the text is not a schema-v4 manifest (syntax, unknown key, bad type string)
  Manifest,  // a verifier rule is violated: the manifest's author must fix it
  Artifact,  // a cubin/weight is missing, changed, or does not match its declaration
  Driver,    // the CUDA driver or device failed or is absent
  Caller,    // the API was misused: bad var value, wrong input size, unknown buffer
  Io,        // a file could not be read or written
};

const char* to_string(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::Manifest;
  std::string path;     // RFC 6901 pointer ("" = whole document); for Io: the file name
  std::string message;  // lowercase, no final period, names in backticks
  uint32_t line = 0;    // 1-based, syntax errors only (0 = not known)
  uint32_t column = 0;

  // "/ops/x/impl: message" or "3:14: message" (syntax) or "message" (no path).
  std::string to_string() const;
};

using Errors = std::vector<Error>;

// Appends one RFC 6901 reference token to a pointer, escaping `~` and `/`.
std::string json_pointer_append(const std::string& pointer, const std::string& token);
std::string json_pointer_append(const std::string& pointer, uint64_t index);

}  // namespace kernrt

namespace kernrt {

// A value or the errors that prevented it. Parsing yields one error; verification
// yields every violation it found.
template <class T>
struct Result {
  std::optional<T> value;
  Errors errors;

  static Result ok(T v) { Result r; r.value.emplace(std::move(v)); return r; }
  static Result fail(Error e) { Result r; r.errors.push_back(std::move(e)); return r; }
  static Result fail(Errors es) { Result r; r.errors = std::move(es); return r; }
  explicit operator bool() const { return value.has_value(); }
};

}  // namespace kernrt
