// Verifier rules 10-18 (reference/kern-schema.md §2.2): op interfaces, implementations,
// launch forms (with the NCCL collectives' shape, nccl_extern.hpp), launch limits at the
// var bounds, arity, wiring, packs and impl completeness; a tensormap field's own rules
// (17) are in verify_tensormaps.cpp. Used for whole manifests and for merge fragments alike.
//
// Deliberately not checked here: anything about calls or buffers (the footprint of a
// tensormap is recorded for rule 21 in verify_programs.cpp), ABI sizes against the
// cubin (runtime load), and whether a kernel honours its declared directions.
#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>

#include "kernrt/manifest/nccl_extern.hpp"
#include "verify_context.hpp"

namespace kernrt::manifest::rules {
namespace {

// Per-op dataflow over the implementation's slots.
struct ImplFlow {
  std::vector<bool> iface_written;  // `out` interface params start unwritten
  std::set<std::string> scratch_written;
  std::set<std::string> scratch_used;
};

std::string dims3(const std::array<uint32_t, 3>& v) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " +
         std::to_string(v[2]) + "]";
}

std::string literal_text(const LaunchArg& a) {
  std::ostringstream s;
  if (auto* l = std::get_if<LitI32>(&a)) s << "i32 literal " << l->v;
  if (auto* l = std::get_if<LitI64>(&a)) s << "i64 literal " << l->v;
  if (auto* l = std::get_if<LitF32>(&a)) s << "f32 literal " << l->v;
  if (auto* l = std::get_if<LitU8>(&a)) s << "u8 literal " << static_cast<unsigned>(l->v);
  return s.str();
}

bool literal_matches(const LaunchArg& a, const ParamType& p) {
  return (std::holds_alternative<LitI32>(a) && p.kind == ParamType::Kind::I32) ||
         (std::holds_alternative<LitI64>(a) && p.kind == ParamType::Kind::I64) ||
         (std::holds_alternative<LitF32>(a) && p.kind == ParamType::Kind::F32) ||
         (std::holds_alternative<LitU8>(a) && p.kind == ParamType::Kind::U8);
}

bool compatible(const ParamType& iface, const ParamType& launch) {
  if (iface.kind != launch.kind) return false;
  if (iface.kind == ParamType::Kind::Buffer) return iface.dtype == launch.dtype;
  return iface.kind != ParamType::Kind::Bytes;  // an interface never forwards a pack
}

// x*y*z, saturating (three u32 factors can overflow u64).
uint64_t volume(const std::array<uint32_t, 3>& v) {
  uint64_t xy = uint64_t{v[0]} * v[1];
  uint64_t xyz = 0;
  return __builtin_mul_overflow(xy, uint64_t{v[2]}, &xyz) ? UINT64_MAX : xyz;
}

void check_limits(VerifyContext& c, const Launch& l, const std::string& lp) {
  const uint64_t threads = volume(l.block);
  if (threads == 0 || threads > kMaxBlockThreads) {
    c.fail(ptr(lp, "block"), "block " + dims3(l.block) + " exceeds " +
                                 std::to_string(kMaxBlockThreads) +
                                 " threads or has a zero dim");
  }
  if (l.block[2] > kMaxBlockZ) {
    c.fail(ptr(ptr(lp, "block"), 2), "block.z " + std::to_string(l.block[2]) + " > " +
                                         std::to_string(kMaxBlockZ));
  }
  static const char* const kAxis[3] = {"x", "y", "z"};
  for (size_t a = 0; a < 3; ++a) {
    const std::string gp = ptr(ptr(lp, "grid"), a);
    const std::string name = std::string("grid.") + kAxis[a];
    if (!c.check_expr(l.grid[a], gp)) continue;
    auto v = c.eval_max_checked(l.grid[a], gp, name);
    if (!v) continue;
    const uint64_t limit = a == 0 ? kMaxGridX : kMaxGridYZ;
    if (*v > limit) {
      c.fail(gp, name + ": " + std::to_string(*v) + " exceeds CUDA limit " +
                     std::to_string(limit) + " at var upper bounds");
    }
    auto lo = c.eval_min(l.grid[a]);
    if (lo && *lo == 0) c.fail(gp, name + ": evaluates to 0 at var lower bounds");
  }
  if (l.shared_mem && c.check_expr(*l.shared_mem, ptr(lp, "shared_mem"))) {
    auto v = c.eval_max_checked(*l.shared_mem, ptr(lp, "shared_mem"), "shared_mem");
    if (v && *v > kMaxDynSharedMem) {
      c.fail(ptr(lp, "shared_mem"), "shared_mem: " + std::to_string(*v) +
                                        " bytes exceeds opt-in limit " +
                                        std::to_string(kMaxDynSharedMem) +
                                        " at var upper bounds");
    }
  }
  if (!l.cluster) return;
  const auto& cl = *l.cluster;
  const uint64_t blocks = volume(cl);
  if (blocks == 0 || blocks > kMaxClusterBlocks) {
    c.fail(ptr(lp, "cluster"), "cluster " + dims3(cl) + " has a zero dim or more than " +
                                   std::to_string(kMaxClusterBlocks) + " blocks");
    return;
  }
  for (size_t a = 0; a < 3; ++a) {
    for (int upper = 1; upper >= 0; --upper) {
      auto v = upper ? c.eval_max(l.grid[a]) : c.eval_min(l.grid[a]);
      if (v && *v % cl[a] != 0) {
        c.fail(ptr(ptr(lp, "cluster"), a),
               std::string("grid.") + kAxis[a] + " = " + std::to_string(*v) + " at var " +
                   (upper ? "upper" : "lower") + " bounds is not a multiple of cluster." +
                   kAxis[a] + " = " + std::to_string(cl[a]));
      }
    }
  }
}

std::optional<uint32_t> field_width(const PackField& f, const Op& op) {
  if (f.width) return f.width;
  return std::visit(
      [&](const auto& s) -> std::optional<uint32_t> {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, ParamRef>) {
          if (s.index < op.params.size()) return op.params[s.index].size_bytes();
          return std::nullopt;
        } else if constexpr (std::is_same_v<S, ScratchRef> || std::is_same_v<S, LitI64>) {
          return 8;
        } else if constexpr (std::is_same_v<S, LitU8>) {
          return 1;
        } else if constexpr (std::is_same_v<S, TensorMap>) {
          return 128;
        } else {
          return 4;  // i32, f32, var, expr, rank
        }
      },
      f.source);
}

