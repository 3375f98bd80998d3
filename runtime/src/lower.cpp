// Lowering of programs into launch plans (see lower.hpp).
#include "lower.hpp"

#include <algorithm>
#include <iterator>
#include <tuple>
#include <type_traits>
#include <variant>

#include "kernrt/manifest/expr.hpp"
#include "kernrt/manifest/nccl_extern.hpp"

namespace kernrt::rt {

bool FunctionKey::operator<(const FunctionKey& o) const {
  return std::tie(module, entry, param_sizes) < std::tie(o.module, o.entry, o.param_sizes);
}

namespace {

std::string ptr(std::initializer_list<std::string> tokens) {
  std::string p;
  for (const auto& t : tokens) p = json_pointer_append(p, t);
  return p;
}

std::string view_name(const std::string& name, uint64_t offset) {
  return "`" + name + "`" + (offset ? " + " + std::to_string(offset) : "");
}

}  // namespace

Errors check_supported(const manifest::Manifest& m) {
  Errors errors;
  for (const auto& [op_name, op] : m.ops) {
    for (size_t l = 0; l < op.impl.launches.size(); ++l) {
      const auto& launch = op.impl.launches[l];
      if (!launch.is_extern || gemm_kind(launch.entry) || manifest::nccl_extern(launch.entry)) continue;
      errors.push_back(Error{ErrorKind::Manifest,
          json_pointer_append(ptr({"ops", op_name, "impl", "launches"}), l) + "/entry",
          "unsupported extern `" + launch.entry + "`: the built-ins are extern:cublaslt_bf16_tn, "
          "extern:cublaslt_bf16_tn_acc, extern:cublas_bf16_tn_f32 and " +
          manifest::nccl_extern_names()});
    }
  }
  return errors;
}

bool uses_gemm(const manifest::Manifest& m) {
  for (const auto& [name, op] : m.ops) {
    for (const auto& launch : op.impl.launches) {
      if (launch.is_extern && gemm_kind(launch.entry)) return true;
    }
  }
  return false;
}

std::set<std::string> nccl_groups(const manifest::Manifest& m) {
  std::set<std::string> groups;
  for (const auto& [name, op] : m.ops) {
    for (const auto& launch : op.impl.launches) {
      if (!launch.is_extern || !manifest::nccl_extern(launch.entry) || !launch.args ||
          launch.args->size() != manifest::kNcclArity) {
        continue;
      }
      if (auto* r = std::get_if<manifest::RankRef>(&(*launch.args)[manifest::kNcclRank])) {
        groups.insert(r->group);
      }
    }
  }
  return groups;
}

namespace {

struct Lowerer {
  const manifest::Manifest& m;
  const Allocations& alloc;
  TensorMapEncoder& encoder;
  Ranks ranks;
  LoweredManifest out;
  std::map<FunctionKey, uint32_t> function_index;
  Errors errors;

  void fail(ErrorKind kind, const std::string& path, const std::string& message) {
    errors.push_back(Error{kind, path, message});
  }

  // This process's index in `group` (resolve_ranks gave every group one at load; lowered
  // on its own, only one-rank groups have one).
  std::optional<uint64_t> rank_of(const std::string& group, const std::string& path) {
    if (auto it = ranks.find(group); it != ranks.end()) return it->second;
    fail(ErrorKind::Caller, path, "rank arg `" + group + "`: this process has no index in the "
                                  "group (a multi-rank group needs LoadOptions::ranks)");
    return std::nullopt;
  }

  std::optional<Value> compile(const manifest::Expr& e, const std::string& path) {
    std::string why;
    auto c = CompiledExpr::compile(e, out.vars, &why);
    if (!c) {
      fail(ErrorKind::Manifest, path, why);
      return std::nullopt;
    }
    return Value::of(std::move(*c));
  }

