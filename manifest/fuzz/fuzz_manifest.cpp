// The fuzz entry for the manifest library: any bytes go through parse_manifest (then
// verify and the serving-protocol check), parse_fragment (then verify_fragment),
// parse_call and normalize. Besides "never crash", it checks invariants and aborts
// when one breaks: a failure carries at least one error; a parsed document written
// canonically reparses and writes byte-identically; normalize is idempotent.
// Built with libFuzzer (KERNRT_FUZZ=ON, clang) or linked into the plain replay driver.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_invariants.hpp"
#include "kernrt/manifest/normalize.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/protocol.hpp"
#include "kernrt/manifest/verify.hpp"
#include "kernrt/manifest/writer.hpp"

using kernrt::fuzz::broken;
using kernrt::fuzz::require_errors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernrt::manifest;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto m = parse_manifest(text);
  require_errors(m, "parse_manifest");
  if (m) {
    std::string once = write_manifest(*m.value);
    auto again = parse_manifest(once);
    if (!again) broken("written manifest does not reparse", once + "\n" + again.errors[0].to_string());
    if (write_manifest(*again.value) != once) broken("manifest round trip is not stable", once);
    auto v = verify(std::move(*m.value));
    require_errors(v, "verify");
    if (v) {
      auto p = check_protocol(*v.value);
      require_errors(p, "check_protocol");
    }
  }

  auto f = parse_fragment(text);
  require_errors(f, "parse_fragment");
  if (f) {
    std::string once = write_fragment(*f.value);
    auto again = parse_fragment(once);
    if (!again) broken("written fragment does not reparse", once + "\n" + again.errors[0].to_string());
    if (write_fragment(*again.value) != once) broken("fragment round trip is not stable", once);
    (void)verify_fragment(*f.value, {});
  }

  auto c = parse_call(text);
  require_errors(c, "parse_call");
  if (c) {
    std::string once = write_call(*c.value);
    auto again = parse_call(once);
    if (!again || write_call(*again.value) != once) broken("call round trip is not stable", once);
  }

  auto n = normalize(text);
  require_errors(n, "normalize");
  if (n) {
    auto twice = normalize(*n.value);
    if (!twice) broken("normalized text does not normalize", *n.value + "\n" + twice.errors[0].to_string());
    if (*twice.value != *n.value) broken("normalize is not idempotent", *n.value);
  }
  return 0;
}
