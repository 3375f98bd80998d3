// The canonical writer: parse -> write -> parse -> write is byte-identical for every
// corpus manifest, the seed fragments, the seed call and the all-forms base; the layout
// is the seed's (one-space indent); defaulted fields stay out; names come out sorted.
#include <string>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/writer.hpp"
#include "test_core_util.hpp"

namespace {

using core_test::corpus;
using namespace kernrt::manifest;

std::string manifest_once(const std::string& text) {
  auto r = parse_manifest(text);
  EXPECT_TRUE(r) << core_test::errors_text(r.errors);
  return r ? write_manifest(*r.value) : std::string();
}

class ManifestRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(ManifestRoundTrip, SecondWriteIsByteIdentical) {
  std::string first = manifest_once(corpus(GetParam()));
  ASSERT_FALSE(first.empty());
  std::string second = manifest_once(first);
  EXPECT_EQ(first, second);
}

INSTANTIATE_TEST_SUITE_P(Kern, ManifestRoundTrip,
                         ::testing::Values("kern/minimal.json", "kern/plain.json", "kern/tray.json",
                                           "kern/k3-moe-l1-ep1.json", "kern/k3-moe-l1-ep4.json"));

class FragmentRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(FragmentRoundTrip, SecondWriteIsByteIdentical) {
  auto a = parse_fragment(corpus(GetParam()));
  ASSERT_TRUE(a) << core_test::errors_text(a.errors);
  std::string first = write_fragment(*a.value);
  auto b = parse_fragment(first);
  ASSERT_TRUE(b) << core_test::errors_text(b.errors);
  EXPECT_EQ(first, write_fragment(*b.value));
}

INSTANTIATE_TEST_SUITE_P(Seed, FragmentRoundTrip,
                         ::testing::Values("seed/decode-ops.json", "seed/prefill-ops.json"));

TEST(WriterRoundTrip, SeedCallIsReproducedExactly) {
  std::string text = corpus("seed/call-binding-example.json");
  auto c = parse_call(text);
  ASSERT_TRUE(c) << core_test::errors_text(c.errors);
  EXPECT_EQ(c.value->label, std::optional<std::string>("full_attn_slot_1.decode"));
  ASSERT_EQ(c.value->args.size(), 9u);
  EXPECT_EQ(std::get<StateArg>(c.value->args[3]).offset, std::optional<uint64_t>(262656));
  // The seed is json.dumps(indent=1) with keys already in canonical order.
  std::string out = write_call(*c.value);
  EXPECT_EQ(out, text.back() == '\n' ? text : text + "\n");
}

TEST(WriterRoundTrip, BaseWithEveryFormIsStable) {
  std::string first = manifest_once(core_test::kBase);
  std::string second = manifest_once(first);
  EXPECT_EQ(first, second);
  // Every form survives: compare the typed reparse field by field on a few spots.
  auto r = parse_manifest(first);
  ASSERT_TRUE(r);
  const auto& l = r.value->ops.at("op").impl.launches;
  EXPECT_EQ(l[0].cluster, (std::optional<std::array<uint32_t, 3>>{{1, 1, 1}}));
  EXPECT_EQ(l[0].shared_mem, std::optional<Expr>(Expr::constant(1024)));
  const auto& pack = std::get<Pack>(l[0].args->at(2));
  EXPECT_EQ(pack.fields[1].width, std::optional<uint32_t>(4));
  EXPECT_DOUBLE_EQ(std::get<LitF32>(pack.fields[4].source).v, 0.5);
  EXPECT_EQ(std::get<TensorMap>(pack.fields[0].source).l2_promotion, std::optional<uint32_t>(256));
  EXPECT_EQ(r.value->buffers.at("peers").group, std::optional<std::string>("ep"));
  EXPECT_EQ(r.value->programs.at("init").once, std::optional<bool>(true));
  EXPECT_EQ(r.value->states.at("flag").bytes, 8u);
}

TEST(Writer, SeedLayoutAndCanonicalKeyOrder) {
  std::string out = manifest_once(corpus("kern/minimal.json"));
  EXPECT_EQ(out.rfind("{\n \"schema_version\": 4,\n \"model\": \"toy\",\n \"vars\": {\n  \"tokens\": {\n   \"max\": 1024\n", 0), 0u)
      << out.substr(0, 200);
  EXPECT_EQ(out.back(), '\n');
  // Sorted names: buffers w, x, y in that order.
  EXPECT_LT(out.find("\"w\": {"), out.find("\"x\": {"));
  EXPECT_LT(out.find("\"x\": {"), out.find("\"y\": {"));
  // Launch keys in wire order.
  EXPECT_LT(out.find("\"module\": \"toy\""), out.find("\"entry\": \"scale_rows\""));
  EXPECT_LT(out.find("\"entry\": \"scale_rows\""), out.find("\"block\": ["));
  EXPECT_LT(out.find("\"block\": ["), out.find("\"grid\": ["));
}

TEST(Writer, LeavesOutDefaultsAndAbsentOptionals) {
  std::string out = manifest_once(corpus("kern/minimal.json"));
  for (const char* absent : {"\"fill\"", "\"domain\"", "\"export\"", "\"topology\"", "\"params\": [\n       \"",
                             "\"args\": [\n       {\n        \"param\"", "\"scratch\"", "\"pdl\"", "\"cluster\"",
                             "\"shared_mem\"", "\"bytes\":", "\"bytes_per_seq\"", "\"batch\"", "\"once\"", "\"label\""}) {
    EXPECT_EQ(out.find(absent), std::string::npos) << absent;
  }
  auto empty = parse_manifest(R"({"schema_version": 4, "model": "m", "vars": {}, "states": {},
    "buffers": {}, "modules": {}, "ops": {}, "programs": {}})");
  ASSERT_TRUE(empty);
  EXPECT_EQ(write_manifest(*empty.value),
            "{\n \"schema_version\": 4,\n \"model\": \"m\",\n \"buffers\": {},\n \"modules\": {},\n"
            " \"ops\": {},\n \"programs\": {}\n}\n");
}

TEST(Writer, ExternLaunchHasNoGeometry) {
  std::string out = manifest_once(corpus("kern/plain.json"));
  EXPECT_NE(out.find("\"entry\": \"extern:x\""), std::string::npos);
  EXPECT_EQ(out.find("\"block\""), std::string::npos);
  EXPECT_EQ(out.find("\"grid\""), std::string::npos);
}

TEST(Writer, NegativeAndFloatLiteralsKeepTheirKind) {
  std::string first = manifest_once(core_test::kBase);
  EXPECT_NE(first.find("\"i32\": -3"), std::string::npos);
  EXPECT_NE(first.find("\"i64\": -9000000000"), std::string::npos);
  EXPECT_NE(first.find("\"f32\": 1.25"), std::string::npos);
  EXPECT_NE(first.find("\"min\": -1.5"), std::string::npos);
  EXPECT_NE(first.find("\"min\": -7"), std::string::npos);
  // An integral f32 literal is written as a float and read back as one.
  auto j = core_test::base();
  core_test::set(j, "/programs/init/calls/0/args/2/f32", 2);
  std::string out = manifest_once(j.dump());
  EXPECT_NE(out.find("\"f32\": 2.0"), std::string::npos);
  EXPECT_EQ(out, manifest_once(out));
}

}  // namespace
