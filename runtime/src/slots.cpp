// Dense vars and compiled expressions (see slots.hpp). The postfix form has a stack
// depth of one value per nesting level; a fixed 32-deep stack covers any expression a
// manifest writer produces, and deeper ones are compiled but refused at evaluation.
#include "slots.hpp"

#include <cstring>

namespace kernrt::rt {

VarTable VarTable::from(const manifest::Manifest& m) {
  VarTable t;
  for (const auto& [name, var] : m.vars) {
    t.index[name] = static_cast<uint32_t>(t.names.size());
    t.names.push_back(name);
    t.max.push_back(var.max);
  }
  return t;
}

std::optional<uint32_t> VarTable::find(const std::string& name) const {
  auto it = index.find(name);
  if (it == index.end()) return std::nullopt;
  return it->second;
}

std::optional<Error> dense_vars(const VarTable& table, const std::vector<bool>& reads,
                                const std::string& program,
                                const std::map<std::string, uint64_t>& vars, uint64_t* dense) {
  for (size_t i = 0; i < table.names.size(); ++i) {
    if (i >= reads.size() || !reads[i]) {
      dense[i] = 1;
      continue;
    }
    const std::string& name = table.names[i];
    auto v = vars.find(name);
    if (v == vars.end()) {
      return Error{ErrorKind::Caller, json_pointer_append("/vars", name),
                   "var `" + name + "` not provided: program `" + program + "` reads it"};
    }
    if (v->second < 1 || v->second > table.max[i]) {
      return Error{ErrorKind::Caller, json_pointer_append("/vars", name),
                   "var `" + name + "` = " + std::to_string(v->second) +
                       " is outside declared [1, " + std::to_string(table.max[i]) + "]"};
    }
    dense[i] = v->second;
  }
  return std::nullopt;
}

namespace {

bool append(const manifest::Expr& e, const VarTable& vars, std::string* error,
            std::vector<uint64_t>* ops, std::vector<uint64_t>* vals) {
  using K = manifest::Expr::Kind;
  switch (e.kind) {
    case K::Const:
      ops->push_back(0); vals->push_back(e.value); return true;
    case K::Var: {
      auto i = vars.find(e.var);
      if (!i) { *error = "unknown var `" + e.var + "`"; return false; }
      ops->push_back(1); vals->push_back(*i); return true;
    }
    case K::CeilDiv:
    case K::Mul:
      if (!e.lhs) { *error = "expression without operand"; return false; }
      if (!append(*e.lhs, vars, error, ops, vals)) return false;
      ops->push_back(e.kind == K::CeilDiv ? 2 : 3); vals->push_back(e.value);
      return true;
  }
  *error = "unknown expression kind";
  return false;
}

}  // namespace

std::optional<CompiledExpr> CompiledExpr::compile(const manifest::Expr& e, const VarTable& vars,
                                                  std::string* error) {
  std::vector<uint64_t> ops, vals;
  if (!append(e, vars, error, &ops, &vals)) return std::nullopt;
  CompiledExpr c;
  for (size_t i = 0; i < ops.size(); ++i) {
    Node n;
    n.op = static_cast<Node::Op>(ops[i]);
    n.value = vals[i];
    c.nodes_.push_back(n);
  }
  return c;
}

CompiledExpr CompiledExpr::constant(uint64_t v) {
  CompiledExpr c;
  c.nodes_.push_back(Node{Node::Op::Const, v});
  return c;
}

bool CompiledExpr::eval(const uint64_t* dense, uint64_t* out) const {
  constexpr size_t kDepth = 32;
  uint64_t stack[kDepth];
  size_t top = 0;
  for (const Node& n : nodes_) {
    switch (n.op) {
      case Node::Op::Const:
      case Node::Op::Var:
        if (top == kDepth) return false;
        stack[top++] = n.op == Node::Op::Const ? n.value : dense[n.value];
        break;
      case Node::Op::CeilDiv: {
        if (top == 0 || n.value == 0) return false;
        uint64_t a = stack[top - 1];
        stack[top - 1] = a / n.value + (a % n.value != 0 ? 1 : 0);
        break;
      }
      case Node::Op::Mul: {
        if (top == 0) return false;
        uint64_t r = 0;
        if (__builtin_mul_overflow(stack[top - 1], n.value, &r)) return false;
        stack[top - 1] = r;
        break;
      }
    }
  }
  if (top != 1) return false;
  *out = stack[0];
  return true;
}

bool CompiledExpr::is_constant() const {
  for (const Node& n : nodes_) {
    if (n.op == Node::Op::Var) return false;
  }
  return true;
}

void CompiledExpr::mark_reads(std::vector<bool>* reads) const {
  for (const Node& n : nodes_) {
    if (n.op == Node::Op::Var && n.value < reads->size()) (*reads)[n.value] = true;
  }
}

Value Value::of(CompiledExpr e) {
  Value v;
  if (e.is_constant()) {
    uint64_t c = 0;
    if (e.eval(nullptr, &c)) return fixed(c);
  }
  v.dynamic = true;
  v.expr = std::move(e);
  return v;
}

uint64_t literal_bits(const manifest::LitI32& v) {
  return static_cast<uint32_t>(v.v);
}
uint64_t literal_bits(const manifest::LitI64& v) { return static_cast<uint64_t>(v.v); }
uint64_t literal_bits(const manifest::LitF32& v) {
  float f = static_cast<float>(v.v);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
uint64_t literal_bits(const manifest::LitU8& v) { return v.v; }

}  // namespace kernrt::rt
