// Typed parsing of a schema-v4 manifest, part 1: the public entry points, the top level,
// vars, states, topology, buffers (shape, kind, fill, domain, export/of/group), modules
// and expressions (§1.1-§1.8, §1.15, §1.16). Ops live in parse_ops.cpp, programs in
// parse_programs.cpp. Deliberately unchecked here: every verifier rule (schema_version
// value, zero extents, unknown var names, exclusive domain forms, sha256 shape, ...).
#include "kernrt/manifest/parse.hpp"

#include <limits>
#include <new>

#include "parse_internal.hpp"

namespace kernrt::manifest {
namespace detail {

std::string pick_form(const Node& n, std::initializer_list<const char*> forms, const char* what,
                      const char* expected) {
  if (!n.is_object()) {
    fail(n.path(), std::string("expected ") + what + " object (one of " + expected + "), found " +
                       describe(n.json()));
  }
  // Walk the object's few keys rather than looking every form up in it.
  const char* found = nullptr;
  int count = 0;
  for (auto it = n.json().begin(); it != n.json().end(); ++it) {
    const std::string& key = it.key();
    for (const char* f : forms) {
      if (key == std::string_view(f)) {
        found = f;
        ++count;
      }
    }
  }
  if (count == 1) return found;
  std::string keys;
  for (const std::string& k : n.keys()) keys += (keys.empty() ? "`" : ", `") + k + "`";
  if (keys.empty()) keys = "no keys";
  fail(n.path(), std::string("data did not match any variant of ") + what + ": found " + keys +
                     "; expected one of " + expected);
}

Expr parse_expr(const Node& raw) {
  Node n = raw.substituted();
  if (n.is_number()) return Expr::constant(n.u64());
  if (n.is_string()) return Expr::variable(n.str());
  if (n.is_object()) {
    n.allow_keys({"ceil_div", "mul"});
    std::string op = pick_form(n, {"ceil_div", "mul"}, "expression", "`ceil_div`, `mul`");
    std::vector<Node> operands = n.at(op.c_str()).items_exactly(2, "operands [expression, constant]");
    Expr lhs = parse_expr(operands[0]);
    uint64_t c = operands[1].u64();
    return op == "ceil_div" ? Expr::ceil_div(std::move(lhs), c) : Expr::mul(std::move(lhs), c);
  }
  fail(n.path(), "expected an expression (a u64, a var name, {\"ceil_div\": [e, c]} or "
                 "{\"mul\": [e, c]}), found " + describe(n.json()));
}

Expr parse_extent(const Node& raw) {
  Node n = raw.substituted();
  if (n.is_number()) return Expr::constant(n.u64());
  if (n.is_string()) return Expr::variable(n.str());
  fail(n.path(), "expected an extent (a u64 or a var name), found " + describe(n.json()));
}

std::vector<Expr> parse_shape(const Node& n) {
  std::vector<Expr> out;
  for (const Node& e : n.items("extents")) out.push_back(parse_extent(e));
  return out;
}

DType parse_dtype_at(const Node& n) {
  std::string s = n.str();
  std::optional<DType> t = parse_dtype(s);
  if (!t) fail(n.path(), "unknown dtype `" + s + "`");
  return *t;
}

std::vector<ParamType> parse_params(const Node& n) {
  std::vector<ParamType> out;
  for (const Node& p : n.items("param type strings")) {
    std::string error;
    std::optional<ParamType> t = parse_param_type(p.str(), &error);
    if (!t) fail(p.path(), error);
    out.push_back(*t);
  }
  return out;
}

namespace {

Var parse_var(const Node& n) {
  n.expect_object("a var");
  n.allow_keys({"max"});
  Var v;
  v.max = n.at("max").u64();
  return v;
}

State parse_state(const Node& n) {
  n.expect_object("a state");
  n.allow_keys({"bytes_per_token", "bytes", "bytes_per_seq"});
  State s;
  if (auto v = n.get("bytes_per_token")) s.bytes_per_token = v->u64();
  if (auto v = n.get("bytes")) s.bytes = v->u64();
  if (auto v = n.get("bytes_per_seq")) s.bytes_per_seq = v->u64();
  return s;
}

Topology parse_topology(const Node& n) {
  n.expect_object("a topology");
  n.allow_keys({"groups"});
  Topology t;
  for (auto& [name, size] : n.at("groups").entries("group sizes")) t.groups[name] = size.u64();
  return t;
}

BufferKind parse_kind(const Node& n) {
  std::string s = n.str();
  for (BufferKind k : {BufferKind::input, BufferKind::output, BufferKind::weight,
                       BufferKind::workspace, BufferKind::carry, BufferKind::peer}) {
    if (s == to_string(k)) return k;
  }
  fail(n.path(), "unknown buffer kind `" + s +
                     "` (expected input, output, weight, workspace, carry or peer)");
}

Fill parse_fill(const Node& n) {
  std::string s = n.str();
  for (Fill f : {Fill::token, Fill::position, Fill::slot, Fill::seq_len, Fill::cu_seqlens,
                 Fill::span_at, Fill::blocks, Fill::tokens, Fill::count, Fill::error}) {
    if (s == to_string(f)) return f;
  }
  fail(n.path(), "unknown fill `" + s + "`");
}

Bound parse_bound(const Node& raw) {
  Node n = raw.substituted();
  const Json& j = n.json();
  Bound b;
  if (j.type() == Json::value_t::number_unsigned) {
    uint64_t v = j.get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      b.kind = Bound::Kind::Int;
      b.i = static_cast<int64_t>(v);
    } else {
      b.kind = Bound::Kind::Expr;  // beyond i64: kept exact as a u64 constant
      b.expr = Expr::constant(v);
    }
    return b;
  }
  if (j.type() == Json::value_t::number_integer) {
    b.kind = Bound::Kind::Int;
    b.i = j.get<int64_t>();
    return b;
  }
  if (j.type() == Json::value_t::number_float) {
    b.kind = Bound::Kind::Float;
    b.f = j.get<double>();
    return b;
  }
  if (j.is_string() || j.is_object()) {
    b.kind = Bound::Kind::Expr;
    b.expr = parse_expr(n);
    return b;
  }
  fail(n.path(), "expected a bound (an integer, a float or an expression), found " + describe(j));
}

Domain parse_domain(const Node& n) {
  n.expect_object("a domain");
  n.allow_keys({"min", "max", "index_into", "stride", "monotone"});
  Domain d;
  if (auto v = n.get("min")) d.min = parse_bound(*v);
  if (auto v = n.get("max")) d.max = parse_bound(*v);
  if (auto v = n.get("index_into")) d.index_into = v->str();
  if (auto v = n.get("stride")) d.stride = v->u64();
  if (auto v = n.get("monotone")) d.monotone = v->boolean();
  return d;
}

Buffer parse_buffer(const Node& n) {
  n.expect_object("a buffer");
  n.allow_keys({"dtype", "shape", "kind", "fill", "domain", "export", "of", "group"});
  Buffer b;
  b.dtype = parse_dtype_at(n.at("dtype"));
  b.shape = parse_shape(n.at("shape"));
  b.kind = parse_kind(n.at("kind"));
  if (auto v = n.get("fill")) b.fill = parse_fill(*v);
  if (auto v = n.get("domain")) b.domain = parse_domain(*v);
  if (auto v = n.get("export")) b.export_ = v->boolean();
  if (auto v = n.get("of")) b.of = v->str();
  if (auto v = n.get("group")) b.group = v->str();
  return b;
}

Module parse_module(const Node& n) {
  n.expect_object("a module");
  n.allow_keys({"source", "sha256"});
  Module m;
  m.source = n.at("source").str();
  m.sha256 = n.at("sha256").str();
  return m;
}

template <class T, class F>
std::map<std::string, T> parse_map(const Node& n, const char* what, F parse_one) {
  std::map<std::string, T> out;
  for (auto& [name, value] : n.entries(what)) {
    out.emplace(name, parse_one(value));
    value.release();  // converted: its DOM is no longer needed
  }
  return out;
}

}  // namespace

Manifest parse_manifest_json(const Json& root) {
  if (!root.is_object()) fail("", "expected a manifest object, found " + describe(root));
  Constants constants = Constants::from_root(root);
  Node n(root, &constants);
  n.allow_keys({"schema_version", "model", "constants", "topology", "vars", "states", "buffers",
                "modules", "ops", "programs"});
  Manifest m;
  // schema_version is the format discriminator: never a constant.
  Node version = n.at("schema_version");
  m.schema_version = version.without_constants().u32();
  m.model = n.at("model").str();
  if (auto v = n.get("topology")) m.topology = parse_topology(*v);
  if (auto v = n.get("vars")) m.vars = parse_map<Var>(*v, "vars", parse_var);
  if (auto v = n.get("states")) m.states = parse_map<State>(*v, "states", parse_state);
  m.buffers = parse_map<Buffer>(n.at("buffers"), "buffers", parse_buffer);
  m.modules = parse_map<Module>(n.at("modules"), "modules", parse_module);
  m.ops = parse_map<Op>(n.at("ops"), "ops", parse_op);
  m.programs = parse_map<Program>(n.at("programs"), "programs", parse_program);
  return m;
}

Fragment parse_fragment_json(const Json& root) {
  if (!root.is_object()) fail("", "expected a fragment object, found " + describe(root));
  Node n(root, nullptr);
  n.allow_keys({"modules", "ops"});
  Fragment f;
  f.modules = parse_map<Module>(n.at("modules"), "modules", parse_module);
  f.ops = parse_map<Op>(n.at("ops"), "ops", parse_op);
  return f;
}

}  // namespace detail

