// Strict parsing of schema-v4 text into the typed model (reference/kern-schema.md §1, §2.1).
//
// Contract: unknown keys anywhere and duplicate keys in any object are errors (the
// default JSON DOM would keep the last duplicate silently); `constants` are expanded
// before typed parsing (§1.16) and do not survive; numbers are range-checked before
// conversion (no -5 -> 4294967291, no 3.7 -> 3). A parse failure is a single error with an
// RFC 6901 path and, for syntax errors, line:column. Bad input of any kind (binary junk,
// truncation, deep nesting, 1e400, invalid UTF-8, NUL bytes, empty text) is an error,
// never a crash. Parsing does not check `schema_version` or any verifier rule.
#pragma once

#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

Result<Manifest> parse_manifest(std::string_view text);
// The same, taking the text: it is freed as soon as the DOM is built, so the peak memory
// of a large manifest is the DOM (shrinking as it is converted), not text + DOM + model.
Result<Manifest> parse_manifest_owned(std::string&& text);

// A merge fragment: an object with exactly `modules` and `ops`.
Result<Fragment> parse_fragment(std::string_view text);

// One call object (as in the seed's call-binding example), without constants.
Result<Call> parse_call(std::string_view text);

}  // namespace kernrt::manifest
