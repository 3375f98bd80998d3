// The canonical writer: keys in a fixed order (the wire order of kern's types), names
// sorted (std::map), absent optionals and empty defaulted tables left out, output in
// the seed's layout (json.dumps(indent=1): one-space indent, ": " separators) with a
// final newline. parse -> write -> parse -> write is byte-identical. It writes what it
// is given: an unverified model is written as is, nothing here checks a rule.
#include "kernrt/manifest/writer.hpp"

#include <nlohmann/json.hpp>

namespace kernrt::manifest {

namespace {

using OJson = nlohmann::ordered_json;

OJson expr_json(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Const: return OJson(e.value);
    case Expr::Kind::Var: return OJson(e.var);
    case Expr::Kind::CeilDiv:
    case Expr::Kind::Mul: {
      OJson o = OJson::object();
      OJson lhs = e.lhs ? expr_json(*e.lhs) : OJson(0u);
      o[e.kind == Expr::Kind::CeilDiv ? "ceil_div" : "mul"] = OJson::array({lhs, OJson(e.value)});
      return o;
    }
  }
  return OJson(nullptr);
}

OJson shape_json(const std::vector<Expr>& shape) {
  OJson a = OJson::array();
  for (const Expr& e : shape) a.push_back(expr_json(e));
  return a;
}

OJson dim3_json(const std::array<uint32_t, 3>& d) { return OJson::array({d[0], d[1], d[2]}); }

OJson bound_json(const Bound& b) {
  switch (b.kind) {
    case Bound::Kind::Int: return OJson(b.i);
    case Bound::Kind::Float: return OJson(b.f);
    case Bound::Kind::Expr: return expr_json(b.expr);
  }
  return OJson(nullptr);
}

OJson buffer_json(const Buffer& b) {
  OJson o = OJson::object();
  o["dtype"] = to_string(b.dtype);
  o["shape"] = shape_json(b.shape);
  o["kind"] = to_string(b.kind);
  if (b.fill) o["fill"] = to_string(*b.fill);
  if (b.domain) {
    const Domain& d = *b.domain;
    OJson dj = OJson::object();
    if (d.min) dj["min"] = bound_json(*d.min);
    if (d.max) dj["max"] = bound_json(*d.max);
    if (d.index_into) dj["index_into"] = *d.index_into;
    if (d.stride) dj["stride"] = *d.stride;
    if (d.monotone) dj["monotone"] = *d.monotone;
    o["domain"] = std::move(dj);
  }
  if (b.export_) o["export"] = *b.export_;
  if (b.of) o["of"] = *b.of;
  if (b.group) o["group"] = *b.group;
  return o;
}

OJson params_json(const std::vector<ParamType>& params) {
  OJson a = OJson::array();
  for (const ParamType& p : params) a.push_back(p.to_string());
  return a;
}

OJson tensormap_json(const TensorMap& t) {
  OJson o = OJson::object();
  o["param"] = t.param;
  o["dtype"] = to_string(t.dtype);
  o["dims"] = t.dims;
  if (!t.strides.empty()) o["strides"] = t.strides;
  o["box"] = t.box;
  if (t.swizzle) o["swizzle"] = *t.swizzle;
  if (t.l2_promotion) o["l2_promotion"] = *t.l2_promotion;
  if (t.oob_nan) o["oob_nan"] = *t.oob_nan;
  return o;
}

// The one-key objects shared by launch args, pack fields and call args.
struct SourceJson {
  OJson* out;
  void operator()(const ParamRef& v) const { (*out)["param"] = v.index; }
  void operator()(const ScratchRef& v) const { (*out)["scratch"] = v.name; }
  void operator()(const LitI32& v) const { (*out)["i32"] = v.v; }
  void operator()(const LitI64& v) const { (*out)["i64"] = v.v; }
  void operator()(const LitF32& v) const { (*out)["f32"] = v.v; }
  void operator()(const LitU8& v) const { (*out)["u8"] = v.v; }
  void operator()(const VarRef& v) const { (*out)["var"] = v.name; }
  void operator()(const Expr& v) const { (*out)["expr"] = expr_json(v); }
  void operator()(const RankRef& v) const { (*out)["rank"] = v.group; }
  void operator()(const TensorMap& v) const { (*out)["tensormap"] = tensormap_json(v); }
  void operator()(const Pack& p) const {
    OJson pj = OJson::object();
    pj["size"] = p.size;
    OJson fields = OJson::array();
    for (const PackField& f : p.fields) {
      OJson fj = OJson::object();
      fj["at"] = f.at;
      if (f.width) fj["width"] = *f.width;
      std::visit(SourceJson{&fj}, f.source);
      fields.push_back(std::move(fj));
    }
    pj["fields"] = std::move(fields);
    (*out)["pack"] = std::move(pj);
  }
  void operator()(const BufArg& v) const {
    (*out)["buf"] = v.name;
    if (v.offset) (*out)["offset"] = *v.offset;
  }
  void operator()(const StateArg& v) const {
    (*out)["state"] = v.name;
    if (v.offset) (*out)["offset"] = *v.offset;
  }
};

OJson launch_json(const Launch& l) {
  OJson o = OJson::object();
  if (l.module) o["module"] = *l.module;
  o["entry"] = l.entry;
  if (l.params) o["params"] = params_json(*l.params);
  if (l.module) {
    o["block"] = dim3_json(l.block);
    o["grid"] = OJson::array({expr_json(l.grid[0]), expr_json(l.grid[1]), expr_json(l.grid[2])});
    if (l.shared_mem) o["shared_mem"] = expr_json(*l.shared_mem);
    if (l.cluster) o["cluster"] = dim3_json(*l.cluster);
    if (l.pdl) o["pdl"] = *l.pdl;
  }
  if (l.args) {
    OJson args = OJson::array();
    for (const LaunchArg& a : *l.args) {
      OJson aj = OJson::object();
      std::visit(SourceJson{&aj}, a);
      args.push_back(std::move(aj));
    }
    o["args"] = std::move(args);
  }
  return o;
}

OJson op_json(const Op& op) {
  OJson o = OJson::object();
  o["params"] = params_json(op.params);
  OJson impl = OJson::object();
  if (op.impl.scratch) {
    OJson scratch = OJson::object();
    for (const auto& [name, s] : *op.impl.scratch) {
      OJson sj = OJson::object();
      sj["dtype"] = to_string(s.dtype);
      sj["shape"] = shape_json(s.shape);
      scratch[name] = std::move(sj);
    }
    impl["scratch"] = std::move(scratch);
  }
  OJson launches = OJson::array();
  for (const Launch& l : op.impl.launches) launches.push_back(launch_json(l));
  impl["launches"] = std::move(launches);
  o["impl"] = std::move(impl);
  return o;
}

OJson call_json(const Call& c) {
  OJson o = OJson::object();
  if (c.label) o["label"] = *c.label;
  o["op"] = c.op;
  OJson args = OJson::array();
  for (const CallArg& a : c.args) {
    OJson aj = OJson::object();
    std::visit(SourceJson{&aj}, a);
    args.push_back(std::move(aj));
  }
  o["args"] = std::move(args);
  return o;
}

OJson program_json(const Program& p) {
  OJson o = OJson::object();
  if (p.batch) {
    OJson b = OJson::object();
    b["groups"] = p.batch->groups;
    b["rows"] = expr_json(p.batch->rows);
    if (p.batch->span) b["span"] = *p.batch->span;
    o["batch"] = std::move(b);
  }
  if (p.once) o["once"] = *p.once;
  OJson calls = OJson::array();
  for (const Call& c : p.calls) calls.push_back(call_json(c));
  o["calls"] = std::move(calls);
  return o;
}

OJson modules_json(const std::map<std::string, Module>& modules) {
  OJson o = OJson::object();
  for (const auto& [name, m] : modules) {
    OJson mj = OJson::object();
    mj["source"] = m.source;
    mj["sha256"] = m.sha256;
    o[name] = std::move(mj);
  }
  return o;
}

OJson ops_json(const std::map<std::string, Op>& ops) {
  OJson o = OJson::object();
  for (const auto& [name, op] : ops) o[name] = op_json(op);
  return o;
}

std::string dump(const OJson& j) {
  // `replace` keeps the writer total even for a model built in code with bad UTF-8.
  return j.dump(1, ' ', false, OJson::error_handler_t::replace) + "\n";
}

}  // namespace

