// The lean fuzz entry for the verifier (issue 16's 10 M-execution run): any bytes go
// through parse_manifest -> verify -> check_protocol and parse_fragment -> verify_fragment,
// nothing else (fuzz_manifest.cpp adds the writer, calls and normalize at about a quarter
// of the speed). Besides "never crash" under ASan + UBSan it checks the bounds the
// verifier promises and aborts when one breaks: a failure carries at least one error; at
// most VerifyOptions::max_errors errors are kept; no error's pointer or message is longer
// than a few kilobytes (names are shortened); the text form of every error holds no
// control character (printable).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_invariants.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/protocol.hpp"
#include "kernrt/manifest/verify.hpp"

namespace {

using kernrt::fuzz::broken;
using kernrt::fuzz::require_errors;

void check_errors(const kernrt::Errors& errors, size_t limit, const char* what) {
  if (errors.size() > limit) broken(what, "more errors kept than the limit");
  for (const kernrt::Error& e : errors) {
    if (e.path.size() > 4096 || e.message.size() > 4096) broken(what, "an error longer than 4 KiB");
    for (unsigned char c : e.to_string()) {
      if (c < 0x20 || c == 0x7F) broken(what, "a control character in an error's text");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernrt::manifest;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  VerifyOptions o;
  o.max_errors = 8;  // small, so the limit itself is exercised

  auto m = parse_manifest(text);
  require_errors(m, "parse_manifest");
  check_errors(m.errors, 1, "parse_manifest");
  if (m) {
    auto v = verify(std::move(*m.value), o);
    require_errors(v, "verify");
    check_errors(v.errors, o.max_errors, "verify");
    if (v) {
      auto p = check_protocol(*v.value, o.max_errors);
      require_errors(p, "check_protocol");
      check_errors(p.errors, o.max_errors, "check_protocol");
    }
  }

  auto f = parse_fragment(text);
  require_errors(f, "parse_fragment");
  if (f) {
    uint64_t omitted = 0;
    const kernrt::Errors errs = verify_fragment(*f.value, {}, o, &omitted);
    check_errors(errs, o.max_errors, "verify_fragment");
    if (omitted != 0 && errs.size() != o.max_errors) broken("verify_fragment", "omitted below the limit");
  }
  return 0;
}