  std::optional<Slot> lower_call_arg(const manifest::CallArg& arg, const std::string& path) {
    std::optional<Slot> slot;
    std::visit(
        [&](const auto& a) {
          using T = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<T, manifest::BufArg> ||
                        std::is_same_v<T, manifest::StateArg>) {
            constexpr bool kBuf = std::is_same_v<T, manifest::BufArg>;
            const auto& table = kBuf ? alloc.buffers : alloc.states;
            auto it = table.find(a.name);
            if (it == table.end()) {
              fail(ErrorKind::Manifest, path,
                   std::string(kBuf ? "buffer" : "state") + " `" + a.name + "` is not allocated");
              return;
            }
            const uint64_t off = a.offset.value_or(0);
            if (off > it->second.bytes) {
              fail(ErrorKind::Manifest, path,
                   "offset " + std::to_string(off) + " is past the end of `" + a.name + "` (" +
                       std::to_string(it->second.bytes) + " bytes)");
              return;
            }
            Slot s;
            s.pointer = true;
            s.region = Region{it->second.address + off, it->second.bytes - off};
            s.value = Value::fixed(s.region.address);
            s.what = view_name(a.name, off);
            s.buffer = static_cast<int32_t>((kBuf ? 0 : alloc.buffers.size()) +
                                            std::distance(table.begin(), it));
            s.offset = off;
            slot = std::move(s);
          } else if constexpr (std::is_same_v<T, manifest::VarRef>) {
            if (auto v = compile(manifest::Expr::variable(a.name), path)) {
              slot = Slot{false, {}, std::move(*v), "var `" + a.name + "`"};
            }
          } else if constexpr (std::is_same_v<T, manifest::Expr>) {
            if (auto v = compile(a, path)) slot = Slot{false, {}, std::move(*v), "expr"};
          } else if constexpr (std::is_same_v<T, manifest::RankRef>) {
            if (auto r = rank_of(a.group, path)) slot = Slot{false, {}, Value::fixed(*r), "rank"};
          } else {
            slot = Slot{false, {}, Value::fixed(literal_bits(a)), "literal"};
          }
        },
        arg);
    return slot;
  }

