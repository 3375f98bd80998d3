// Verifier rules 1-9 (reference/kern-schema.md §2.2): schema version, vars, topology
// sizes, states, buffer shapes, domains, fill placement, export/peer, modules.
//
// These rules look at declarations only. Whether the fills add up to a serving contract
// is protocol.cpp's question; whether a declaration is used is rule 24's
// (verify_programs.cpp). A domain is proven well-formed, never honoured by any kernel.
#include <cstdint>
#include <string>

#include "kernrt/manifest/registry.hpp"
#include "verify_context.hpp"

namespace kernrt::manifest::rules {
namespace {

void check_topology(VerifyContext& c, const Manifest& m) {
  if (!m.topology) return;
  for (const auto& [name, size] : m.topology->groups) {
    if (size == 0) c.fail(ptr("/topology/groups", name), "size must be > 0");
  }
}

void check_states(VerifyContext& c, const Manifest& m) {
  for (const auto& [name, st] : m.states) {
    int set = (st.bytes_per_token > 0) + (st.bytes > 0) + (st.bytes_per_seq > 0);
    if (set == 0) {
      c.fail(ptr("/states", name), "one of bytes_per_token / bytes / bytes_per_seq must be > 0");
    } else if (set > 1) {
      c.fail(ptr("/states", name), "bytes_per_token, bytes and bytes_per_seq are exclusive");
    }
  }
}

// Wide enough for every i64 and u64 bound; `__extension__` because -Wpedantic names the
// GCC/Clang type.
__extension__ typedef __int128 Int;

// The integer range of a buffer dtype a domain bound must lie in; nullopt for floats.
struct IntRange {
  Int lo = 0;
  Int hi = 0;
};

std::optional<IntRange> int_range(DType t) {
  switch (t) {
    case DType::i32: return IntRange{INT32_MIN, INT32_MAX};
    case DType::u32: return IntRange{0, UINT32_MAX};
    case DType::i64: return IntRange{INT64_MIN, INT64_MAX};
    case DType::u64: return IntRange{0, UINT64_MAX};
    case DType::u8: return IntRange{0, 255};
    default: return std::nullopt;
  }
}

std::string int128_text(Int v) {
  if (v >= 0) return std::to_string(static_cast<uint64_t>(v));
  return std::to_string(static_cast<int64_t>(v));
}

// A bound's value at one var assignment, as a double for the min <= max comparison.
std::optional<double> bound_value(const Bound& b, const VarLookup& env) {
  switch (b.kind) {
    case Bound::Kind::Int: return static_cast<double>(b.i);
    case Bound::Kind::Float: return b.f;
    case Bound::Kind::Expr: {
      std::string ignored;
      auto v = evaluate(b.expr, env, &ignored);
      if (!v) return std::nullopt;
      return static_cast<double>(*v);
    }
  }
  return std::nullopt;
}

// An integer bound must be computable at the var maxima (checked u64) and lie inside the
// buffer dtype's range: an element can never be compared with a bound it cannot reach.
// Bounds are monotone in every var, so the maxima are the extreme. True when it does.
bool check_bound_range(VerifyContext& c, const Bound& b, DType dtype, const std::string& path,
                       const char* which) {
  auto range = int_range(dtype);
  Int v = 0;
  std::string shown;
  if (b.kind == Bound::Kind::Int) {
    v = b.i;
    shown = std::to_string(b.i);
  } else if (b.kind == Bound::Kind::Expr) {
    auto e = c.eval_max_checked(b.expr, path, std::string("domain ") + which);
    if (!e) return false;
    v = *e;
    shown = expr_text(b.expr) + " reaches " + std::to_string(*e) + " at var upper bounds" +
            c.vars_at_max_text(b.expr) + ", which";
  } else {
    return true;
  }
  if (!range || (v >= range->lo && v <= range->hi)) return true;
  c.fail(path, std::string("domain ") + which + " " + shown + " is outside the " +
                   to_string(dtype) + " range (" + int128_text(range->lo) + ".." +
                   int128_text(range->hi) + ")");
  return false;
}

std::string number(double v) {
  if (v == static_cast<double>(static_cast<int64_t>(v))) {
    return std::to_string(static_cast<int64_t>(v));
  }
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

void check_domain(VerifyContext& c, const Manifest& m, const std::string& name,
                  const Buffer& b) {
  const Domain& d = *b.domain;
  const std::string path = ptr(ptr("/buffers", name), "domain");
  const bool is_float = dtype_is_float(b.dtype);
  const uint64_t stride = d.stride.value_or(1);
  const bool monotone = d.monotone.value_or(false);
  if (d.index_into && (d.min || d.max)) {
    c.fail(path, "`index_into` and `min`/`max` are mutually exclusive");
  }
  if (!d.index_into && !d.min && !d.max && !monotone) {
    c.fail(path, "empty (declare bounds, `index_into`, or `monotone`)");
  }
  if (stride == 0) c.fail(ptr(path, "stride"), "`stride` must be > 0");
  if (stride > 1 && !d.index_into) {
    c.fail(ptr(path, "stride"), "`stride` only applies with `index_into`");
  }
  if (d.index_into) {
    const std::string& t = *d.index_into;
    const std::string tpath = ptr(path, "index_into");
    if (is_float) {
      c.fail(tpath, std::string("a ") + to_string(b.dtype) + " buffer cannot index anything");
    }
    const bool is_buffer = m.buffers.count(t) != 0;
    auto st = m.states.find(t);
    const bool is_state = st != m.states.end();
    if (!is_buffer && !is_state) {
      c.fail(tpath, "`index_into` unknown buffer/state " + tick(t));
    } else if (is_buffer && is_state) {
      c.fail(tpath, "`index_into` " + tick(t) + " is both a buffer and a state");
    } else if (is_state && st->second.bytes_per_seq > 0 &&
               st->second.bytes_per_seq % (stride == 0 ? 1 : stride) != 0) {
      c.fail(tpath, "`index_into` per-sequence state " + tick(t) + " in lines of " +
                        std::to_string(stride) + " bytes, which do not divide its " +
                        std::to_string(st->second.bytes_per_seq) + " bytes per sequence");
    } else if (is_buffer && t == name) {
      c.fail(tpath, "a buffer cannot index itself");
    }
  }
  if (monotone && b.shape.size() != 1) {
    c.fail(ptr(path, "monotone"), "`monotone` requires a one-dimensional buffer, found " +
                                      std::to_string(b.shape.size()) + " dimensions");
  }
  bool bounds_ok = true;
  for (const auto& [which, bound] : {std::pair<const char*, const std::optional<Bound>*>{
                                         "min", &d.min},
                                     {"max", &d.max}}) {
    if (!*bound) continue;
    const Bound& bd = **bound;
    if (bd.kind == Bound::Kind::Float && !is_float) {
      c.fail(ptr(path, which), std::string("float `") + which + "` on a " + to_string(b.dtype) +
                                   " buffer");
      bounds_ok = false;
    } else if (bd.kind == Bound::Kind::Expr && !c.check_expr(bd.expr, ptr(path, which))) {
      bounds_ok = false;
    } else if (!check_bound_range(c, bd, b.dtype, ptr(path, which), which)) {
      bounds_ok = false;
    }
  }
  if (d.min && d.max && bounds_ok) {
    // Bounds are monotone in every var, so the all-1 and all-max corners suffice.
    for (const VarLookup* env : {&c.at_min, &c.at_max}) {
      auto lo = bound_value(*d.min, *env);
      auto hi = bound_value(*d.max, *env);
      if (lo && hi && *lo > *hi) {
        c.fail(path, "min " + number(*lo) + " > max " + number(*hi));
        break;
      }
    }
  }
}

void check_fill(VerifyContext& c, const std::string& name, const Buffer& b) {
  const Fill fill = *b.fill;
  const std::string path = ptr(ptr("/buffers", name), "fill");
  const std::string f = tick(to_string(fill));
  const bool output_role = !fill_is_input(fill);
  if (b.kind == BufferKind::input || b.kind == BufferKind::output) {
    const bool is_output = b.kind == BufferKind::output;
    if (output_role != is_output) {
      c.fail(path, "fill " + f + " is " +
                       (output_role ? "read from an output" : "written into an input") +
                       " but the buffer is " + to_string(b.kind));
    }
  } else {
    c.fail(path, std::string("a fill sits on an input or output, not a ") + to_string(b.kind) +
                     " buffer");
  }
  if (b.dtype != DType::i32 && b.dtype != DType::i64) {
    c.fail(path, "fill " + f + " needs an i32 or i64 buffer, not " + to_string(b.dtype));
  }
}

void check_peer(VerifyContext& c, const Manifest& m, const std::string& name, const Buffer& b) {
  const std::string path = ptr("/buffers", name);
  if (b.kind != BufferKind::peer) {
    if (b.of) c.fail(ptr(path, "of"), "`of` only applies to peer buffers");
    if (b.group) c.fail(ptr(path, "group"), "`group` only applies to peer buffers");
    return;
  }
  if (b.export_.value_or(false)) {
    c.fail(ptr(path, "export"), "a peer buffer cannot itself be exported");
  }
  if (b.dtype != DType::u64) {
    c.fail(ptr(path, "dtype"), std::string("a peer buffer holds device addresses, dtype must be "
                                           "u64, not ") + to_string(b.dtype));
  }
  if (b.domain) {
    c.fail(ptr(path, "domain"),
           "a peer buffer's contents are runtime-filled addresses; it takes no domain");
  }
  if (!b.of) {
    c.fail(path, "a peer buffer must name the exported buffer or state it holds addresses `of`");
  } else {
    const std::string& of = *b.of;
    const std::string opath = ptr(path, "of");
    auto target = m.buffers.find(of);
    const bool is_state = m.states.count(of) != 0;
    if (of == name) {
      c.fail(opath, "a peer buffer cannot be `of` itself");
    } else if (target != m.buffers.end() && is_state) {
      c.fail(opath, "`of` " + tick(of) + " is both a buffer and a state");
    } else if (target != m.buffers.end()) {
      if (target->second.kind == BufferKind::peer) {
        c.fail(opath, "`of` " + tick(of) + " is itself a peer buffer");
      } else if (!target->second.export_.value_or(false)) {
        c.fail(opath, "`of` buffer " + tick(of) + " is not exported");
      }
    } else if (!is_state) {
      c.fail(opath, "`of` unknown buffer/state " + tick(of));
    }
  }
  if (!b.group) {
    c.fail(path, "a peer buffer must name the topology `group` its addresses are indexed by");
    return;
  }
  if (auto size = c.group(*b.group, ptr(path, "group"))) {
    const bool exact = b.shape.size() == 1 && b.shape[0].kind == Expr::Kind::Const &&
                       b.shape[0].value == *size;
    if (!exact) {
      c.fail(ptr(path, "shape"), "a peer buffer over group " + tick(*b.group) + " has shape [" +
                                     std::to_string(*size) + "], one address per member");
    }
  }
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char ch : s) {
    const bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                     (ch >= 'A' && ch <= 'F');
    if (!hex) return false;
  }
  return true;
}

}  // namespace

void check_modules(VerifyContext& c) {
  for (const auto& [name, md] : *c.modules) {
    const std::string path = ptr("/modules", name);
    if (!is_hex64(md.sha256)) {
      c.fail(ptr(path, "sha256"), "sha256 " + tick(md.sha256) + " is not 64 hex chars");
    }
    if (md.source.empty()) c.fail(ptr(path, "source"), "empty source");
    // A source without the `hf:` prefix is a local file name (a label).
    if (is_registry_source(md.source) && !parse_registry_ref(md.source)) {
      c.fail(ptr(path, "source"), "invalid registry ref " + tick(md.source) +
                                      ": expected hf:<org>/<repo>/<path>[@revision]");
    }
  }
}

void check_decls(VerifyContext& c, const Manifest& m) {
  // 1. schema_version
  if (m.schema_version != 4) {
    c.fail("/schema_version", "unsupported schema_version " + std::to_string(m.schema_version) +
                                  " (this runtime reads 4)");
  }
  // 2. vars
  for (const auto& [name, v] : m.vars) {
    if (v.max < 1) c.fail(ptr(ptr("/vars", name), "max"), "max must be >= 1, found 0");
  }
  check_topology(c, m);  // 3 (references are checked where they occur)
  check_states(c, m);    // 4
  for (const auto& [name, b] : m.buffers) {  // 5
    auto size = c.shaped_size(b.dtype, b.shape, ptr(ptr("/buffers", name), "shape"));
    if (size) c.buffer_sizes.emplace(name, *size);
  }
  for (const auto& [name, b] : m.buffers) {  // 6
    if (b.domain) check_domain(c, m, name, b);
  }
  for (const auto& [name, b] : m.buffers) {  // 7
    if (b.fill) check_fill(c, name, b);
  }
  for (const auto& [name, b] : m.buffers) check_peer(c, m, name, b);  // 8
  check_modules(c);                                                   // 9
}

}  // namespace kernrt::manifest::rules
