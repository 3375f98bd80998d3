// The verifier: every rule of reference/kern-schema.md §2.2, collecting every violation.
//
// `Verified` is the only type the runtime accepts: holding one means the manifest passed
// all 24 rules. What the verifier cannot prove (param sizes vs the cubin, pointer
// alignment, spanning tensormap extents) is checked by the runtime at load.
#pragma once

#include <string_view>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

class Verified {
 public:
  const Manifest& manifest() const { return manifest_; }

 private:
  explicit Verified(Manifest m) : manifest_(std::move(m)) {}
  Manifest manifest_;
  friend Result<Verified> verify(Manifest m);
};

// All rules; on failure every violation, each with its JSON pointer and message.
Result<Verified> verify(Manifest m);

// Parse, then verify. A parse error is the single error.
Result<Verified> verify_json(std::string_view text);

// A `modules` + `ops` fragment, with every rule that needs no buffers, states or
// programs (launch forms, limits, wiring, packs, tensormaps, modules). Vars named by
// the fragment's expressions are taken from `vars` (a fragment declares none).
Errors verify_fragment(const Fragment& f, const std::map<std::string, Var>& vars);

}  // namespace kernrt::manifest