  void lower_launch(const std::string& op_name, const manifest::Op& op, size_t l,
                    const std::vector<Slot>& iface, const std::string& call_path,
                    ProgramPlan* program) {
    const manifest::Launch& launch = op.impl.launches[l];
    const std::string path = json_pointer_append(ptr({"ops", op_name, "impl", "launches"}), l);
    const auto& params = launch.params ? *launch.params : op.params;
    // Without `args`, the launch forwards the interface params in order.
    const size_t n_args = launch.args ? launch.args->size() : params.size();
    const auto gemm = launch.is_extern ? gemm_kind(launch.entry) : std::nullopt;
    const auto nccl = launch.is_extern ? manifest::nccl_extern(launch.entry) : std::nullopt;
    std::string nccl_group;
    if (n_args != params.size() || (!launch.module && !gemm && !nccl)) {
      fail(ErrorKind::Manifest, path, "launch has " + std::to_string(params.size()) +
                                          " params but " + std::to_string(n_args) + " args");
      return;
    }
    static const std::map<std::string, Region> kNoScratch;
    auto sc = alloc.scratch.find(op_name);
    const auto& scratch = sc == alloc.scratch.end() ? kNoScratch : sc->second;

    LaunchPlan plan;
    plan.path = path;
    plan.call = call_path;
    plan.block = launch.block;
    plan.cluster = launch.cluster;
    plan.pdl = launch.pdl.value_or(false);
    bool ok = true;
    for (size_t d = 0; d < 3; ++d) {
      auto g = compile(launch.grid[d], json_pointer_append(path + "/grid", d));
      if (!g) { ok = false; continue; }
      plan.grid[d] = std::move(*g);
    }
    if (launch.shared_mem) {
      auto s = compile(*launch.shared_mem, path + "/shared_mem");
      if (!s) ok = false; else plan.shared_mem = std::move(*s);
    }

    FunctionKey key{launch.module.value_or(""), launch.entry, {}};
    std::vector<uint64_t> pointer_bytes(n_args, 0);  // for the GEMM bounds
    for (size_t a = 0; a < n_args; ++a) {
      const std::string arg_path = json_pointer_append(path + "/args", a);
      const uint32_t size = params[a].size_bytes();
      key.param_sizes.push_back(size);
      LaunchArgPlan ap;
      ap.size = size;
      if (!launch.args) {
        if (a >= iface.size()) {
          fail(ErrorKind::Manifest, arg_path, "param " + std::to_string(a) +
                                                  " is not in the op's interface");
          ok = false;
        } else {
          ap.value = iface[a].value;
          ap.buffer = iface[a].buffer;
          ap.offset = iface[a].offset;
          pointer_bytes[a] = iface[a].region.bytes;
        }
        plan.args.push_back(std::move(ap));
        continue;
      }
      std::visit(
          [&](const auto& src) {
            using T = std::decay_t<decltype(src)>;
            if constexpr (std::is_same_v<T, manifest::ParamRef>) {
              if (src.index >= iface.size()) {
                fail(ErrorKind::Manifest, arg_path, "param " + std::to_string(src.index) +
                                                        " is not in the op's interface");
                ok = false;
                return;
              }
              ap.value = iface[src.index].value;
              ap.buffer = iface[src.index].buffer;
              ap.offset = iface[src.index].offset;
              pointer_bytes[a] = iface[src.index].region.bytes;
            } else if constexpr (std::is_same_v<T, manifest::ScratchRef>) {
              auto it = scratch.find(src.name);
              if (it == scratch.end()) {
                fail(ErrorKind::Manifest, arg_path, "unknown scratch `" + src.name + "`");
                ok = false;
                return;
              }
              ap.value = Value::fixed(it->second.address);
              pointer_bytes[a] = it->second.bytes;
            } else if constexpr (std::is_same_v<T, manifest::RankRef>) {
              auto r = rank_of(src.group, arg_path);
              if (!r) { ok = false; return; }
              ap.value = Value::fixed(*r);
              if (nccl) nccl_group = src.group;
            } else if constexpr (std::is_same_v<T, manifest::Pack>) {
              PackContext ctx;
              ctx.interface = &iface;
              ctx.interface_types = &op.params;
              ctx.scratch = &scratch;
              ctx.vars = &out.vars;
              ctx.encoder = &encoder;
              ctx.ranks = &ranks;
              ctx.path = arg_path + "/pack";
              ctx.call = call_path;
              auto pp = build_pack_plan(src, ctx);
              if (!pp) {
                errors.insert(errors.end(), pp.errors.begin(), pp.errors.end());
                ok = false;
                return;
              }
              ap.is_pack = true;
              ap.pack = static_cast<uint32_t>(plan.packs.size());
              plan.packs.push_back(std::move(*pp.value));
            } else {
              ap.value = Value::fixed(literal_bits(src));
            }
          },
          (*launch.args)[a]);
      plan.args.push_back(std::move(ap));
    }
    if (!ok) return;
    if (nccl) {
      if (auto np = check_nccl(*nccl, nccl_group, plan, pointer_bytes, path)) {
        plan.nccl = std::move(*np);
        for (const auto& a : plan.args) {
          if (a.value.dynamic) a.value.expr.mark_reads(&program->reads);
        }
        program->launches.push_back(std::move(plan));
      }
      return;
    }
    if (gemm) {
      GemmArgs g{params, pointer_bytes, {}};
      for (const auto& a : plan.args) {
        uint64_t v = 0;
        if (!a.is_pack && !a.value.eval(out.vars.max.data(), &v)) v = UINT64_MAX;
        g.at_max.push_back(v);
      }
      Errors bad = check_gemm(*gemm, g, path);
      if (!bad.empty()) {
        errors.insert(errors.end(), bad.begin(), bad.end());
        return;
      }
      plan.gemm = gemm;
      for (const auto& a : plan.args) {
        if (a.value.dynamic) a.value.expr.mark_reads(&program->reads);
      }
      program->launches.push_back(std::move(plan));
      return;
    }

    auto [it, inserted] = function_index.emplace(key, static_cast<uint32_t>(out.functions.size()));
    if (inserted) {
      out.functions.push_back(key);
      out.shared_mem_max.push_back(0);
      out.function_paths.push_back(path);
      out.cluster_max.push_back(0);
    }
    plan.function = it->second;
    if (plan.cluster) {
      const uint32_t blocks = (*plan.cluster)[0] * (*plan.cluster)[1] * (*plan.cluster)[2];
      out.cluster_max[plan.function] = std::max(out.cluster_max[plan.function], blocks);
    }
    uint64_t smem = 0;
    if (plan.shared_mem.eval(out.vars.max.data(), &smem) &&
        smem > out.shared_mem_max[plan.function]) {
      out.shared_mem_max[plan.function] = smem;
    }

    for (const auto& g : plan.grid) {
      if (g.dynamic) g.expr.mark_reads(&program->reads);
    }
    if (plan.shared_mem.dynamic) plan.shared_mem.expr.mark_reads(&program->reads);
    for (const auto& a : plan.args) {
      if (!a.is_pack && a.value.dynamic) a.value.expr.mark_reads(&program->reads);
    }
    for (const auto& p : plan.packs) p.mark_reads(&program->reads);
    program->launches.push_back(std::move(plan));
  }

