// Typed-parse rejections: one edit of the base manifest per test, asserting the JSON
// pointer and the message. Covers unknown keys at depth, missing fields, kind and range
// checks before conversion, param type strings, argument forms, launch forms and the
// schema-5-only keys a v4 reader refuses.
#include <string>

#include "kernrt/manifest/parse.hpp"
#include "test_core_util.hpp"

namespace {

using core_test::base;
using core_test::has_error;
using core_test::Json;
using kernrt::manifest::parse_manifest;

kernrt::Errors parse_errors(const Json& j) {
  auto r = parse_manifest(j.dump());
  return r.errors;
}

const char* kLaunch0 = "/ops/op/impl/launches/0";
const std::string kPack = std::string(kLaunch0) + "/args/2/pack";

TEST(ParseBase, BaseParsesWithEveryForm) {
  auto r = parse_manifest(base().dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  const auto& m = *r.value;
  const auto& l = m.ops.at("op").impl.launches;
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].pdl, std::optional<bool>(true));
  EXPECT_EQ(l[0].grid[0].kind, kernrt::manifest::Expr::Kind::CeilDiv);
  ASSERT_TRUE(l[0].args.has_value());
  const auto& pack = std::get<kernrt::manifest::Pack>(l[0].args->at(2));
  EXPECT_EQ(pack.size, 192u);
  ASSERT_EQ(pack.fields.size(), 10u);
  const auto& tm = std::get<kernrt::manifest::TensorMap>(pack.fields[0].source);
  EXPECT_EQ(tm.dims.back(), 0u);
  EXPECT_EQ(tm.oob_nan, std::optional<bool>(true));
  EXPECT_EQ(std::get<kernrt::manifest::LitI64>(pack.fields[6].source).v, -9000000000LL);
  EXPECT_TRUE(l[1].is_extern);
  EXPECT_FALSE(l[2].args.has_value());
  EXPECT_EQ(m.buffers.at("x").domain->min->kind, kernrt::manifest::Bound::Kind::Float);
  EXPECT_EQ(m.buffers.at("lo").domain->min->i, -7);
  EXPECT_EQ(m.programs.at("chunk").batch->rows.var, "tokens");
  EXPECT_EQ(m.programs.at("step").calls[0].label, std::optional<std::string>("first"));
  EXPECT_EQ(std::get<kernrt::manifest::LitU8>(m.programs.at("init").calls[0].args[3]).v, 255);
}

TEST(ParseRejects, UnknownKeyAtDepth) {
  auto j = base();
  core_test::set(j, kPack + "/fields/0/tensormap/interleave", 0);
  EXPECT_TRUE(has_error(parse_errors(j), kPack + "/fields/0/tensormap/interleave",
                        "unknown field `interleave`"));
}

TEST(ParseRejects, UnknownTopLevelKey) {
  auto j = base();
  j["protocol"] = Json::object();
  EXPECT_TRUE(has_error(parse_errors(j), "/protocol",
                        "unknown field `protocol`, expected one of `schema_version`, `model`, `constants`"));
  auto v = base();
  core_test::set(v, "/vars/tokens/min", 1);
  EXPECT_TRUE(has_error(parse_errors(v), "/vars/tokens/min", "unknown field `min`, expected `max`"));
}

TEST(ParseRejects, MissingRequiredField) {
  auto j = base();
  core_test::erase(j, "/buffers/x/kind");
  EXPECT_TRUE(has_error(parse_errors(j), "/buffers/x", "missing field `kind`"));
  auto k = base();
  core_test::erase(k, "/programs");
  EXPECT_TRUE(has_error(parse_errors(k), "", "missing field `programs`"));
}

TEST(ParseRejects, RootMustBeAnObject) {
  auto r = parse_manifest("[1, 2]");
  EXPECT_TRUE(has_error(r.errors, "", "expected a manifest object, found an array"));
}

struct BadParam {
  const char* text;
  const char* message;
};

class ParamTypeStrings : public ::testing::TestWithParam<BadParam> {};

