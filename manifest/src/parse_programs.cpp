// Typed parsing of programs (§1.14): batch {groups, rows: u64 | var, span?}, once, and
// calls with their argument forms ({buf|state, offset?}, {var}, {expr}, literals,
// {rank}). Deliberately unchecked here: op existence, arity, binding and dataflow
// (verifier rules 19-24).
#include "parse_internal.hpp"

namespace kernrt::manifest::detail {

namespace {

constexpr const char* kCallArgForms =
    "{buf, offset?}, {state, offset?}, {var}, {expr}, {i32}, {i64}, {f32}, {u8}, {rank}";

Batch parse_batch(const Node& n) {
  n.expect_object("a batch");
  n.allow_keys({"groups", "rows", "span"});
  Batch b;
  b.groups = n.at("groups").u64();
  Node rows = n.at("rows").substituted();
  if (rows.is_number()) {
    b.rows = Expr::constant(rows.u64());
  } else if (rows.is_string()) {
    b.rows = Expr::variable(rows.str());
  } else {
    fail(rows.path(), "expected rows (a u64 or a var name), found " + describe(rows.json()));
  }
  if (auto v = n.get("span")) b.span = v->str();
  return b;
}

CallArg parse_call_arg(const Node& n) {
  std::string form = pick_form(n, {"buf", "state", "var", "expr", "i32", "i64", "f32", "u8", "rank"},
                               "call argument", kCallArgForms);
  if (form == "buf" || form == "state") {
    n.allow_keys({form.c_str(), "offset"});
  } else {
    n.allow_keys({form.c_str()});
  }
  Node v = n.at(form.c_str());
  std::optional<uint64_t> offset;
  if (auto o = n.get("offset")) offset = o->u64();
  if (form == "buf") return BufArg{v.str(), offset};
  if (form == "state") return StateArg{v.str(), offset};
  if (form == "var") return VarRef{v.str()};
  if (form == "expr") return parse_expr(v);
  if (form == "i32") return LitI32{v.i32()};
  if (form == "i64") return LitI64{v.i64()};
  if (form == "f32") return LitF32{v.f32()};
  if (form == "u8") return LitU8{v.u8()};
  return RankRef{v.str()};
}

}  // namespace

Call parse_call(const Node& n) {
  n.expect_object("a call");
  n.allow_keys({"label", "op", "args"});
  Call c;
  if (auto v = n.get("label")) c.label = v->str();
  c.op = n.at("op").str();
  for (const Node& a : n.at("args").items("call arguments")) c.args.push_back(parse_call_arg(a));
  return c;
}

Program parse_program(const Node& n) {
  n.expect_object("a program");
  n.allow_keys({"batch", "once", "calls"});
  Program p;
  if (auto v = n.get("batch")) p.batch = parse_batch(*v);
  if (auto v = n.get("once")) p.once = v->boolean();
  for (const Node& c : n.at("calls").items("calls")) {
    p.calls.push_back(parse_call(c));
    c.release();  // an unrolled model has most of its text in calls
  }
  return p;
}

}  // namespace kernrt::manifest::detail
