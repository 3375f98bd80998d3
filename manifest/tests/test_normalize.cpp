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
const std::string kShaC = std::string(64, 'd');

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
                          launch("hf:acme/fastkern/build/sm90/fk.cubin@v2", kShaC, "fk")});
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
  EXPECT_EQ(mods.at("fastkern").sha256, kShaC);
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
  j["modules"]["mine"] = Json{{"source", "elsewhere.cubin"}, {"sha256", kShaA}};
  j["modules"]["fastkern"] = Json{{"source", "x.cubin"}, {"sha256", kShaB}};
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  const auto& l = m.value->ops.at("scale").impl.launches;
  EXPECT_EQ(l[0].module, std::optional<std::string>("mine"));      // by hash, whatever the name
  EXPECT_EQ(l[2].module, std::optional<std::string>("fastkern"));  // kShaB is already there
  EXPECT_EQ(l[3].module, std::optional<std::string>("fastkern-dddddddd"));  // name taken, other hash
  EXPECT_EQ(m.value->modules.size(), 3u);
}

TEST(Normalize, ModuleNamesFollowKern) {
  Json j = generated();
  Json& l = j["ops"]["scale"]["impl"]["launches"];
  l = Json::array({launch("dump/argmax-0123456789ab.cubin", kShaA, "a"),
                   launch("lib/fused.sm90a.so", kShaB, "b"),
                   launch("hf:acme/kernels/x.cubin@main", kShaC, "c")});
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  EXPECT_EQ(m.value->modules.count("argmax"), 1u);
  EXPECT_EQ(m.value->modules.count("fused.sm90a"), 1u);
  EXPECT_EQ(m.value->modules.count("kernels"), 1u);
}

TEST(Normalize, FoldsUniformLiteralScalarsIntoLaunches) {
  Json j = Json::parse(core_test::corpus("kern/minimal.json"));
  // Interface: 3 buffers, state, i32. Add an f32 that every call passes as 0.5 and give
  // the launch a pack that reads both scalars and a tensormap over param 2.
  j["ops"]["scale"]["params"].push_back("f32");
  Json& l = j["ops"]["scale"]["impl"]["launches"][0];
  l["params"] = {"in buffer<bf16>", "bytes<256>", "f32"};
  l["args"] = Json::parse(R"([{"param": 0},
    {"pack": {"size": 256, "fields": [
      {"at": 0, "tensormap": {"param": 2, "dtype": "bf16", "dims": [64, 8], "strides": [128], "box": [64, 8]}},
      {"at": 128, "param": 4, "width": 4},
      {"at": 136, "param": 5}]}},
    {"param": 5}])");
  Json& calls = j["programs"]["step"]["calls"];
  calls[0]["args"].push_back({{"f32", 0.5}});
  Json second = calls[0];
  second["args"][4] = {{"i32", 7}};
  calls.push_back(second);
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m) << core_test::errors_text(m.errors);
  const auto& op = m.value->ops.at("scale");
  ASSERT_EQ(op.params.size(), 5u);  // the f32 left, the i32 (7 vs var) stayed
  EXPECT_EQ(op.params[4].to_string(), "i32");
  const auto& launch0 = op.impl.launches[0];
  ASSERT_TRUE(launch0.params.has_value());
  EXPECT_EQ(launch0.params->size(), 3u);  // the ABI is unchanged
  EXPECT_DOUBLE_EQ(std::get<kernrt::manifest::LitF32>(launch0.args->at(2)).v, 0.5);
  const auto& pack = std::get<kernrt::manifest::Pack>(launch0.args->at(1));
  EXPECT_EQ(std::get<kernrt::manifest::TensorMap>(pack.fields[0].source).param, 2u);
  EXPECT_EQ(std::get<kernrt::manifest::ParamRef>(pack.fields[1].source).index, 4u);
  EXPECT_EQ(pack.fields[1].width, std::optional<uint32_t>(4));
  EXPECT_DOUBLE_EQ(std::get<kernrt::manifest::LitF32>(pack.fields[2].source).v, 0.5);
  for (const auto& c : m.value->programs.at("step").calls) EXPECT_EQ(c.args.size(), 5u);
  auto again = normalize(*r.value);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again.value, *r.value);
}

TEST(Normalize, FoldShiftsLaterParamIndices) {
  Json j = Json::parse(core_test::corpus("kern/minimal.json"));
  // Put the uniform literal first so every later index moves down by one.
  j["ops"]["scale"]["params"] = {"i32", "in buffer<bf16>", "in buffer<bf16>", "out buffer<bf16>", "inout state"};
  Json& args = j["programs"]["step"]["calls"][0]["args"];
  args = Json::array({{{"i32", 3}}, {{"buf", "x"}}, {{"buf", "w"}}, {{"buf", "y"}}, {{"state", "kv"}}});
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  const auto& op = m.value->ops.at("scale");
  ASSERT_EQ(op.params.size(), 4u);
  const auto& l = op.impl.launches[0];
  ASSERT_TRUE(l.args.has_value());
  EXPECT_EQ(std::get<kernrt::manifest::LitI32>(l.args->at(0)).v, 3);
  EXPECT_EQ(std::get<kernrt::manifest::ParamRef>(l.args->at(1)).index, 0u);
  EXPECT_EQ(std::get<kernrt::manifest::ParamRef>(l.args->at(4)).index, 3u);
}

TEST(Normalize, ParserPointsGeneratorFormToNormalize) {
  auto r = parse_manifest(generated().dump());
  EXPECT_TRUE(core_test::has_error(r.errors, "/ops/scale/impl/launches/0/cubin",
                                   "inline `cubin` is the generator form of a launch; normalize hoists it"));
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
  l.push_back(Json{{"module", "toy"}, {"entry", "extern:cublaslt_bf16_tn"}, {"block", {1, 1, 1}}, {"grid", {1, 1, 1}}, {"shared_mem", 0},
                   {"args", Json::array({{{"param", 1}}, {{"param", 0}}, {{"param", 2}}, {{"param", 3}}, {{"param", 4}}})}});
  auto r = normalize(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  auto m = parse_manifest(*r.value);
  ASSERT_TRUE(m);
  const auto& out = m.value->ops.at("scale").impl.launches;
  EXPECT_FALSE(out[0].params.has_value());
  EXPECT_FALSE(out[0].args.has_value());
  EXPECT_TRUE(out[1].is_extern);  // its `module` was dropped with the geometry
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
