// Expression evaluation (§1.15) with checked u64 arithmetic, var assignments at the
// declared bounds, var collection and byte sizes of shapes. It evaluates what it is
// given: whether `c > 0` was declared is the verifier's rule, here a zero divisor is
// just "division by zero".
#include "kernrt/manifest/expr.hpp"

#include "kernrt/manifest/error.hpp"

namespace kernrt::manifest {

namespace {

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

std::optional<uint64_t> evaluate(const Expr& e, const VarLookup& lookup, std::string* error) {
  auto failed = [&](std::string msg) -> std::optional<uint64_t> {
    if (error) *error = std::move(msg);
    return std::nullopt;
  };
  switch (e.kind) {
    case Expr::Kind::Const: return e.value;
    case Expr::Kind::Var: {
      std::optional<uint64_t> v = lookup ? lookup(e.var) : std::nullopt;
      if (!v) return failed("unknown var `" + e.var + "`");
      return v;
    }
    case Expr::Kind::CeilDiv:
    case Expr::Kind::Mul: {
      if (!e.lhs) return failed("malformed expression");
      std::optional<uint64_t> a = evaluate(*e.lhs, lookup, error);
      if (!a) return std::nullopt;
      if (e.kind == Expr::Kind::CeilDiv) {
        if (e.value == 0) return failed("division by zero");
        return *a / e.value + (*a % e.value != 0 ? 1 : 0);
      }
      uint64_t r = 0;
      if (mul_overflows(*a, e.value, &r)) return failed("overflows u64");
      return r;
    }
  }
  return failed("malformed expression");
}

std::map<std::string, uint64_t> vars_at_max(const Manifest& m) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, var] : m.vars) out[name] = var.max;
  return out;
}

std::map<std::string, uint64_t> vars_at_min(const Manifest& m) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, var] : m.vars) out[name] = 1;  // Var::MIN is always 1
  return out;
}

VarLookup lookup_in(const std::map<std::string, uint64_t>& values) {
  // Captures by pointer: the map must outlive the lookup, as for any reference.
  const std::map<std::string, uint64_t>* map = &values;
  return [map](const std::string& name) -> std::optional<uint64_t> {
    auto it = map->find(name);
    if (it == map->end()) return std::nullopt;
    return it->second;
  };
}

void collect_vars(const Expr& e, std::vector<std::string>* out) {
  if (!out) return;
  const Expr* cur = &e;
  while (cur) {
    if (cur->kind == Expr::Kind::Var) out->push_back(cur->var);
    cur = cur->lhs.get();
  }
}

std::string expr_text(const Expr& e) {
  constexpr std::size_t kMaxText = 300;
  // Operators from the outside in, then the innermost operand; closed in reverse.
  std::string open;
  std::vector<const Expr*> ops;
  const Expr* cur = &e;
  while (cur && (cur->kind == Expr::Kind::CeilDiv || cur->kind == Expr::Kind::Mul) &&
         open.size() < kMaxText) {
    open += cur->kind == Expr::Kind::Mul ? "{\"mul\": [" : "{\"ceil_div\": [";
    ops.push_back(cur);
    cur = cur->lhs.get();
  }
  std::string text = open;
  if (cur == nullptr) {
    text += "?";
  } else if (cur->kind == Expr::Kind::Var) {
    text += "\"" + shortened(cur->var) + "\"";
  } else if (cur->kind == Expr::Kind::Const) {
    text += std::to_string(cur->value);
  } else {
    text += "\xe2\x80\xa6";  // nesting cut at kMaxText
  }
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    text += ", " + std::to_string((*it)->value) + "]}";
  }
  return text;
}

std::set<std::string> vars_read_by(const Manifest& m, const std::string& program) {
  std::set<std::string> out;
  std::vector<std::string> names;
  auto add = [&](const Expr& e) {
    names.clear();
    collect_vars(e, &names);
    out.insert(names.begin(), names.end());
  };
  auto p = m.programs.find(program);
  if (p == m.programs.end()) return out;
  std::set<std::string> ops;
  for (const Call& call : p->second.calls) {
    ops.insert(call.op);
    for (const CallArg& a : call.args) {
      if (const auto* v = std::get_if<VarRef>(&a)) out.insert(v->name);
      if (const auto* e = std::get_if<Expr>(&a)) add(*e);
    }
  }
  for (const std::string& name : ops) {
    auto op = m.ops.find(name);
    if (op == m.ops.end()) continue;
    for (const Launch& l : op->second.impl.launches) {
      for (const Expr& g : l.grid) add(g);
      if (l.shared_mem) add(*l.shared_mem);
      if (!l.args) continue;
      for (const LaunchArg& a : *l.args) {
        const auto* pack = std::get_if<Pack>(&a);
        if (pack == nullptr) continue;
        for (const PackField& f : pack->fields) {
          if (const auto* v = std::get_if<VarRef>(&f.source)) out.insert(v->name);
          if (const auto* e = std::get_if<Expr>(&f.source)) add(*e);
        }
      }
    }
  }
  return out;
}

std::optional<uint64_t> byte_size(const std::vector<Expr>& shape, DType dtype,
                                  const VarLookup& lookup, std::string* error) {
  uint64_t total = dtype_size(dtype);
  for (const Expr& extent : shape) {
    std::optional<uint64_t> v = evaluate(extent, lookup, error);
    if (!v) return std::nullopt;
    if (mul_overflows(total, *v, &total)) {
      if (error) *error = "byte size overflows u64";
      return std::nullopt;
    }
  }
  return total;
}

}  // namespace kernrt::manifest
