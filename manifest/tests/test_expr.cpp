// Expression evaluation (§1.15): checked u64 arithmetic, unknown vars, division by
// zero, overflow; var assignments at the bounds; var collection; byte sizes.
#include <limits>

#include <gtest/gtest.h>

#include "kernrt/manifest/expr.hpp"

namespace {

using kernrt::manifest::DType;
using kernrt::manifest::Expr;
using namespace kernrt::manifest;

const std::map<std::string, uint64_t> kVars = {{"tokens", 100}, {"seqs", 3}, {"huge", 1ull << 62}};

std::optional<uint64_t> eval(const Expr& e, std::string* err) { return evaluate(e, lookup_in(kVars), err); }

TEST(Expr, EvaluatesEveryForm) {
  std::string err;
  EXPECT_EQ(eval(Expr::constant(7), &err), std::optional<uint64_t>(7));
  EXPECT_EQ(eval(Expr::variable("tokens"), &err), std::optional<uint64_t>(100));
  EXPECT_EQ(eval(Expr::ceil_div(Expr::variable("tokens"), 64), &err), std::optional<uint64_t>(2));
  EXPECT_EQ(eval(Expr::ceil_div(Expr::variable("tokens"), 50), &err), std::optional<uint64_t>(2));
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(0), 8), &err), std::optional<uint64_t>(0));
  EXPECT_EQ(eval(Expr::mul(Expr::ceil_div(Expr::variable("seqs"), 2), 32), &err), std::optional<uint64_t>(64));
  uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(eval(Expr::ceil_div(Expr::constant(max), 2), &err), std::optional<uint64_t>(max / 2 + 1));
}

TEST(Expr, UnknownVar) {
  std::string err;
  EXPECT_FALSE(eval(Expr::mul(Expr::variable("nope"), 2), &err));
  EXPECT_EQ(err, "unknown var `nope`");
}

TEST(Expr, DivisionByZero) {
  std::string err;
  EXPECT_FALSE(eval(Expr::ceil_div(Expr::variable("tokens"), 0), &err));
  EXPECT_EQ(err, "division by zero");
}

TEST(Expr, OverflowIsAnError) {
  std::string err;
  EXPECT_FALSE(eval(Expr::mul(Expr::variable("huge"), 4), &err));
  EXPECT_EQ(err, "overflows u64");
  err.clear();
  EXPECT_EQ(eval(Expr::mul(Expr::variable("huge"), 3), &err), std::optional<uint64_t>(3ull << 62));
}

TEST(Expr, VarsAtBounds) {
  Manifest m;
  m.vars["a"].max = 8;
  m.vars["b"].max = 1024;
  auto hi = vars_at_max(m);
  auto lo = vars_at_min(m);
  EXPECT_EQ(hi.at("a"), 8u);
  EXPECT_EQ(hi.at("b"), 1024u);
  EXPECT_EQ(lo.at("a"), 1u);
  EXPECT_EQ(lo.at("b"), 1u);
  std::string err;
  EXPECT_EQ(evaluate(Expr::variable("b"), lookup_in(hi), &err), std::optional<uint64_t>(1024));
}

TEST(Expr, CollectsVarsThroughNesting) {
  std::vector<std::string> vars;
  collect_vars(Expr::mul(Expr::ceil_div(Expr::variable("tokens"), 4), 2), &vars);
  collect_vars(Expr::constant(3), &vars);
  collect_vars(Expr::variable("seqs"), &vars);
  EXPECT_EQ(vars, (std::vector<std::string>{"tokens", "seqs"}));
}

TEST(Expr, ByteSize) {
  std::string err;
  auto n = byte_size({Expr::variable("tokens"), Expr::constant(64)}, DType::bf16, lookup_in(kVars), &err);
  EXPECT_EQ(n, std::optional<uint64_t>(100 * 64 * 2));
  EXPECT_FALSE(byte_size({Expr::variable("huge"), Expr::constant(8)}, DType::f32, lookup_in(kVars), &err));
  EXPECT_EQ(err, "byte size overflows u64");
  EXPECT_FALSE(byte_size({Expr::variable("x")}, DType::u8, lookup_in(kVars), &err));
  EXPECT_EQ(err, "unknown var `x`");
}

TEST(Expr, Equality) {
  EXPECT_EQ(Expr::mul(Expr::variable("a"), 2), Expr::mul(Expr::variable("a"), 2));
  EXPECT_FALSE(Expr::mul(Expr::variable("a"), 2) == Expr::ceil_div(Expr::variable("a"), 2));
  EXPECT_FALSE(Expr::mul(Expr::variable("a"), 2) == Expr::mul(Expr::variable("b"), 2));
  EXPECT_FALSE(Expr::constant(1) == Expr::variable("1"));
}

TEST(DTypes, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::u64), 8u);
  EXPECT_EQ(dtype_size(DType::fp8e4m3), 1u);
  EXPECT_TRUE(dtype_is_float(DType::fp8e4m3));
  EXPECT_FALSE(dtype_is_float(DType::u32));
  EXPECT_EQ(parse_dtype("i64"), std::optional<DType>(DType::i64));
  EXPECT_FALSE(parse_dtype("i8"));
  EXPECT_EQ(tma_dtype_bits(TmaDType::u4), 4u);
  EXPECT_EQ(tma_dtype_bits(TmaDType::bf16), 16u);
  EXPECT_FALSE(parse_tma_dtype("tf32"));
  EXPECT_TRUE(fill_is_input(Fill::blocks));
  EXPECT_FALSE(fill_is_input(Fill::count));
}

}  // namespace

namespace {

// vars_read_by: what a run of a program needs (call var/expr args, grids, shared_mem, pack
// var/expr fields of the ops it calls), and not buffer shapes.
TEST(VarsReadBy, CollectsWhatARunEvaluates) {
  Manifest m;
  m.vars = {{"rows", Var{8}}, {"seqs", Var{4}}, {"cap", Var{2}}, {"unused", Var{1}}};
  Buffer b;
  b.shape = {Expr::variable("cap")};
  m.buffers["buf"] = b;
  Op op;
  Launch l;
  l.grid = {Expr::ceil_div(Expr::variable("rows"), 4), Expr::constant(1), Expr::constant(1)};
  Pack pack;
  pack.fields.push_back(PackField{0, std::nullopt, VarRef{"seqs"}});
  l.args = std::vector<LaunchArg>{pack};
  op.impl.launches.push_back(l);
  m.ops["o"] = op;
  Program p;
  p.calls.push_back(Call{std::nullopt, "o", {BufArg{"buf", std::nullopt}}});
  m.programs["p"] = p;
  EXPECT_EQ(vars_read_by(m, "p"), (std::set<std::string>{"rows", "seqs"}));
  EXPECT_TRUE(vars_read_by(m, "nope").empty());
}

}  // namespace