std::string write_manifest(const Manifest& m) {
  OJson o = OJson::object();
  o["schema_version"] = m.schema_version;
  o["model"] = m.model;
  if (m.topology) {
    OJson groups = OJson::object();
    for (const auto& [name, size] : m.topology->groups) groups[name] = size;
    OJson t = OJson::object();
    t["groups"] = std::move(groups);
    o["topology"] = std::move(t);
  }
  if (!m.vars.empty()) {
    OJson vars = OJson::object();
    for (const auto& [name, v] : m.vars) vars[name] = OJson{{"max", v.max}};
    o["vars"] = std::move(vars);
  }
  if (!m.states.empty()) {
    OJson states = OJson::object();
    for (const auto& [name, s] : m.states) {
      OJson sj = OJson::object();
      if (s.bytes_per_token) sj["bytes_per_token"] = s.bytes_per_token;
      if (s.bytes) sj["bytes"] = s.bytes;
      if (s.bytes_per_seq) sj["bytes_per_seq"] = s.bytes_per_seq;
      states[name] = std::move(sj);
    }
    o["states"] = std::move(states);
  }
  OJson buffers = OJson::object();
  for (const auto& [name, b] : m.buffers) buffers[name] = buffer_json(b);
  o["buffers"] = std::move(buffers);
  o["modules"] = modules_json(m.modules);
  o["ops"] = ops_json(m.ops);
  OJson programs = OJson::object();
  for (const auto& [name, p] : m.programs) programs[name] = program_json(p);
  o["programs"] = std::move(programs);
  return dump(o);
}

std::string write_fragment(const Fragment& f) {
  OJson o = OJson::object();
  o["modules"] = modules_json(f.modules);
  o["ops"] = ops_json(f.ops);
  return dump(o);
}

std::string write_call(const Call& c) { return dump(call_json(c)); }

}  // namespace kernrt::manifest
