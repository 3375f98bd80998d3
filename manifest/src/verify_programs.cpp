// Verifier rules 19-24 (reference/kern-schema.md §2.2): programs, calls, tensormap
// footprints per call, per-program dataflow, global writes and unused declarations.
//
// Deliberately not checked: the bounds of offsets into states the runtime scales
// (`bytes_per_token` / `bytes_per_seq`: provider layout over a pool; only their TMA base
// alignment is; an offset past a fixed `bytes` state is refused, as the runtime would at
// load), which program runs first (a carry only needs *some* writer), and anything a
// kernel does with the pointers it receives.
// Buffers are looked up through one name -> index table so the call loop stays linear in
// calls x args.
#include <string>
#include <string_view>
#include <unordered_map>

#include "verify_context.hpp"

namespace kernrt::manifest::rules {
namespace {

struct BufferSlot {
  const std::string* name = nullptr;
  const Buffer* buffer = nullptr;
  std::optional<uint64_t> size;  // bytes at var maxima, when rule 5 could size it
  bool initially_written = false;
  bool used = false;
  bool written_somewhere = false;
};

struct ProgramScan {
  std::vector<BufferSlot> slots;
  std::unordered_map<std::string_view, size_t> index;
  std::set<std::string> used_states;
  std::set<std::string> used_ops;
  std::set<std::string> ops_with_extern;  // found once, not per call
};

std::string arg_text(const CallArg& a) {
  if (auto* b = std::get_if<BufArg>(&a)) return "buffer " + tick(b->name);
  if (auto* s = std::get_if<StateArg>(&a)) return "state " + tick(s->name);
  if (auto* v = std::get_if<VarRef>(&a)) return "var " + tick(v->name);
  if (std::holds_alternative<Expr>(a)) return "an expression";
  if (auto* l = std::get_if<LitI32>(&a)) return "i32 literal " + std::to_string(l->v);
  if (auto* l = std::get_if<LitI64>(&a)) return "i64 literal " + std::to_string(l->v);
  if (std::holds_alternative<LitF32>(a)) return "an f32 literal";
  if (auto* l = std::get_if<LitU8>(&a)) return "u8 literal " + std::to_string(l->v);
  if (auto* r = std::get_if<RankRef>(&a)) return "rank in group " + tick(r->group);
  return "an argument";
}

void check_batch(VerifyContext& c, const std::string& pp, const Program& p) {
  if (p.once.value_or(false) && p.batch) {
    c.fail(ptr(pp, "once"),
           "`once` (run after load) and `batch` (driven per step) are exclusive");
  }
  if (!p.batch) return;
  const Batch& b = *p.batch;
  const std::string bp = ptr(pp, "batch");
  if (b.groups == 0) c.fail(ptr(bp, "groups"), "batch.groups must be >= 1");
  if (b.rows.kind == Expr::Kind::Var) {
    if (c.vars->count(b.rows.var) != 0) {
      c.used_vars.insert(b.rows.var);
    } else {
      c.fail(ptr(bp, "rows"), "batch.rows names unknown var " + tick(b.rows.var));
    }
  } else if (b.rows.kind == Expr::Kind::Const && b.rows.value == 0) {
    c.fail(ptr(bp, "rows"), "batch.rows must be >= 1");
  }
  if (b.span) {
    if (c.vars->count(*b.span) != 0) {
      c.used_vars.insert(*b.span);
    } else {
      c.fail(ptr(bp, "span"), "batch.span names unknown var " + tick(*b.span));
    }
  }
}

void check_buf_arg(VerifyContext& c, ProgramScan& s, std::vector<char>& written,
                   const Call& call, bool has_extern, size_t j, const BufArg& a,
                   const ParamType& param, const std::string& ap) {
  auto found = s.index.find(a.name);
  if (found == s.index.end()) {
    c.fail(ap, "unknown buffer " + tick(a.name));
    return;
  }
  BufferSlot& slot = s.slots[found->second];
  slot.used = true;
  const Buffer& b = *slot.buffer;
  const uint64_t offset = a.offset.value_or(0);
  if (b.dtype != param.dtype) {
    c.fail(ap, "buffer " + tick(a.name) + " has dtype " + to_string(b.dtype) +
                   " but param expects " + to_string(param.dtype));
  }
  if (offset > 0) {
    const uint32_t elem = dtype_size(b.dtype);
    if (offset % elem != 0) {
      c.fail(ptr(ap, "offset"), "offset " + std::to_string(offset) + " into buffer " +
                                    tick(a.name) + " is not " + std::to_string(elem) +
                                    "-aligned for " + to_string(b.dtype));
    }
    if (slot.size && offset >= *slot.size) {
      c.fail(ptr(ap, "offset"), "offset " + std::to_string(offset) + " is outside buffer " +
                                    tick(a.name) + " (" + std::to_string(*slot.size) +
                                    " bytes at var upper bounds)");
    }
  }
  if (reads(param.dir) && !written[found->second]) {
    c.fail(ap, "buffer " + tick(a.name) + " is read before ever being written");
  }
  // 21. tensormap footprint per call (the largest per param; see TensorMapBounds)
  auto tms = c.op_tensormaps.find(call.op);
  if (tms != c.op_tensormaps.end() && j < tms->second.size() && slot.size) {
    const uint64_t avail = *slot.size > offset ? *slot.size - offset : 0;
    const TensorMapBounds& t = tms->second[j];
    if (t.align != 0 && offset % t.align != 0) {
      c.fail(ptr(ap, "offset"), "offset " + std::to_string(offset) + " into buffer " + tick(a.name) +
                                    " is not " + std::to_string(t.align) +
                                    "-byte aligned, but the tensormap at " + t.align_path +
                                    " needs an aligned base (TMA)");
    }
    if (t.full.any && t.full.footprint > avail) {
      c.fail(ap, "the tensormap at " + t.full.path + " addresses " +
                     std::to_string(t.full.footprint) + " bytes but buffer " + tick(a.name) +
                     " has " + std::to_string(avail) + " bytes past offset " +
                     std::to_string(offset) + " at var upper bounds");
    }
    if (t.inner.any && t.inner.footprint > avail) {
      c.fail(ap, "the spanning tensormap at " + t.inner.path + " needs " +
                     std::to_string(t.inner.footprint) + " bytes for its inner dims but buffer " +
                     tick(a.name) + " has " + std::to_string(avail) + " bytes past offset " +
                     std::to_string(offset) + " at var upper bounds");
    } else if (t.inner.any && t.min_stride != 0 &&
               (avail - t.inner.footprint) / t.min_stride + 1 > kMaxTmaDim) {
      // The runtime spans the buffer with (bytes left - inner) / stride + 1 rows at load.
      c.fail(ap, "the spanning tensormap at " + t.stride_path + " would span " +
                     std::to_string((avail - t.inner.footprint) / t.min_stride + 1) +
                     " rows of buffer " + tick(a.name) + ", more than the TMA limit of 2^32");
    }
  }
  // 22. dataflow
  if (b.kind == BufferKind::peer && has_extern) {
    c.fail(ap, "peer buffer " + tick(a.name) + " passed to op " + tick(call.op) +
                   ", which has an extern launch; runtime built-ins never receive peer memory");
  }
  if (writes(param.dir)) {
    if (b.kind == BufferKind::input || b.kind == BufferKind::weight ||
        b.kind == BufferKind::peer) {
      c.fail(ap, std::string("op writes to read-only ") + to_string(b.kind) + " buffer " +
                     tick(a.name));
    }
    written[found->second] = 1;
    slot.written_somewhere = true;
  }
}

void check_scalar_arg(VerifyContext& c, const CallArg& arg, const ParamType& param,
                      const std::string& ap) {
  if (auto* v = std::get_if<VarRef>(&arg)) {
    c.used_vars.insert(v->name);
    auto it = c.vars->find(v->name);
    if (it == c.vars->end()) {
      c.fail(ap, "unknown var " + tick(v->name));
    } else if (param.kind == ParamType::Kind::F32) {
      c.fail(ap, "var " + tick(v->name) + " cannot bind to an f32 param");
    } else if (!scalar_fits(param.kind, it->second.max)) {
      c.fail(ap, "var " + tick(v->name) + " max " + std::to_string(it->second.max) +
                     " exceeds " + scalar_name(param.kind) + " range");
    }
  } else if (auto* e = std::get_if<Expr>(&arg)) {
    const bool clean = c.check_expr(*e, ap);
    if (param.kind == ParamType::Kind::F32) {
      c.fail(ap, "an expression cannot bind to an f32 param");
    } else if (clean) {
      auto reach = c.eval_max_checked(*e, ap, "expression");
      if (reach && !scalar_fits(param.kind, *reach)) {
        c.fail(ap, "expression " + expr_text(*e) + " reaches " + std::to_string(*reach) +
                       " at var upper bounds" + c.vars_at_max_text(*e) + ", exceeding " +
                       scalar_name(param.kind) + " range");
      }
    }
  } else if (auto* r = std::get_if<RankRef>(&arg)) {
    if (param.kind == ParamType::Kind::I32 || param.kind == ParamType::Kind::I64) {
      c.group(r->group, ptr(ap, "rank"));
    } else {
      c.fail(ap, arg_text(arg) + " does not match param " + tick(param.to_string()));
    }
  } else {
    const bool match =
        (std::holds_alternative<LitI32>(arg) && param.kind == ParamType::Kind::I32) ||
        (std::holds_alternative<LitI64>(arg) && param.kind == ParamType::Kind::I64) ||
        (std::holds_alternative<LitF32>(arg) && param.kind == ParamType::Kind::F32) ||
        (std::holds_alternative<LitU8>(arg) && param.kind == ParamType::Kind::U8);
    if (!match) c.fail(ap, arg_text(arg) + " does not match param " + tick(param.to_string()));
  }
}

void check_call(VerifyContext& c, const Manifest& m, ProgramScan& s, std::vector<char>& written,
                const Call& call, const std::string& cp) {
  auto found = m.ops.find(call.op);
  if (found == m.ops.end()) {
    c.fail(ptr(cp, "op"), "unknown op " + tick(call.op));
    return;
  }
  s.used_ops.insert(call.op);
  const Op& op = found->second;
  const bool has_extern = s.ops_with_extern.count(call.op) != 0;
  if (call.args.size() != op.params.size()) {
    c.fail(ptr(cp, "args"), "op " + tick(call.op) + " takes " + std::to_string(op.params.size()) +
                                " params, got " + std::to_string(call.args.size()) + " args");
    return;
  }
  for (size_t j = 0; j < call.args.size(); ++j) {
    const CallArg& arg = call.args[j];
    const ParamType& param = op.params[j];
    const std::string ap = ptr(ptr(cp, "args"), j);
    if (auto* b = std::get_if<BufArg>(&arg)) {
      if (param.kind == ParamType::Kind::Buffer) {
        check_buf_arg(c, s, written, call, has_extern, j, *b, param, ap);
        continue;
      }
      // Marked used anyway so one mismatch does not also report an unused buffer.
      auto named = s.index.find(b->name);
      if (named != s.index.end()) s.slots[named->second].used = true;
    } else if (auto* st = std::get_if<StateArg>(&arg)) {
      s.used_states.insert(st->name);
      if (param.kind == ParamType::Kind::State) {
        auto state = m.states.find(st->name);
        const uint64_t offset = st->offset.value_or(0);
        if (state == m.states.end()) {
          c.fail(ap, "unknown state " + tick(st->name));
        } else if (state->second.bytes != 0 && offset > state->second.bytes) {
          // A fixed-size state is not scaled by the runtime, so the manifest alone proves
          // what the runtime would refuse at load.
          c.fail(ptr(ap, "offset"), "offset " + std::to_string(offset) + " is outside state " +
                                        tick(st->name) + " (a fixed " +
                                        std::to_string(state->second.bytes) + " bytes)");
        }
        // Offsets into states the runtime scales are provider layout and not bounds-checked,
        // but a tensormap over a state needs an aligned base, which only the offset decides
        // (rule 21's TMA part).
        auto tms = c.op_tensormaps.find(call.op);
        if (tms != c.op_tensormaps.end() && j < tms->second.size() && tms->second[j].align != 0 &&
            offset % tms->second[j].align != 0) {
          c.fail(ptr(ap, "offset"), "offset " + std::to_string(offset) + " into state " +
                                        tick(st->name) + " is not " +
                                        std::to_string(tms->second[j].align) +
                                        "-byte aligned, but the tensormap at " +
                                        tms->second[j].align_path + " needs an aligned base (TMA)");
        }
        continue;
      }
    } else if (param.is_scalar()) {
      check_scalar_arg(c, arg, param, ap);
      continue;
    }
    c.fail(ap, arg_text(arg) + " does not match param " + tick(param.to_string()));
  }
}

void check_unused(VerifyContext& c, const Manifest& m, const ProgramScan& s) {
  for (const BufferSlot& slot : s.slots) {
    if (!slot.used) {
      c.fail(ptr("/buffers", *slot.name), "buffer " + tick(*slot.name) +
                                              " is never used by any program");
    }
  }
  for (const auto& entry : m.ops) {
    if (s.used_ops.count(entry.first) == 0) {
      c.fail(ptr("/ops", entry.first), "op " + tick(entry.first) + " is never called");
    }
  }
  check_unused_modules(c);
  for (const auto& entry : m.states) {
    if (s.used_states.count(entry.first) == 0) {
      c.fail(ptr("/states", entry.first), "state " + tick(entry.first) +
                                              " is never used by any program");
    }
  }
  for (const auto& entry : m.vars) {
    if (c.used_vars.count(entry.first) == 0) {
      c.fail(ptr("/vars", entry.first), "var " + tick(entry.first) + " is never used");
    }
  }
  if (!m.topology) return;
  for (const auto& entry : m.topology->groups) {
    if (c.used_groups.count(entry.first) == 0) {
      c.fail(ptr("/topology/groups", entry.first),
             "topology group " + tick(entry.first) +
                 " is never used (no peer buffer or rank arg names it)");
    }
  }
}

}  // namespace

void check_programs(VerifyContext& c, const Manifest& m) {
  ProgramScan s;
  s.slots.reserve(m.buffers.size());
  s.index.reserve(m.buffers.size());
  for (const auto& [name, b] : m.buffers) {
    BufferSlot slot;
    slot.name = &name;
    slot.buffer = &b;
    auto size = c.buffer_sizes.find(name);
    if (size != c.buffer_sizes.end()) slot.size = size->second;
    // Carries hold another program's output and peers are filled at import, so
    // per-program dataflow starts with them written, like inputs and weights.
    slot.initially_written = b.kind == BufferKind::input || b.kind == BufferKind::weight ||
                             b.kind == BufferKind::carry || b.kind == BufferKind::peer;
    s.index.emplace(name, s.slots.size());
    s.slots.push_back(slot);
  }
  for (const auto& [oname, op] : m.ops) {
    for (const Launch& l : op.impl.launches) {
      if (!l.module) {
        s.ops_with_extern.insert(oname);
        break;
      }
    }
  }
  // A peer buffer's `of` counts as a use of its target (rule 24).
  for (const auto& entry : m.buffers) {
    const Buffer& b = entry.second;
    if (b.kind != BufferKind::peer || !b.of || *b.of == entry.first) continue;
    auto target = s.index.find(*b.of);
    if (target != s.index.end()) {
      s.slots[target->second].used = true;
    } else if (m.states.count(*b.of) != 0) {
      s.used_states.insert(*b.of);
    }
  }
  // 19. programs
  if (m.programs.empty()) c.fail("/programs", "no programs declared");
  std::vector<char> written(s.slots.size());
  for (const auto& [pname, p] : m.programs) {
    const std::string pp = ptr("/programs", pname);
    check_batch(c, pp, p);
    for (size_t i = 0; i < s.slots.size(); ++i) written[i] = s.slots[i].initially_written;
    const std::string calls = ptr(pp, "calls");
    for (size_t i = 0; i < p.calls.size(); ++i) {
      check_call(c, m, s, written, p.calls[i], ptr(calls, i));  // 20-22
    }
  }
  // 23. every output and carry is written by some program
  for (const BufferSlot& slot : s.slots) {
    const BufferKind k = slot.buffer->kind;
    if ((k == BufferKind::output || k == BufferKind::carry) && !slot.written_somewhere) {
      c.fail(ptr("/buffers", *slot.name), std::string(to_string(k)) + " buffer " +
                                              tick(*slot.name) +
                                              " is never written by any program");
    }
  }
  check_unused(c, m, s);  // 24
}

}  // namespace kernrt::manifest::rules
