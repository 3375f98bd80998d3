// The verifier: every rule of reference/kern-schema.md §2.2, collecting every violation.
//
// `Verified` is the only type the runtime accepts: holding one means the manifest passed
// all 24 rules. Every expression is evaluated with checked u64 arithmetic at the var
// bounds: an overflow is a violation naming the expression, never a skipped check, and a
// value that cannot fit where it goes (a scalar param, a pack field's width, a domain's
// dtype) is refused here rather than truncated or refused at load. What the verifier
// cannot prove (param sizes vs the cubin, pointer alignment, tensormaps spanning a state
// whose size depends on the capacity) is checked by the runtime at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

// Bounds on what one document can cost the caller. The verifier still applies every rule
// (its time stays linear in the input); it keeps the first `max_errors` violations and
// counts the rest in Result::omitted.
struct VerifyOptions {
  std::size_t max_errors = 100;
};

class Verified;
Result<Verified> verify(Manifest m, const VerifyOptions& options = {});

class Verified {
 public:
  const Manifest& manifest() const { return manifest_; }

 private:
  explicit Verified(Manifest m) : manifest_(std::move(m)) {}
  Manifest manifest_;
  friend Result<Verified> verify(Manifest m, const VerifyOptions& options);
};

// verify(m, options), declared above: all rules; on failure the violations (each with its
// JSON pointer and message), the first options.max_errors of them, the rest counted.

// Parse, then verify. A parse error is the single error.
Result<Verified> verify_json(std::string_view text, const VerifyOptions& options = {});

// A `modules` + `ops` fragment, with every rule that needs no buffers, states or
// programs (launch forms, limits, wiring, packs, tensormaps, modules). Vars named by
// the fragment's expressions are taken from `vars` (a fragment declares none).
// At most options.max_errors errors; the number left out goes to `*omitted` when given.
Errors verify_fragment(const Fragment& f, const std::map<std::string, Var>& vars,
                       const VerifyOptions& options = {}, uint64_t* omitted = nullptr);

// Rule 9 alone over a `modules` table (sha256 spelling, sources, registry references):
// what a fetcher must know before it trusts a module entry.
Errors verify_modules(const std::map<std::string, Module>& modules);

}  // namespace kernrt::manifest
