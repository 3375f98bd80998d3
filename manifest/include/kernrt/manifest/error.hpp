// kernrt::Error: the one error type of the project.
//
// Every problem a user can cause carries who must act (kind), where (an RFC 6901 JSON
// pointer into the manifest, or a file/buffer name for runtime errors) and a lowercase
// message with names in backticks. Syntax errors also carry line:column (1-based).
// No exception type crosses a library boundary: functions return errors as values.
//
// Errors quote input (names, sources, file names), so this file also owns how input is
// shown: `shortened` bounds a quoted name (a 1 MiB op name must not make every error a
// megabyte) and `printable` escapes what a terminal would interpret (a newline or an
// escape sequence in a name must not let a rejected manifest print a forged line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

  // The human-readable form, every part passed through `printable`:
  // "/ops/x/impl: message", "3:14: message" (syntax), "/: message" (a Parse or Manifest
  // error about the whole document, path ""), or "path: message" / "message" otherwise.
  std::string to_string() const;
};

using Errors = std::vector<Error>;

// Quoted names are cut to this many bytes (at a UTF-8 boundary) plus "…".
inline constexpr std::size_t kShownNameBytes = 80;

// `s` if it has at most `max` bytes, else its first `max` bytes (never splitting a UTF-8
// sequence) followed by "…". Reads at most `max` + 4 bytes of `s`.
std::string shortened(std::string_view s, std::size_t max = kShownNameBytes);

// `s` safe to print on a terminal: C0 controls, DEL and C1 controls become \n, \t, \r or
// \xNN; invisible format characters that reorder or hide text (bidi controls U+061C,
// U+200E-U+200F, U+202A-U+202E, U+2066-U+2069; U+2028/U+2029 line breaks; zero-width
// U+200B-U+200D, U+2060, U+FEFF) become \uXXXX; a byte that is not UTF-8 becomes \xNN;
// a backslash becomes \\. Everything else (printable ASCII and UTF-8) is unchanged.
std::string printable(std::string_view s);

// `e` with every pointer token and every `quoted` or 'quoted' span of its message cut to
// kShownNameBytes (a 1 MiB key must not make a 1 MiB message), the message to 2 KiB.
Error bounded(Error e);

// 1234567 -> "1,234,567" (counts in messages).
std::string with_commas(uint64_t n);

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
  // Violations found but not kept in `errors` because a per-document limit was reached
  // (verification keeps the first VerifyOptions::max_errors); 0 when `errors` is complete.
  uint64_t omitted = 0;

  static Result ok(T v) { Result r; r.value.emplace(std::move(v)); return r; }
  static Result fail(Error e) { Result r; r.errors.push_back(std::move(e)); return r; }
  static Result fail(Errors es) { Result r; r.errors = std::move(es); return r; }
  explicit operator bool() const { return value.has_value(); }
};

}  // namespace kernrt