TEST_P(ParamTypeStrings, RejectedWithKernMessage) {
  auto j = base();
  core_test::set(j, "/ops/op/params/4", GetParam().text);
  EXPECT_TRUE(has_error(parse_errors(j), "/ops/op/params/4", GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Kern, ParamTypeStrings,
    ::testing::Values(BadParam{"u32", "invalid param type `u32`"},
                      BadParam{"tensormap", "invalid param type `tensormap`"},
                      BadParam{"inn buffer<bf16>", "invalid direction `inn` in param type `inn buffer<bf16>`"},
                      BadParam{"in buffer<bf17>", "unknown dtype `bf17` in param type `in buffer<bf17>`"},
                      BadParam{"in buffer<fp8e8m0>", "unknown dtype `fp8e8m0` in param type"},
                      BadParam{"bytes<0>", "invalid byte count in param type `bytes<0>`"},
                      BadParam{"bytes<x>", "invalid byte count in param type `bytes<x>`"},
                      BadParam{"bytes<99999999999>", "invalid byte count"},
                      BadParam{"in buffer", "invalid param type `in buffer`"},
                      BadParam{"ptr", "invalid param type `ptr`"},
                      BadParam{"", "invalid param type ``"}));

TEST(ParamTypeStrings, TrimsAndCanonicalises) {
  std::string err;
  auto p = kernrt::manifest::parse_param_type("  inout   buffer<fp8e4m3> ", &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->to_string(), "inout buffer<fp8e4m3>");
  EXPECT_EQ(p->size_bytes(), 8u);
  auto b = kernrt::manifest::parse_param_type("bytes<1280>", &err);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->size_bytes(), 1280u);
  EXPECT_EQ(kernrt::manifest::parse_param_type("u8", &err)->size_bytes(), 1u);
}

struct BadNumber {
  const char* pointer;
  const char* json;
  const char* needle;
};

class NumberRanges : public ::testing::TestWithParam<BadNumber> {};

TEST_P(NumberRanges, CheckedBeforeConversion) {
  auto j = base();
  std::string text = j.dump();
  // Splice the raw number text so values like 2^64 reach the parser unchanged.
  core_test::set(j, GetParam().pointer, "@@SPLICE@@");
  text = j.dump();
  std::string marker = "\"@@SPLICE@@\"";
  text.replace(text.find(marker), marker.size(), GetParam().json);
  auto r = parse_manifest(text);
  EXPECT_TRUE(has_error(r.errors, GetParam().pointer, GetParam().needle));
}

INSTANTIATE_TEST_SUITE_P(
    Ints, NumberRanges,
    ::testing::Values(
        BadNumber{"/ops/op/impl/launches/0/block/0", "-5", "expected u32 (0..4294967295), found -5"},
        BadNumber{"/ops/op/impl/launches/0/block/0", "3.7", "expected u32 (0..4294967295), found 3.7"},
        BadNumber{"/ops/op/impl/launches/0/block/0", "4294967296", "found 4294967296"},
        BadNumber{"/ops/op/impl/launches/0/block/0", "\"x\"", "expected u32 (0..4294967295), found string \"x\""},
        BadNumber{"/vars/tokens/max", "18446744073709551616", "expected u64"},
        BadNumber{"/vars/tokens/max", "-1", "expected u64 (0..18446744073709551615), found -1"},
        BadNumber{"/vars/tokens/max", "1.0", "found 1.0"},
        BadNumber{"/vars/tokens/max", "true", "found true"},
        BadNumber{"/programs/init/calls/0/args/0/i32", "2147483648", "expected i32 (-2147483648..2147483647)"},
        BadNumber{"/programs/init/calls/0/args/0/i32", "-2147483649", "expected i32"},
        BadNumber{"/programs/init/calls/0/args/1/i64", "9223372036854775808", "expected i64"},
        BadNumber{"/programs/init/calls/0/args/3/u8", "256", "expected u8 (0..255), found 256"},
        BadNumber{"/programs/init/calls/0/args/2/f32", "1e39", "out of f32 range"},
        BadNumber{"/programs/init/calls/0/args/2/f32", "\"half\"", "expected a number"},
        BadNumber{"/programs/step/calls/0/args/1/offset", "-16", "expected u64"},
        BadNumber{"/schema_version", "\"4\"", "expected u32"},
        BadNumber{"/schema_version", "4294967296", "expected u32"},
        BadNumber{"/ops/op/impl/launches/0/grid/0/ceil_div/1", "-4", "expected u64"},
        BadNumber{"/buffers/x/shape/1", "-128", "expected u64 (0..18446744073709551615), found -128"},
        BadNumber{"/buffers/x/shape/1", "12.5", "found 12.5"}));

TEST(ParseNumbers, NegativeZeroIsZero) {
  std::string text = base().dump();
  std::string needle = "\"max\":64";
  text.replace(text.find(needle), needle.size(), "\"max\":-0");
  auto r = parse_manifest(text);
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  EXPECT_EQ(r.value->vars.at("tokens").max, 0u);
}

TEST(ParseRejects, WrongJsonKinds) {
  auto j = base();
  core_test::set(j, "/buffers/x/shape", "tokens");
  EXPECT_TRUE(has_error(parse_errors(j), "/buffers/x/shape", "expected an array of extents, found string"));
  auto k = base();
  core_test::set(k, "/buffers/y/export", "yes");
  EXPECT_TRUE(has_error(parse_errors(k), "/buffers/y/export", "expected a boolean"));
  auto v = base();
  core_test::set(v, "/vars", Json::array());
  EXPECT_TRUE(has_error(parse_errors(v), "/vars", "expected an object of vars, found an array"));
}

TEST(ParseRejects, CallArgMatchingNoForm) {
  auto j = base();
  core_test::set(j, "/programs/step/calls/0/args/0", Json{{"buf", "x"}, {"state", "kv"}});
  EXPECT_TRUE(has_error(parse_errors(j), "/programs/step/calls/0/args/0",
                        "data did not match any variant of call argument: found `buf`, `state`"));
  auto k = base();
  core_test::set(k, "/programs/step/calls/0/args/0", Json::object());
  EXPECT_TRUE(has_error(parse_errors(k), "/programs/step/calls/0/args/0", "found no keys"));
  auto s = base();
  core_test::set(s, "/programs/step/calls/0/args/0", "x");
  EXPECT_TRUE(has_error(parse_errors(s), "/programs/step/calls/0/args/0",
                        "expected call argument object"));
}

TEST(ParseRejects, MistypedCallOffsetIsUnknownField) {
  auto j = base();
  core_test::set(j, "/programs/step/calls/0/args/1", Json{{"buf", "idx"}, {"offest", 16}});
  EXPECT_TRUE(has_error(parse_errors(j), "/programs/step/calls/0/args/1/offest", "unknown field `offest`"));
}

TEST(ParseRejects, LaunchArgForms) {
  auto j = base();
  core_test::set(j, std::string(kLaunch0) + "/args/1", Json{{"scratch", "tmp"}, {"offset", 0}});
  EXPECT_TRUE(has_error(parse_errors(j), std::string(kLaunch0) + "/args/1/offset", "unknown field `offset`"));
  auto k = base();
  core_test::set(k, std::string(kLaunch0) + "/args/3", Json{{"var", "tokens"}});
  EXPECT_TRUE(has_error(parse_errors(k), std::string(kLaunch0) + "/args/3",
                        "data did not match any variant of launch arg: found `var`"));
  auto f = base();
  core_test::set(f, kPack + "/fields/1", Json{{"at", 128}, {"var", "tokens"}, {"i32", 1}});
  EXPECT_TRUE(has_error(parse_errors(f), kPack + "/fields/1", "pack field source: found `at`, `i32`, `var`"));
}

TEST(ParseRejects, ExternLaunchWithGeometry) {
  for (const char* key : {"block", "grid", "shared_mem", "cluster", "pdl"}) {
    auto j = base();
    Json v = std::string(key) == "pdl" ? Json(true) : std::string(key) == "shared_mem" ? Json(0) : Json{1, 1, 1};
    core_test::set(j, std::string("/ops/op/impl/launches/1/") + key, v);
    EXPECT_TRUE(has_error(parse_errors(j), std::string("/ops/op/impl/launches/1/") + key,
                          std::string("launch geometry `") + key + "` without a `module`"));
  }
}

TEST(ParseRejects, KernelLaunchNeedsGeometry) {
  auto j = base();
  core_test::erase(j, "/ops/op/impl/launches/2/grid");
  EXPECT_TRUE(has_error(parse_errors(j), "/ops/op/impl/launches/2", "missing field `grid`"));
  auto k = base();
  core_test::set(k, "/ops/op/impl/launches/2/grid", Json{1, 1});
  EXPECT_TRUE(has_error(parse_errors(k), "/ops/op/impl/launches/2/grid", "expected 3 grid expressions"));
}

TEST(ParseRejects, ModuleLessNonExternParsesForTheVerifier) {
  auto j = base();
  core_test::set(j, "/ops/op/impl/launches/1/entry", "gemm");
  auto r = parse_manifest(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  const auto& l = r.value->ops.at("op").impl.launches[1];
  EXPECT_FALSE(l.is_extern);
  EXPECT_FALSE(l.module.has_value());
}

TEST(ParseRejects, MalformedExpressions) {
  auto j = base();
  core_test::set(j, std::string(kLaunch0) + "/grid/0", Json{{"ceil_div", {"tokens", 4, 1}}});
  EXPECT_TRUE(has_error(parse_errors(j), std::string(kLaunch0) + "/grid/0/ceil_div", "expected 2 operands"));
  auto k = base();
  core_test::set(k, std::string(kLaunch0) + "/grid/0", Json{{"ceil_div", {"tokens", 4}}, {"mul", {"tokens", 4}}});
  EXPECT_TRUE(has_error(parse_errors(k), std::string(kLaunch0) + "/grid/0", "variant of expression"));
  auto n = base();
  core_test::set(n, std::string(kLaunch0) + "/grid/0", nullptr);
  EXPECT_TRUE(has_error(parse_errors(n), std::string(kLaunch0) + "/grid/0", "expected an expression"));
}

struct V5Key {
  const char* pointer;
  Json value;
  const char* needle;
};

TEST(ParseRejects, SchemaFiveFormsAreUnknownToV4) {
  const V5Key cases[] = {
      {"/buffers/lo/bind", Json::array(), "unknown field `bind`"},
      {"/buffers/lo/placement", "host", "unknown field `placement`"},
      {"/programs/step/graph", true, "unknown field `graph`"},
      {"/programs/step/batch/context", "tokens", "unknown field `context`"},
      {"/topology/replicated_rows", 4, "unknown field `replicated_rows`"},
      {"/buffers/x/fill", "valid", "unknown fill `valid`"},
      {"/buffers/x/dtype", "i8", "unknown dtype `i8`"},
      {"/ops/op/impl/launches/0/when", Json::object(), "unknown field `when`"},
      {"/ops/op/impl/launches/0/grid/1", Json{{"add", {"tokens", 1}}}, "unknown field `add`"},
      {"/states/kv/align", 256, "unknown field `align`"},
  };
  for (const auto& c : cases) {
    auto j = base();
    core_test::set(j, c.pointer, c.value);
    auto errors = parse_errors(j);
    ASSERT_EQ(errors.size(), 1u) << c.pointer;
    EXPECT_NE(errors[0].message.find(c.needle), std::string::npos) << errors[0].to_string();
    EXPECT_EQ(errors[0].path.rfind(std::string(c.pointer).substr(0, 8), 0), 0u) << errors[0].path;
  }
}

TEST(ParseRejects, TensormapDtypeAndBufferKind) {
  auto j = base();
  core_test::set(j, kPack + "/fields/0/tensormap/dtype", "tf32");
  EXPECT_TRUE(has_error(parse_errors(j), kPack + "/fields/0/tensormap/dtype", "unknown tensormap dtype `tf32`"));
  auto k = base();
  core_test::set(k, "/buffers/x/kind", "scratch");
  EXPECT_TRUE(has_error(parse_errors(k), "/buffers/x/kind", "unknown buffer kind `scratch`"));
}

TEST(ParseRejects, DomainBoundKinds) {
  auto j = base();
  core_test::set(j, "/buffers/x/domain/min", true);
  EXPECT_TRUE(has_error(parse_errors(j), "/buffers/x/domain/min", "expected a bound"));
  auto big = base();
  std::string text = big.dump();
  std::string needle = "\"min\":-7";
  text.replace(text.find(needle), needle.size(), "\"min\":18446744073709551615");
  auto r = parse_manifest(text);
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  const auto& b = *r.value->buffers.at("lo").domain->min;
  EXPECT_EQ(b.kind, kernrt::manifest::Bound::Kind::Expr);
  EXPECT_EQ(b.expr.value, 18446744073709551615ull);
}

}  // namespace