namespace {

template <class T, class F>
Result<T> run_parse(std::string_view text, F parse, std::string* owned = nullptr) {
  Result<detail::Json> json = detail::read_json(text);
  if (owned) std::string().swap(*owned);  // the DOM holds everything from here on
  if (!json) return Result<T>::fail(std::move(json.errors));
  try {
    return Result<T>::ok(parse(*json.value));
  } catch (const detail::ParseFailure& f) {
    return Result<T>::fail(f.error);
  } catch (const std::bad_alloc&) {
    detail::free_without_allocating(*json.value);  // its destructor would allocate
    throw;
  } catch (const std::exception& e) {
    Error err;
    err.kind = ErrorKind::Parse;
    err.message = std::string("internal parse error: ") + e.what();
    return Result<T>::fail(std::move(err));
  }
}

}  // namespace

Result<Manifest> parse_manifest(std::string_view text) {
  return run_parse<Manifest>(text, detail::parse_manifest_json);
}

Result<Manifest> parse_manifest_owned(std::string&& text) {
  return run_parse<Manifest>(text, detail::parse_manifest_json, &text);
}

Result<Fragment> parse_fragment(std::string_view text) {
  return run_parse<Fragment>(text, detail::parse_fragment_json);
}

Result<Call> parse_call(std::string_view text) {
  return run_parse<Call>(text, [](const detail::Json& root) {
    return detail::parse_call(detail::Node(root, nullptr));
  });
}

}  // namespace kernrt::manifest