// Rule 16 structure: every field inside the image, none overlapping; rule 17 placement.
void check_pack_layout(VerifyContext& c, const Pack& pack, const Op& op, const std::string& pp) {
  std::vector<std::tuple<uint64_t, uint64_t, size_t>> spans;  // (at, end, field)
  spans.reserve(pack.fields.size());
  for (size_t k = 0; k < pack.fields.size(); ++k) {
    const PackField& f = pack.fields[k];
    const std::string fp = ptr(ptr(pp, "fields"), k);
    auto w = field_width(f, op);
    if (!w || *w == 0) {
      c.fail(fp, "field #" + std::to_string(k) + ": width unknown");
      continue;
    }
    if (std::holds_alternative<TensorMap>(f.source)) {
      if (*w != 128) {
        c.fail(ptr(fp, "width"), "a tensormap field is 128 bytes, not " + std::to_string(*w));
      }
      if (f.at % 64 != 0) {
        c.fail(ptr(fp, "at"), "tensormap at " + std::to_string(f.at) +
                                  " is not 64-byte aligned");
      }
    }
    if (!std::holds_alternative<TensorMap>(f.source) && *w > 8) {
      // The runtime writes the low `width` bytes of a u64 value: 1 to 8.
      c.fail(ptr(fp, "width"), "field #" + std::to_string(k) + ": width " + std::to_string(*w) +
                                   ", but a value field is 1 to 8 bytes wide");
    }
    const uint64_t end = uint64_t{f.at} + *w;
    if (end > pack.size) {
      c.fail(fp, "field #" + std::to_string(k) + " at " + std::to_string(f.at) + " spans " +
                     std::to_string(*w) + " bytes, past the " + std::to_string(pack.size) +
                     " byte image");
    } else {
      spans.emplace_back(f.at, end, k);
    }
  }
  std::sort(spans.begin(), spans.end());
  // Compare each field with the furthest-reaching one before it, not only its neighbour.
  uint64_t reach = 0;
  size_t reach_field = 0;
  bool any = false;
  for (const auto& [at, end, k] : spans) {
    if (any && at < reach) {
      c.fail(ptr(ptr(pp, "fields"), k), "field #" + std::to_string(k) + " overlaps field #" +
                                            std::to_string(reach_field));
    }
    if (!any || end > reach) {
      reach = end;
      reach_field = k;
      any = true;
    }
  }
}

