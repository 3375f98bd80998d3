// Checked arithmetic wherever the verifier evaluates (issue 16, item 1): every expression
// and footprint that wraps u64 at the var maxima is refused at its JSON pointer with the
// expression named, and a value that cannot fit where it goes (a pack field's width, a
// domain's dtype, a TMA limit) is refused here instead of at load. Before this, each of
// these manifests verified. One edit of the base manifest per test, pointer + message.
#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

const char* const kCallMix = "/programs/step/calls/1";
constexpr uint64_t k2p60 = uint64_t{1} << 60;

Json with(const std::string& pointer, const char* json) {
  return edited([&](Json& j) { set(j, pointer, Json::parse(json)); });
}

TEST(VerifyArith, RejectsTensormapFootprintThatWrapsU64) {
  // (2^32 - 1) * (2^40 - 16) is about 2^72: every dim and stride is inside the TMA limits.
  expect_error(with(at(kMixPack, "/fields/0/tensormap"),
                    R"({"param": 0, "dtype": "bf16", "dims": [128, 4294967296],
                        "strides": [1099511627760], "box": [64, 16], "swizzle": 128})"),
               at(kMixPack, "/fields/0/tensormap"),
               "footprint overflows u64: ceil(dims[0] * 16 bits / 8) + sum of (dims[d] - 1) * "
               "strides[d - 1] with dims [128, 4294967296] and strides [1099511627760]");
}

TEST(VerifyArith, RejectsSharedMemThatOverflows) {
  expect_error(with(at(kMixLaunch, "/shared_mem"), R"({"mul": ["tokens", 1152921504606846976]})"),
               at(kMixLaunch, "/shared_mem"),
               "shared_mem: {\"mul\": [\"tokens\", 1152921504606846976]} overflows u64 at var "
               "upper bounds (tokens = 64)");
}

TEST(VerifyArith, RejectsGridThatOverflowsNamingIt) {
  expect_error(with(at(kMixLaunch, "/grid/1"), R"({"mul": [{"ceil_div": ["tokens", 2]}, 1152921504606846976]})"),
               at(kMixLaunch, "/grid/1"),
               "grid.y: {\"mul\": [{\"ceil_div\": [\"tokens\", 2]}, 1152921504606846976]} overflows "
               "u64 at var upper bounds (tokens = 64)");
}

TEST(VerifyArith, RejectsCallExprThatOverflows) {
  expect_error(with(at(kCallMix, "/args/3/expr"), R"({"mul": ["tokens", 1152921504606846976]})"),
               at(kCallMix, "/args/3"),
               "expression: {\"mul\": [\"tokens\", 1152921504606846976]} overflows u64 at var "
               "upper bounds (tokens = 64)");
}

TEST(VerifyArith, RejectsPackExprThatOverflows) {
  expect_error(with(at(kMixPack, "/fields/2"), R"({"at": 136, "expr": {"mul": ["tokens", 1152921504606846976]}})"),
               at(kMixPack, "/fields/2/expr"),
               "field #2 expr: {\"mul\": [\"tokens\", 1152921504606846976]} overflows u64 at var "
               "upper bounds (tokens = 64)");
}

TEST(VerifyArith, RejectsPackExprBeyondItsFieldWidth) {
  // 64 * 33554432 = 2^31: one more than a 4-byte (i32) field holds.
  expect_error(with(at(kMixPack, "/fields/2"), R"({"at": 136, "expr": {"mul": ["tokens", 33554432]}})"),
               at(kMixPack, "/fields/2"),
               "field #2: expression {\"mul\": [\"tokens\", 33554432]} reaches 2147483648 at var "
               "upper bounds (tokens = 64), exceeding the i32 range of its 4-byte field "
               "(max 2147483647)");
}

TEST(VerifyArith, AcceptsPackExprAtItsFieldLimit) {
  // 64 * 33554431 = 2147483584 <= 2^31 - 1; an 8-byte field holds 2^31 too.
  expect_verified(with(at(kMixPack, "/fields/2"), R"({"at": 136, "expr": {"mul": ["tokens", 33554431]}})"));
  expect_verified(with(at(kMixPack, "/fields/2"),
                       R"({"at": 136, "width": 8, "expr": {"mul": ["tokens", 33554432]}})"));
}

TEST(VerifyArith, RejectsPackVarBeyondItsFieldWidth) {
  Json j = with(at(kMixPack, "/fields/2"), R"({"at": 136, "width": 1, "var": "tokens"})");
  set(j, "/vars/tokens/max", 256);
  expect_error(j, at(kMixPack, "/fields/2"),
               "field #2: var `tokens` max 256, exceeding the u8 range of its 1-byte field (max 255)");
}

TEST(VerifyArith, RejectsValueFieldWiderThanEightBytes) {
  expect_error(with(at(kMixPack, "/fields/2"), R"({"at": 136, "width": 16, "var": "tokens"})"),
               at(kMixPack, "/fields/2/width"),
               "field #2: width 16, but a value field is 1 to 8 bytes wide");
}

TEST(VerifyArith, RejectsLiteralNarrowerThanItsValue) {
  expect_error(with(at(kMixPack, "/fields/2"), R"({"at": 136, "width": 2, "i32": 70000})"),
               at(kMixPack, "/fields/2"), "field #2: literal 70000 does not fit 2 bytes (-32768..65535)");
  expect_error(with(at(kMixPack, "/fields/2"), R"({"at": 136, "width": 2, "f32": 1.5})"),
               at(kMixPack, "/fields/2/width"), "field #2: an f32 literal needs 4 bytes, not 2");
  expect_verified(with(at(kMixPack, "/fields/2"), R"({"at": 136, "width": 2, "i64": -32768})"));
}

