// normalize (§1.7): inline `cubin`/`sha256` launch artifacts hoisted into `modules`
// (file stem or hf repo name; same hash reuses; `-<sha8>` on a collision), extern
// geometry dropped, identity params/args defaulted, canonical output, idempotence.
#include <string>

#include "kernrt/manifest/normalize.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/writer.hpp"
#include "test_core_util.hpp"

namespace {

using core_test::Json;
using kernrt::manifest::normalize;
using kernrt::manifest::parse_fragment;
using kernrt::manifest::parse_manifest;

const std::string kShaA = std::string(64, 'a');
const std::string kShaB = "bbbbbbbb" + std::string(56, 'c');

Json launch(const std::string& cubin, const std::string& sha, const std::string& entry) {
  return Json{{"cubin", cubin}, {"sha256", sha}, {"entry", entry}, {"block", {32, 1, 1}}, {"grid", {1, 1, 1}}};
}

Json generated() {
  Json j = Json::parse(core_test::corpus("kern/minimal.json"));
  j["modules"] = Json::object();
  Json& launches = j["ops"]["scale"]["impl"]["launches"];
  launches = Json::array({launch("out/kernels/toy.cubin", kShaA, "scale_rows"),
                          launch("other/toy.cubin", kShaA, "scale_cols"),
                          launch("toy.cubin", kShaB, "scale_more"),
                          launch("hf:acme/fastkern/build/sm90/fk.cubin@v2", kShaB, "fk")});
  return j;
}

TEST(Normalize, HoistsInlineArtifacts) {
  auto r = normalize(generated().dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m) << core_test::errors_text(m.errors);
  const auto& mods = m.value->modules;
  ASSERT_EQ(mods.size(), 3u);
  EXPECT_EQ(mods.at("toy").sha256, kShaA);
  EXPECT_EQ(mods.at("toy").source, "out/kernels/toy.cubin");
  EXPECT_EQ(mods.at("toy-bbbbbbbb").sha256, kShaB);
  EXPECT_EQ(mods.at("fastkern").source, "hf:acme/fastkern/build/sm90/fk.cubin@v2");
  const auto& l = m.value->ops.at("scale").impl.launches;
  EXPECT_EQ(l[0].module, std::optional<std::string>("toy"));
  EXPECT_EQ(l[1].module, std::optional<std::string>("toy"));  // same hash reuses the entry
  EXPECT_EQ(l[2].module, std::optional<std::string>("toy-bbbbbbbb"));
  EXPECT_EQ(l[3].module, std::optional<std::string>("fastkern"));
  EXPECT_EQ(r.value->find("\"cubin\""), std::string::npos);
}

TEST(Normalize, ReusesAnExistingModuleWithTheSameHash) {
  Json j = generated();
  j["modules"]["toy"] = Json{{"source", "toy.cubin"}, {"sha256", kShaA}};
  j["modules"]["fastkern"] = Json{{"source", "x.cubin"}, {"sha256", kShaA}};
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  EXPECT_EQ(m.value->modules.at("toy").source, "toy.cubin");
  EXPECT_EQ(m.value->modules.at("fastkern-bbbbbbbb").sha256, kShaB);
  EXPECT_EQ(m.value->ops.at("scale").impl.launches[3].module, std::optional<std::string>("fastkern-bbbbbbbb"));
}

TEST(Normalize, IsIdempotentAndCanonical) {
  auto once = normalize(generated().dump());
  ASSERT_TRUE(once);
  auto twice = normalize(*once.value);
  ASSERT_TRUE(twice);
  EXPECT_EQ(*once.value, *twice.value);
  auto m = parse_manifest(*once.value);
  ASSERT_TRUE(m);
  EXPECT_EQ(*once.value, kernrt::manifest::write_manifest(*m.value));
}

TEST(Normalize, DropsExternGeometryAndIdentityWiring) {
  Json j = Json::parse(core_test::corpus("kern/minimal.json"));
  Json& l = j["ops"]["scale"]["impl"]["launches"];
  l[0]["params"] = j["ops"]["scale"]["params"];
  l[0]["args"] = Json::array({{{"param", 0}}, {{"param", 1}}, {{"param", 2}}, {{"param", 3}}, {{"param", 4}}});
  l.push_back(Json{{"entry", "extern:cublaslt_bf16_tn"}, {"block", {1, 1, 1}}, {"grid", {1, 1, 1}}, {"shared_mem", 0},
                   {"args", Json::array({{{"param", 1}}, {{"param", 0}}, {{"param", 2}}, {{"param", 3}}, {{"param", 4}}})}});
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  const auto& out = m.value->ops.at("scale").impl.launches;
  EXPECT_FALSE(out[0].params.has_value());
  EXPECT_FALSE(out[0].args.has_value());
  EXPECT_TRUE(out[1].is_extern);
  ASSERT_TRUE(out[1].args.has_value());  // not in order: kept
  EXPECT_EQ(r.value->find("\"shared_mem\""), std::string::npos);
}

TEST(Normalize, FragmentStaysAFragment) {
  auto r = normalize(core_test::corpus("seed/decode-ops.json"));
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto f = parse_fragment(*r.value);
  ASSERT_TRUE(f) << core_test::errors_text(f.errors);
  EXPECT_EQ(f.value->modules.size(), 1u);
  EXPECT_EQ(*r.value, kernrt::manifest::write_fragment(*f.value));
}

TEST(Normalize, RejectsHalfOrDoubleDeclarations) {
  Json j = generated();
  j["ops"]["scale"]["impl"]["launches"][1].erase("sha256");
  auto r = normalize(j.dump());
  EXPECT_TRUE(core_test::has_error(r.errors, "/ops/scale/impl/launches/1", "needs both `cubin` and `sha256`"));
  Json k = generated();
  k["ops"]["scale"]["impl"]["launches"][2]["module"] = "toy";
  auto r2 = normalize(k.dump());
  EXPECT_TRUE(core_test::has_error(r2.errors, "/ops/scale/impl/launches/2/module", "both `module` and an inline `cubin`"));
  auto r3 = normalize("{\"ops\": ");
  ASSERT_FALSE(r3);
  EXPECT_GE(r3.errors[0].line, 1u);
}

}  // namespace
