// Var validation and compiled expressions: every var a program reads must be given and
// in [1, max]; unread vars become 1 whatever the caller passed; expressions evaluate with
// checked arithmetic over dense indices.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "slots.hpp"

namespace kernrt {
namespace {

struct Vars : ::testing::Test {
  rt::VarTable table;
  void SetUp() override {
    manifest::Manifest m;
    m.vars["seqs"] = manifest::Var{4};
    m.vars["tokens"] = manifest::Var{8};
    m.vars["x"] = manifest::Var{8};
    table = rt::VarTable::from(m);
  }
};

TEST_F(Vars, DenseOrderIsManifestOrder) {
  EXPECT_EQ(table.names, (std::vector<std::string>{"seqs", "tokens", "x"}));
  EXPECT_EQ(*table.find("x"), 2u);
  EXPECT_FALSE(table.find("y"));
}

TEST_F(Vars, RejectsValueAboveMax) {
  uint64_t dense[3];
  auto e = rt::dense_vars(table, {false, false, true}, "p", {{"x", 9}}, dense);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, ErrorKind::Caller);
  EXPECT_EQ(e->path, "/vars/x");
  EXPECT_EQ(e->message, "var `x` = 9 is outside declared [1, 8]");
}

TEST_F(Vars, RejectsZero) {
  uint64_t dense[3];
  auto e = rt::dense_vars(table, {true, false, false}, "p", {{"seqs", 0}}, dense);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "var `seqs` = 0 is outside declared [1, 4]");
}

TEST_F(Vars, RejectsMissingReadVar) {
  uint64_t dense[3];
  auto e = rt::dense_vars(table, {false, true, false}, "decode", {{"seqs", 2}}, dense);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "/vars/tokens");
  EXPECT_EQ(e->message, "var `tokens` not provided: program `decode` reads it");
}

TEST_F(Vars, UnreadVarsBecomeOneAndUnknownNamesAreIgnored) {
  uint64_t dense[3] = {7, 7, 7};
  auto e = rt::dense_vars(table, {false, true, false}, "p",
                          {{"seqs", 99}, {"tokens", 8}, {"nope", 3}}, dense);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(dense[0], 1u);  // out of range but unread: ignored, set to 1
  EXPECT_EQ(dense[1], 8u);
  EXPECT_EQ(dense[2], 1u);
}

TEST_F(Vars, CompiledExpressionsEvaluateOverDenseIndices) {
  using manifest::Expr;
  std::string why;
  auto e = rt::CompiledExpr::compile(Expr::mul(Expr::ceil_div(Expr::variable("tokens"), 3), 5),
                                     table, &why);
  ASSERT_TRUE(e) << why;
  uint64_t dense[3] = {1, 7, 1};
  uint64_t v = 0;
  ASSERT_TRUE(e->eval(dense, &v));
  EXPECT_EQ(v, 15u);  // ceil(7/3) * 5
  std::vector<bool> reads(3, false);
  e->mark_reads(&reads);
  EXPECT_EQ(reads, (std::vector<bool>{false, true, false}));

  auto big = rt::CompiledExpr::compile(Expr::mul(Expr::variable("x"), UINT64_MAX / 2), table, &why);
  ASSERT_TRUE(big);
  dense[2] = 3;
  EXPECT_FALSE(big->eval(dense, &v));  // overflow is reported, not wrapped

  EXPECT_FALSE(rt::CompiledExpr::compile(Expr::variable("nope"), table, &why));
  EXPECT_EQ(why, "unknown var `nope`");
}

TEST_F(Vars, ConstantExpressionsFoldAtLoad) {
  std::string why;
  auto c = rt::CompiledExpr::compile(manifest::Expr::ceil_div(manifest::Expr::constant(10), 4),
                                     table, &why);
  ASSERT_TRUE(c);
  auto v = rt::Value::of(*c);
  EXPECT_FALSE(v.dynamic);
  EXPECT_EQ(v.constant, 3u);
}

}  // namespace
}  // namespace kernrt