TEST(VerifyArith, RejectsDomainBoundThatOverflows) {
  expect_error(with("/buffers/ids/domain/max", R"({"mul": ["tokens", 1152921504606846976]})"),
               "/buffers/ids/domain/max",
               "domain max: {\"mul\": [\"tokens\", 1152921504606846976]} overflows u64 at var upper "
               "bounds (tokens = 64)");
}

TEST(VerifyArith, RejectsDomainBoundOutsideItsDtype) {
  // 64 * 2^30 = 2^36: no i32 element can be compared with that bound.
  expect_error(with("/buffers/ids/domain/max", R"({"mul": ["tokens", 1073741824]})"),
               "/buffers/ids/domain/max",
               "domain max {\"mul\": [\"tokens\", 1073741824]} reaches 68719476736 at var upper "
               "bounds (tokens = 64), which is outside the i32 range (-2147483648..2147483647)");
  expect_error(with("/buffers/ids/domain/min", "-2147483649"), "/buffers/ids/domain/min",
               "domain min -2147483649 is outside the i32 range (-2147483648..2147483647)");
}

TEST(VerifyArith, RejectsShapeOverflowNamingTheShape) {
  expect_error(with("/buffers/hidden/shape", R"(["tokens", 4611686018427387904])"),
               "/buffers/hidden/shape",
               "byte size overflows u64 at var upper bounds: shape [\"tokens\", 4611686018427387904] "
               "of bf16 (2 bytes)");
}

TEST(VerifyArith, RejectsTmaDimsAndStridesBeyondTheDriverLimits) {
  expect_error(with(at(kMixPack, "/fields/0/tensormap/dims"), "[128, 4294967297]"),
               at(kMixPack, "/fields/0/tensormap/dims/1"),
               "dims[1] = 4294967297 exceeds the TMA limit of 2^32 elements");
  expect_error(with(at(kMixPack, "/fields/0/tensormap/strides"), "[1099511627776]"),
               at(kMixPack, "/fields/0/tensormap/strides/0"),
               "strides[0] = 1099511627776 bytes is not below the TMA limit of 2^40");
}

TEST(VerifyArith, RejectsSpanningTensormapWhoseInnerDimsDoNotFit) {
  // `hidden` is 64 x 128 bf16 = 16,384 bytes; the inner dims need 256 + 99 * 256 bytes.
  expect_error(with(at(kMixPack, "/fields/0/tensormap"),
                    R"({"param": 0, "dtype": "bf16", "dims": [128, 100, 0],
                        "strides": [256, 25600], "box": [64, 16, 1], "swizzle": 128})"),
               at(kCallMix, "/args/0"),
               "the spanning tensormap at " + at(kMixPack, "/fields/0") +
                   " needs 25600 bytes for its inner dims but buffer `hidden` has 16384 bytes");
}

TEST(VerifyArith, RejectsSpanningTensormapBeyondTheTmaExtent) {
  // 2^29 tokens x 256 bytes = 2^37 bytes in rows of 16 bytes: 2^33 rows, above 2^32.
  Json j = with(at(kMixPack, "/fields/0/tensormap"),
                R"({"param": 0, "dtype": "bf16", "dims": [8, 0], "strides": [16], "box": [8, 16]})");
  set(j, "/vars/tokens/max", 536870912);
  expect_error(j, at(kCallMix, "/args/0"),
               "the spanning tensormap at " + at(kMixPack, "/fields/0") +
                   " would span 8589934592 rows of buffer `hidden`, more than the TMA limit of 2^32");
}

TEST(VerifyArith, RejectsACallOffsetThatMisalignsATensormapBase) {
  // Allocations are 256-byte aligned, so the offset alone decides the base: TMA needs 16.
  expect_error(with(at(kCallMix, "/args/0"), R"({"buf": "hidden", "offset": 8})"),
               at(kCallMix, "/args/0/offset"),
               "offset 8 into buffer `hidden` is not 16-byte aligned, but the tensormap at " +
                   at(kMixPack, "/fields/0") + " needs an aligned base (TMA)");
  Json aligned = with(at(kMixPack, "/fields/0/tensormap/dims"), "[128, 32]");  // 8 KiB of 16
  set(aligned, at(kCallMix, "/args/0"), Json::parse(R"({"buf": "hidden", "offset": 256})"));
  expect_verified(aligned);
  Json j = with(at(kMixPack, "/fields/0/tensormap/param"), "1");  // over the state
  set(j, at(kCallMix, "/args/1"), Json::parse(R"({"state": "cache", "offset": 520})"));
  expect_error(j, at(kCallMix, "/args/1/offset"),
               "offset 520 into state `cache` is not 16-byte aligned, but the tensormap at");
}

TEST(VerifyArith, RejectsAnOffsetPastAFixedSizeState) {
  // The runtime refuses this at load; a fixed `bytes` state is not scaled, so the manifest
  // alone proves it. Offsets into states the runtime scales stay unchecked (the spec's
  // provider layout), the end itself is a valid (empty) view.
  Json j = with("/states/cache", R"({"bytes": 4096})");
  set(j, at(kCallMix, "/args/1"), Json::parse(R"({"state": "cache", "offset": 18446744073709551600})"));
  expect_error(j, at(kCallMix, "/args/1/offset"),
               "offset 18446744073709551600 is outside state `cache` (a fixed 4096 bytes)");
  set(j, at(kCallMix, "/args/1/offset"), 4096);
  expect_verified(j);
  expect_verified(with(at(kCallMix, "/args/1"), R"({"state": "cache", "offset": 18446744073709551600})"));
}

}  // namespace
}  // namespace kernrt::manifest::testing
