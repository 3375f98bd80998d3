// The verifier's driver: runs the 24 rules of reference/kern-schema.md §2.2 in order over
// a manifest (verify) or the ops/modules rules over a merge fragment (verify_fragment),
// and owns the shared VerifyContext helpers. Rules live in verify_decls.cpp (1-9),
// verify_ops.cpp (10-18) and verify_programs.cpp (19-24).
//
// Deliberately not checked (as in kern): kernel behaviour and the meaning of params, the
// `pdl` promise, state offsets, which program runs first. Param sizes against the cubin
// and pointer alignment are load-time checks of the runtime.
#include <algorithm>
#include <utility>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/verify.hpp"
#include "verify_context.hpp"

namespace kernrt::manifest {
namespace rules {

VerifyContext::VerifyContext(const std::map<std::string, Var>& declared_vars,
                             const std::optional<Topology>* topo)
    : vars(&declared_vars), topology(topo) {
  for (const auto& [name, v] : declared_vars) {
    env_max.emplace(name, v.max);
    env_min.emplace(name, uint64_t{1});
  }
  at_max = lookup_in(env_max);
  at_min = lookup_in(env_min);
}

void VerifyContext::fail(const std::string& path, std::string message) {
  if (errors.size() >= max_errors) {
    ++omitted;
    return;
  }
  // Every name in a message is shortened where it is quoted; this bound is the backstop.
  constexpr std::size_t kMaxMessage = 2048;
  Error e;
  e.kind = ErrorKind::Manifest;
  e.path = path.size() <= kMaxMessage ? path : shortened(path, kMaxMessage);
  e.message = message.size() <= kMaxMessage ? std::move(message) : shortened(message, kMaxMessage);
  errors.push_back(std::move(e));
}

std::optional<uint64_t> VerifyContext::group(const std::string& name, const std::string& path) {
  if (topology == nullptr) return std::nullopt;
  if (topology->has_value()) {
    const auto& groups = (*topology)->groups;
    auto it = groups.find(name);
    if (it != groups.end()) {
      used_groups.insert(name);
      return it->second;
    }
    fail(path, "unknown topology group " + tick(name));
  } else {
    fail(path, "group " + tick(name) + " but the manifest declares no topology");
  }
  return std::nullopt;
}

bool VerifyContext::check_expr(const Expr& e, const std::string& path) {
  switch (e.kind) {
    case Expr::Kind::Const:
      return true;
    case Expr::Kind::Var:
      if (vars->count(e.var) != 0) {
        used_vars.insert(e.var);
        return true;
      }
      fail(path, "unknown var " + tick(e.var));
      return false;
    case Expr::Kind::CeilDiv:
    case Expr::Kind::Mul: {
      bool ok = true;
      if (e.value == 0) {
        fail(path, e.kind == Expr::Kind::CeilDiv ? "division by zero"
                                                 : "multiplication by constant zero");
        ok = false;
      }
      if (e.lhs && !check_expr(*e.lhs, path)) ok = false;
      return ok;
    }
  }
  return true;
}

std::optional<uint64_t> VerifyContext::eval_max(const Expr& e) const {
  std::string ignored;
  return evaluate(e, at_max, &ignored);
}

std::optional<uint64_t> VerifyContext::eval_min(const Expr& e) const {
  std::string ignored;
  return evaluate(e, at_min, &ignored);
}

std::string VerifyContext::vars_at_max_text(const Expr& e) const {
  std::vector<std::string> names;
  collect_vars(e, &names);
  std::string text;
  for (const std::string& n : names) {
    auto it = env_max.find(n);
    if (it == env_max.end()) continue;
    text += (text.empty() ? " (" : ", ") + shortened(n) + " = " + std::to_string(it->second);
  }
  return text.empty() ? text : text + ")";
}

std::optional<uint64_t> VerifyContext::eval_max_checked(const Expr& e, const std::string& path,
                                                        const std::string& what) {
  std::string err;
  auto v = evaluate(e, at_max, &err);
  if (!v) {
    fail(path, what + ": " + expr_text(e) + " " + err + " at var upper bounds" +
                   vars_at_max_text(e));
  }
  return v;
}

std::optional<uint64_t> VerifyContext::shaped_size(DType dtype, const std::vector<Expr>& shape,
                                                   const std::string& path) {
  if (shape.empty()) {
    fail(path, "shape must not be empty");
    return std::nullopt;
  }
  bool dim_error = false;
  std::optional<uint64_t> size = dtype_size(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    const Expr& dim = shape[i];
    std::optional<uint64_t> extent;
    if (dim.kind == Expr::Kind::Const) {
      if (dim.value == 0) {
        fail(ptr(path, i), "zero-sized dimension");
        dim_error = true;
      } else {
        extent = dim.value;
      }
    } else if (dim.kind == Expr::Kind::Var) {
      auto it = env_max.find(dim.var);
      if (it == env_max.end()) {
        fail(ptr(path, i), "unknown var " + tick(dim.var) + " in shape");
        dim_error = true;
      } else {
        used_vars.insert(dim.var);
        extent = it->second;
      }
    } else {
      fail(ptr(path, i), "a shape extent is a constant or a var name, not an expression");
      dim_error = true;
    }
    uint64_t product = 0;
    if (size && extent && !__builtin_mul_overflow(*size, *extent, &product)) {
      size = product;
    } else {
      size.reset();
    }
  }
  if (!size && !dim_error) {
    std::string dims;
    for (const Expr& d : shape) dims += (dims.empty() ? "" : ", ") + expr_text(d);
    fail(path, "byte size overflows u64 at var upper bounds: shape [" + dims + "] of " +
                   to_string(dtype) + " (" + std::to_string(dtype_size(dtype)) +
                   " bytes) at the vars' maxima");
  }
  return size;
}

bool scalar_fits(ParamType::Kind k, uint64_t v) {
  switch (k) {
    case ParamType::Kind::I32: return v <= uint64_t{2147483647};
    case ParamType::Kind::I64: return v <= uint64_t{9223372036854775807ull};
    case ParamType::Kind::U8: return v <= uint64_t{255};
    default: return false;
  }
}

const char* scalar_name(ParamType::Kind k) {
  switch (k) {
    case ParamType::Kind::I32: return "i32";
    case ParamType::Kind::I64: return "i64";
    case ParamType::Kind::F32: return "f32";
    case ParamType::Kind::U8: return "u8";
    default: return "non-scalar";
  }
}

uint64_t field_max(uint32_t width) {
  if (width <= 1) return 255;
  if (width >= 8) return uint64_t{9223372036854775807ull};
  return (uint64_t{1} << (8 * width - 1)) - 1;
}

std::string field_range(uint32_t width) {
  if (width <= 1) return "u8";
  return "i" + std::to_string(8 * std::min<uint32_t>(width, 8));
}

void check_unused_modules(VerifyContext& c) {
  for (const auto& entry : *c.modules) {
    if (c.used_modules.count(entry.first) == 0) {
      c.fail(ptr("/modules", entry.first), "module " + tick(entry.first) + " is never launched");
    }
  }
}

}  // namespace rules

Result<Verified> verify(Manifest m, const VerifyOptions& options) {
  rules::VerifyContext c(m.vars, &m.topology);
  c.modules = &m.modules;
  c.ops = &m.ops;
  c.max_errors = options.max_errors;
  rules::check_decls(c, m);     // rules 1-9
  rules::check_ops(c);          // rules 10-18
  rules::check_programs(c, m);  // rules 19-24
  if (!c.errors.empty() || c.omitted != 0) {
    auto r = Result<Verified>::fail(std::move(c.errors));
    r.omitted = c.omitted;
    return r;
  }
  return Result<Verified>::ok(Verified(std::move(m)));
}

Result<Verified> verify_json(std::string_view text, const VerifyOptions& options) {
  Result<Manifest> parsed = parse_manifest(text);
  if (!parsed.value) return Result<Verified>::fail(std::move(parsed.errors));
  return verify(std::move(*parsed.value), options);
}

Errors verify_fragment(const Fragment& f, const std::map<std::string, Var>& vars,
                       const VerifyOptions& options, uint64_t* omitted) {
  rules::VerifyContext c(vars, nullptr);
  c.modules = &f.modules;
  c.ops = &f.ops;
  c.max_errors = options.max_errors;
  rules::check_modules(c);  // rule 9
  rules::check_ops(c);      // rules 10-18, limits at the given vars
  rules::check_unused_modules(c);
  if (omitted) *omitted = c.omitted;
  return std::move(c.errors);
}

Errors verify_modules(const std::map<std::string, Module>& modules) {
  const std::map<std::string, Var> no_vars;
  rules::VerifyContext c(no_vars, nullptr);
  c.modules = &modules;
  rules::check_modules(c);
  return std::move(c.errors);
}

}  // namespace kernrt::manifest
