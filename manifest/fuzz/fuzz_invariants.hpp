// What both fuzz entries (fuzz_manifest.cpp, fuzz_verify.cpp) do when an invariant breaks:
// print what broke (its detail cut to 4 KiB) and abort, so libFuzzer keeps the input; and
// the invariant they share, that a failed result carries at least one error.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kernrt::fuzz {

[[noreturn]] inline void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n%s\n", what, detail.substr(0, 4096).c_str());
  std::abort();
}

template <class R>
void require_errors(const R& r, const char* what) {
  if (!r && r.errors.empty()) broken(what, "failed without an error");
}

}  // namespace kernrt::fuzz
