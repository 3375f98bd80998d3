// Late-v4 `constants` (§1.16): names resolve in numeric positions (including i32/f32
// literals, shapes, expression operands, domain bounds, offsets, batch rows); unknown
// names are errors only where a position is numeric-only; names conflicting with vars
// and a named schema_version are rejected; the writer emits resolved literals.
#include <string>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/writer.hpp"
#include "test_core_util.hpp"

namespace {

using core_test::base;
using core_test::has_error;
using core_test::Json;
using kernrt::manifest::Expr;
using kernrt::manifest::parse_manifest;

Json with_constants() {
  Json j = base();
  j["constants"] = Json{{"HIDDEN", 128}, {"MAXT", 64}, {"SCALE", 0.5}, {"NEG", -3}, {"PAGE", 16},
                        {"BIG", 9000000000LL}, {"ROWS", 1}};
  core_test::set(j, "/vars/tokens/max", "MAXT");
  core_test::set(j, "/buffers/x/shape/1", "HIDDEN");
  core_test::set(j, "/buffers/idx/domain/stride", "PAGE");
  core_test::set(j, "/buffers/lo/domain/min", "NEG");
  core_test::set(j, "/buffers/x/domain/min", "SCALE");
  core_test::set(j, "/ops/op/impl/launches/0/block/0", "HIDDEN");
  core_test::set(j, "/ops/op/impl/launches/0/grid/1", "PAGE");
  core_test::set(j, "/ops/op/impl/launches/0/grid/2/mul/1", "PAGE");
  core_test::set(j, "/ops/op/impl/launches/0/args/2/pack/fields/3/i32", "NEG");
  core_test::set(j, "/ops/op/impl/launches/0/args/2/pack/fields/6/i64", "BIG");
  core_test::set(j, "/ops/op/impl/launches/0/args/2/pack/fields/0/tensormap/dims/0", "HIDDEN");
  core_test::set(j, "/ops/op/impl/launches/0/args/4/f32", "SCALE");
  core_test::set(j, "/programs/step/calls/0/args/1/offset", "PAGE");
  core_test::set(j, "/programs/step/batch/rows", "ROWS");
  return j;
}

TEST(Constants, ResolveInEveryNumericPosition) {
  auto r = parse_manifest(with_constants().dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  const auto& m = *r.value;
  EXPECT_EQ(m.vars.at("tokens").max, 64u);
  EXPECT_EQ(m.buffers.at("x").shape[1], Expr::constant(128));
  EXPECT_EQ(m.buffers.at("idx").domain->stride, std::optional<uint64_t>(16));
  EXPECT_EQ(m.buffers.at("lo").domain->min->i, -3);
  EXPECT_EQ(m.buffers.at("x").domain->min->kind, kernrt::manifest::Bound::Kind::Float);
  EXPECT_DOUBLE_EQ(m.buffers.at("x").domain->min->f, 0.5);
  const auto& l = m.ops.at("op").impl.launches[0];
  EXPECT_EQ(l.block[0], 128u);
  EXPECT_EQ(l.grid[1], Expr::constant(16));
  EXPECT_EQ(l.grid[2], Expr::mul(Expr::variable("seqs"), 16));
  const auto& pack = std::get<kernrt::manifest::Pack>(l.args->at(2));
  EXPECT_EQ(std::get<kernrt::manifest::LitI32>(pack.fields[3].source).v, -3);
  EXPECT_EQ(std::get<kernrt::manifest::LitI64>(pack.fields[6].source).v, 9000000000LL);
  EXPECT_EQ(std::get<kernrt::manifest::TensorMap>(pack.fields[0].source).dims[0], 128u);
  EXPECT_DOUBLE_EQ(std::get<kernrt::manifest::LitF32>(l.args->at(4)).v, 0.5);
  EXPECT_EQ(std::get<kernrt::manifest::BufArg>(m.programs.at("step").calls[0].args[1]).offset,
            std::optional<uint64_t>(16));
  EXPECT_EQ(m.programs.at("step").batch->rows, Expr::constant(1));
}

TEST(Constants, DoNotSurviveWriting) {
  auto r = parse_manifest(with_constants().dump());
  ASSERT_TRUE(r);
  std::string out = kernrt::manifest::write_manifest(*r.value);
  EXPECT_EQ(out.find("constants"), std::string::npos);
  EXPECT_EQ(out.find("HIDDEN"), std::string::npos);
  EXPECT_NE(out.find("\"max\": 64"), std::string::npos);
}

TEST(Constants, UndefinedNameInNumericOnlyPosition) {
  auto j = with_constants();
  core_test::set(j, "/ops/op/impl/launches/0/block/1", "WIDTH");
  auto r = parse_manifest(j.dump());
  EXPECT_TRUE(has_error(r.errors, "/ops/op/impl/launches/0/block/1", "undefined constant `WIDTH`"));
  auto k = with_constants();
  core_test::set(k, "/programs/init/calls/0/args/0/i32", "NOPE");
  EXPECT_TRUE(has_error(parse_manifest(k.dump()).errors, "/programs/init/calls/0/args/0/i32",
                        "undefined constant `NOPE`"));
  auto o = with_constants();
  core_test::set(o, "/ops/op/impl/launches/0/grid/0/ceil_div/1", "Q");
  EXPECT_TRUE(has_error(parse_manifest(o.dump()).errors, "/ops/op/impl/launches/0/grid/0/ceil_div/1",
                        "undefined constant `Q`"));
}

TEST(Constants, UnknownNameStaysAVarWhereStringsAreAllowed) {
  auto j = with_constants();
  core_test::set(j, "/buffers/x/shape/1", "width");
  core_test::set(j, "/ops/op/impl/launches/0/grid/1", "width");
  core_test::set(j, "/buffers/lo/domain/max", "width");
  core_test::set(j, "/programs/chunk/batch/rows", "width");
  auto r = parse_manifest(j.dump());
  ASSERT_TRUE(r) << core_test::errors_text(r.errors);
  EXPECT_EQ(r.value->buffers.at("x").shape[1], Expr::variable("width"));
  EXPECT_EQ(r.value->ops.at("op").impl.launches[0].grid[1], Expr::variable("width"));
  EXPECT_EQ(r.value->buffers.at("lo").domain->max->expr, Expr::variable("width"));
  EXPECT_EQ(r.value->programs.at("chunk").batch->rows, Expr::variable("width"));
}

TEST(Constants, ConflictWithVar) {
  auto j = with_constants();
  j["constants"]["tokens"] = 5;
  EXPECT_TRUE(has_error(parse_manifest(j.dump()).errors, "/constants/tokens",
                        "constant `tokens` conflicts with a var"));
}

TEST(Constants, SchemaVersionIsNeverSubstituted) {
  auto j = with_constants();
  j["constants"]["V"] = 4;
  j["schema_version"] = "V";
  EXPECT_TRUE(has_error(parse_manifest(j.dump()).errors, "/schema_version", "expected u32"));
}

TEST(Constants, ValuesMustBeNumbersWithNames) {
  auto j = with_constants();
  j["constants"]["S"] = "x";
  EXPECT_TRUE(has_error(parse_manifest(j.dump()).errors, "/constants/S", "constant `S` must be a number"));
  auto e = with_constants();
  e["constants"][""] = 1;
  EXPECT_TRUE(has_error(parse_manifest(e.dump()).errors, "/constants/", "non-empty name"));
  auto t = with_constants();
  t["constants"] = Json::array();
  EXPECT_TRUE(has_error(parse_manifest(t.dump()).errors, "/constants", "expected an object"));
}

TEST(Constants, WidthAndSignStillChecked) {
  auto j = with_constants();
  core_test::set(j, "/ops/op/impl/launches/0/block/1", "SCALE");
  EXPECT_TRUE(has_error(parse_manifest(j.dump()).errors, "/ops/op/impl/launches/0/block/1",
                        "expected u32 (0..4294967295), found 0.5"));
  auto k = with_constants();
  core_test::set(k, "/ops/op/impl/launches/0/block/1", "BIG");
  EXPECT_TRUE(has_error(parse_manifest(k.dump()).errors, "/ops/op/impl/launches/0/block/1",
                        "found 9000000000"));
  auto n = with_constants();
  core_test::set(n, "/vars/seqs/max", "NEG");
  EXPECT_TRUE(has_error(parse_manifest(n.dump()).errors, "/vars/seqs/max", "found -3"));
}

TEST(Constants, WithoutATableNamesAreTypeErrors) {
  auto j = base();
  core_test::set(j, "/ops/op/impl/launches/0/block/1", "WIDTH");
  EXPECT_TRUE(has_error(parse_manifest(j.dump()).errors, "/ops/op/impl/launches/0/block/1",
                        "expected u32 (0..4294967295), found string \"WIDTH\""));
}

}  // namespace