// A var or expr field: its value at the var maxima must fit the field's width (the runtime
// would write the low bytes of a larger value and the kernel would read a different number).
void check_field_value(VerifyContext& c, const PackField& f, size_t k, uint64_t value,
                       const std::string& what, const std::string& fp,
                       const std::string& where = "") {
  const uint32_t width = f.width.value_or(4);
  if (width < 1 || width > 8 || value <= field_max(width)) return;
  c.fail(fp, "field #" + std::to_string(k) + ": " + what + " " + std::to_string(value) + where +
                 ", exceeding the " + field_range(width) + " range of its " +
                 std::to_string(width) + "-byte field (max " + std::to_string(field_max(width)) +
                 ")");
}

// A literal narrowed by `width`: it must survive as a signed or unsigned value of that
// width; an f32 keeps its 4 bytes of bits.
void check_field_literal(VerifyContext& c, const PackField& f, size_t k, const std::string& fp) {
  if (!f.width || *f.width < 1 || *f.width >= 8) return;
  const uint32_t w = *f.width;
  if (std::holds_alternative<LitF32>(f.source)) {
    if (w < 4) {
      c.fail(ptr(fp, "width"), "field #" + std::to_string(k) + ": an f32 literal needs 4 bytes, "
                                   "not " + std::to_string(w));
    }
    return;
  }
  const int64_t v = std::holds_alternative<LitI32>(f.source) ? std::get<LitI32>(f.source).v
                                                             : std::get<LitI64>(f.source).v;
  const int64_t lo = -(int64_t{1} << (8 * w - 1));
  const int64_t hi = static_cast<int64_t>((uint64_t{1} << (8 * w)) - 1);
  if (v < lo || v > hi) {
    c.fail(fp, "field #" + std::to_string(k) + ": literal " + std::to_string(v) + " does not fit " +
                   std::to_string(w) + " bytes (" + std::to_string(lo) + ".." + std::to_string(hi) +
                   ")");
  }
}

bool param_in_range(VerifyContext& c, uint32_t i, const Op& op, const std::string& path) {
  if (i < op.params.size()) return true;
  c.fail(path, "interface param #" + std::to_string(i) + " out of range (" +
                   std::to_string(op.params.size()) + " interface params)");
  return false;
}

void check_pack(VerifyContext& c, const std::string& oname, const Op& op, const Pack& pack,
                const ParamType& param, const std::string& pp, ImplFlow& flow) {
  if (param.kind != ParamType::Kind::Bytes) {
    c.fail(pp, "a pack binds only to a `bytes<n>` param, not " + tick(param.to_string()));
  } else if (param.bytes != pack.size) {
    c.fail(ptr(pp, "size"), "pack of " + std::to_string(pack.size) + " bytes bound to a `bytes<" +
                                std::to_string(param.bytes) + ">` param");
  }
  check_pack_layout(c, pack, op, pp);
  const auto& scratch = op.impl.scratch;
  for (size_t k = 0; k < pack.fields.size(); ++k) {
    const PackField& f = pack.fields[k];
    const std::string fp = ptr(ptr(pp, "fields"), k);
    if (auto* p = std::get_if<ParamRef>(&f.source)) {
      if (!param_in_range(c, p->index, op, ptr(fp, "param"))) continue;
      const ParamType& iface = op.params[p->index];
      // A pointer field is read or written per the interface direction.
      if (iface.is_pointer() && writes(iface.dir)) flow.iface_written[p->index] = true;
    } else if (auto* s = std::get_if<ScratchRef>(&f.source)) {
      if (!scratch || scratch->count(s->name) == 0) {
        c.fail(ptr(fp, "scratch"), "unknown scratch " + tick(s->name));
        continue;
      }
      flow.scratch_used.insert(s->name);
      flow.scratch_written.insert(s->name);
    } else if (auto* v = std::get_if<VarRef>(&f.source)) {
      auto var = c.vars->find(v->name);
      if (var != c.vars->end()) {
        c.used_vars.insert(v->name);
        check_field_value(c, f, k, var->second.max, "var " + tick(v->name) + " max", fp);
      } else {
        c.fail(ptr(fp, "var"), "unknown var " + tick(v->name));
      }
    } else if (auto* e = std::get_if<Expr>(&f.source)) {
      if (c.check_expr(*e, ptr(fp, "expr"))) {
        const std::string what = "field #" + std::to_string(k) + " expr";
        if (auto reach = c.eval_max_checked(*e, ptr(fp, "expr"), what)) {
          check_field_value(c, f, k, *reach,
                            "expression " + expr_text(*e) + " reaches", fp,
                            " at var upper bounds" + c.vars_at_max_text(*e));
        }
      }
    } else if (std::holds_alternative<LitI32>(f.source) ||
               std::holds_alternative<LitI64>(f.source) ||
               std::holds_alternative<LitF32>(f.source)) {
      check_field_literal(c, f, k, fp);
    } else if (auto* r = std::get_if<RankRef>(&f.source)) {
      c.group(r->group, ptr(fp, "rank"));
    } else if (auto* t = std::get_if<TensorMap>(&f.source)) {
      const std::string tp = ptr(fp, "tensormap");
      if (!param_in_range(c, t->param, op, ptr(tp, "param"))) continue;
      const ParamType& iface = op.params[t->param];
      if (!iface.is_pointer()) {
        c.fail(ptr(tp, "param"), "tensormap over interface param #" + std::to_string(t->param) +
                                     " (" + tick(iface.to_string()) +
                                     "), which is not a buffer or state");
        continue;
      }
      check_tensormap(c, *t, tp);
      if (writes(iface.dir)) flow.iface_written[t->param] = true;
      record_footprint(c, oname, op, *t, fp, tp);
    }
  }
}