  // An NCCL launch's bounds at the var maxima (expressions are monotone): send and recv
  // hold the elements the collective moves for a group of `world` ranks.
  std::optional<NcclPlan> check_nccl(const manifest::NcclExtern& x, const std::string& group,
                                     const LaunchPlan& plan, const std::vector<uint64_t>& bytes,
                                     const std::string& path) {
    if (group.empty() || plan.args.size() != manifest::kNcclArity) {
      fail(ErrorKind::Manifest, path, "an NCCL collective takes [send, recv, count, {\"rank\": g}]");
      return std::nullopt;
    }
    const uint64_t world = m.topology->groups.at(group);
    uint64_t count = 0, send = 0, recv = 0;
    if (!plan.args[manifest::kNcclCount].value.eval(out.vars.max.data(), &count) ||
        !manifest::nccl_elems(x.coll, count, world, &send, &recv) ||
        __builtin_mul_overflow(send, manifest::dtype_size(x.elem), &send) ||
        __builtin_mul_overflow(recv, manifest::dtype_size(x.elem), &recv)) {
      fail(ErrorKind::Manifest, json_pointer_append(path + "/args", manifest::kNcclCount),
           "the element count does not evaluate at the vars' maxima");
      return std::nullopt;
    }
    bool ok = true;
    const char* names[2] = {"send", "receive"};
    const uint64_t need[2] = {send, recv};
    for (uint32_t a = 0; a < 2; ++a) {
      if (bytes[a] >= need[a]) continue;
      fail(ErrorKind::Manifest, json_pointer_append(path + "/args", a),
           std::string("the ") + names[a] + " buffer has " + std::to_string(bytes[a]) +
               " bytes left but `" + manifest::collective_name(x.coll) + "` of " +
               std::to_string(count) + " elements per rank over " + std::to_string(world) +
               " rank(s) needs " + std::to_string(need[a]) + " (vars at their maxima)");
      ok = false;
    }
    if (!ok) return std::nullopt;
    return NcclPlan{x.coll, x.elem, group};
  }

  void lower_program(const std::string& name, const manifest::Program& p) {
    ProgramPlan program;
    program.reads.assign(out.vars.names.size(), false);
    for (size_t c = 0; c < p.calls.size(); ++c) {
      const manifest::Call& call = p.calls[c];
      const std::string call_path = json_pointer_append(ptr({"programs", name, "calls"}), c);
      auto op_it = m.ops.find(call.op);
      if (op_it == m.ops.end()) {
        fail(ErrorKind::Manifest, call_path + "/op", "unknown op `" + call.op + "`");
        continue;
      }
      const manifest::Op& op = op_it->second;
      if (call.args.size() != op.params.size()) {
        fail(ErrorKind::Manifest, call_path + "/args",
             "op `" + call.op + "` takes " + std::to_string(op.params.size()) + " params, got " +
                 std::to_string(call.args.size()) + " args");
        continue;
      }
      std::vector<Slot> iface;
      bool ok = true;
      for (size_t a = 0; a < call.args.size(); ++a) {
        auto s = lower_call_arg(call.args[a], json_pointer_append(call_path + "/args", a));
        if (!s) { ok = false; continue; }
        iface.push_back(std::move(*s));
      }
      if (!ok) continue;
      for (size_t l = 0; l < op.impl.launches.size(); ++l) {
        lower_launch(call.op, op, l, iface, call_path, &program);
      }
    }
    out.programs.emplace(name, std::move(program));
  }
};

}  // namespace

Result<LoweredManifest> lower(const manifest::Manifest& m, const Allocations& allocations,
                              TensorMapEncoder& encoder, const Ranks* ranks) {
  Lowerer lw{m, allocations, encoder, ranks ? *ranks : one_rank_groups(m), {}, {}, {}};
  lw.out.vars = VarTable::from(m);
  for (const auto& [name, region] : allocations.buffers) lw.out.bindable.push_back(name);
  lw.out.buffer_count = lw.out.bindable.size();
  for (const auto& [name, region] : allocations.states) lw.out.bindable.push_back(name);
  for (const auto& [name, p] : m.programs) lw.lower_program(name, p);
  if (!lw.errors.empty()) return Result<LoweredManifest>::fail(std::move(lw.errors));
  return Result<LoweredManifest>::ok(std::move(lw.out));
}

}  // namespace kernrt::rt