void check_arg(VerifyContext& c, const std::string& oname, const Op& op, const LaunchArg& arg,
               const ParamType& param, const std::string& ap, ImplFlow& flow) {
  if (auto* p = std::get_if<ParamRef>(&arg)) {
    const uint32_t i = p->index;
    if (!param_in_range(c, i, op, ap)) return;
    const ParamType& iface = op.params[i];
    if (!compatible(iface, param)) {
      c.fail(ap, "interface param " + tick(iface.to_string()) + " does not match launch param " +
                     tick(param.to_string()));
      return;
    }
    if (iface.is_pointer()) {
      if (writes(param.dir) && iface.dir == Direction::in) {
        c.fail(ap, "launch writes through interface `in` param #" + std::to_string(i));
      }
      if (reads(param.dir) && !flow.iface_written[i]) {
        c.fail(ap, "interface `out` param #" + std::to_string(i) +
                       " read before any launch wrote it");
      }
      if (writes(param.dir)) flow.iface_written[i] = true;
    }
  } else if (auto* s = std::get_if<ScratchRef>(&arg)) {
    const Scratch* decl = nullptr;
    if (op.impl.scratch) {
      auto it = op.impl.scratch->find(s->name);
      if (it != op.impl.scratch->end()) decl = &it->second;
    }
    if (decl == nullptr) {
      c.fail(ap, "unknown scratch " + tick(s->name));
      return;
    }
    flow.scratch_used.insert(s->name);
    if (param.kind != ParamType::Kind::Buffer) {
      c.fail(ap, "scratch " + tick(s->name) + " bound to non-buffer param " +
                     tick(param.to_string()));
      return;
    }
    if (decl->dtype != param.dtype) {
      c.fail(ap, "scratch " + tick(s->name) + " has dtype " + to_string(decl->dtype) +
                     " but param expects " + to_string(param.dtype));
    }
    if (reads(param.dir) && flow.scratch_written.count(s->name) == 0) {
      c.fail(ap, "scratch " + tick(s->name) + " is read before any launch wrote it");
    }
    if (writes(param.dir)) flow.scratch_written.insert(s->name);
  } else if (auto* r = std::get_if<RankRef>(&arg)) {
    if (param.kind != ParamType::Kind::I32 && param.kind != ParamType::Kind::I64) {
      c.fail(ap, "a rank binds only to an i32 or i64 param, not " + tick(param.to_string()));
    }
    c.group(r->group, ptr(ap, "rank"));
  } else if (auto* pack = std::get_if<Pack>(&arg)) {
    check_pack(c, oname, op, *pack, param, ptr(ap, "pack"), flow);
  } else if (!literal_matches(arg, param)) {
    c.fail(ap, literal_text(arg) + " does not match launch param " + tick(param.to_string()));
  }
}

void check_launch(VerifyContext& c, const std::string& oname, const Op& op, const Launch& l,
                  const std::string& lp, ImplFlow& flow) {
  // 12. launch form
  if (!l.module) {
    if (l.entry.rfind("extern:", 0) != 0) {
      c.fail(ptr(lp, "entry"),
             "a launch without a module must be a runtime built-in (`extern:<name>`)");
    }
  } else {
    if (l.entry.empty()) c.fail(ptr(lp, "entry"), "empty entry");
    if (l.entry.rfind("extern:", 0) == 0) {
      c.fail(ptr(lp, "entry"), "an extern entry has no module or launch geometry");
    }
    if (c.modules->count(*l.module) != 0) {
      c.used_modules.insert(*l.module);
    } else {
      c.fail(ptr(lp, "module"), "unknown module " + tick(*l.module));
    }
    check_limits(c, l, lp);  // 13
  }
  const std::vector<ParamType>& params = l.params ? *l.params : op.params;
  // 12b. an extern in the NCCL namespace is one of the v5 collectives, shaped
  // [send, recv, count, rank] (nccl_extern.hpp); other extern names stay the runtime's call.
  if (!l.module && is_nccl_entry(l.entry)) {
    const std::string op_path = ptr("/ops", oname);
    for (const NcclProblem& p : check_nccl_launch(l.entry, params, l.args ? &*l.args : nullptr)) {
      std::string at = lp;
      if (p.field == "params" && !l.params) at = ptr(op_path, "params");
      else if (!p.field.empty()) at = ptr(lp, p.field);
      if (p.index >= 0) at = ptr(at, static_cast<uint64_t>(p.index));
      c.fail(at, p.message);
    }
  }
  if (!l.module) {
    for (const ParamType& p : params) {
      if (p.kind == ParamType::Kind::Bytes) {
        c.fail(l.params ? ptr(lp, "params") : lp,
               "an extern launch takes pointers and scalars, not a pack");
        break;
      }
    }
  }
  // 14. arity (a defaulted args list forwards the interface in order)
  std::vector<LaunchArg> defaulted;
  if (!l.args) {
    defaulted.reserve(op.params.size());
    for (size_t i = 0; i < op.params.size(); ++i) {
      defaulted.emplace_back(ParamRef{static_cast<uint32_t>(i)});
    }
  }
  const std::vector<LaunchArg>& args = l.args ? *l.args : defaulted;
  if (args.size() != params.size()) {
    c.fail(l.args ? ptr(lp, "args") : lp, "takes " + std::to_string(params.size()) +
                                              " params, got " + std::to_string(args.size()) +
                                              " args");
    return;
  }
  // 15-17. wiring, packs, tensormaps
  for (size_t j = 0; j < args.size(); ++j) {
    const std::string ap = l.args ? ptr(ptr(lp, "args"), j)
                                  : (l.params ? ptr(ptr(lp, "params"), j) : lp);
    check_arg(c, oname, op, args[j], params[j], ap, flow);
  }
}

void check_op(VerifyContext& c, const std::string& oname, const Op& op) {
  const std::string op_path = ptr("/ops", oname);
  const std::string impl_path = ptr(op_path, "impl");
  // 10. interface
  for (size_t i = 0; i < op.params.size(); ++i) {
    if (op.params[i].kind == ParamType::Kind::Bytes) {
      c.fail(ptr(ptr(op_path, "params"), i),
             "interface param #" + std::to_string(i) +
                 " is a byte aggregate; packs are launch-private, the interface takes the "
                 "buffers and scalars they are assembled from");
    }
  }
  // 11. impl: scratch sized, at least one launch
  if (op.impl.scratch) {
    for (const auto& [sname, s] : *op.impl.scratch) {
      c.shaped_size(s.dtype, s.shape, ptr(ptr(ptr(impl_path, "scratch"), sname), "shape"));
    }
  }
  if (op.impl.launches.empty()) {
    c.fail(ptr(impl_path, "launches"), "implementation has no launches");
  }
  ImplFlow flow;
  flow.iface_written.reserve(op.params.size());
  for (const ParamType& p : op.params) {
    flow.iface_written.push_back(!(p.is_pointer() && p.dir == Direction::out));
  }
  for (size_t li = 0; li < op.impl.launches.size(); ++li) {
    check_launch(c, oname, op, op.impl.launches[li], ptr(ptr(impl_path, "launches"), li), flow);
  }
  // 18. every interface `out` param is written by some launch
  for (size_t i = 0; i < op.params.size(); ++i) {
    if (!flow.iface_written[i]) {
      c.fail(ptr(ptr(op_path, "params"), i), "interface " + tick(op.params[i].to_string()) +
                                                 " param #" + std::to_string(i) +
                                                 " is never written by any launch");
    }
  }
  // 11. every scratch is used
  if (op.impl.scratch) {
    for (const auto& entry : *op.impl.scratch) {
      if (flow.scratch_used.count(entry.first) == 0) {
        c.fail(ptr(ptr(impl_path, "scratch"), entry.first),
               "scratch " + tick(entry.first) + " is never used");
      }
    }
  }
}

}  // namespace

void check_ops(VerifyContext& c) {
  for (const auto& [oname, op] : *c.ops) check_op(c, oname, op);
}

}  // namespace kernrt::manifest::rules
