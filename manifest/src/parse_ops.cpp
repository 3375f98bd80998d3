// Typed parsing of ops (§1.9-§1.13): interface params, impl scratch, launches in their
// two forms (kernel: module + geometry; extern: `extern:<name>`, no geometry), launch
// args, packs and tensormaps. An argument object is an untagged union: exactly one form
// key selects the form, then that form's keys are checked strictly. Deliberately
// unchecked here: wiring, arity, pack layout, tensormap shape rules (all verifier rules).
#include "parse_internal.hpp"

namespace kernrt::manifest::detail {

namespace {

constexpr const char* kLaunchArgForms =
    "{param}, {scratch}, {i32}, {i64}, {f32}, {u8}, {rank}, {pack}";
constexpr const char* kFieldSources =
    "{param}, {scratch}, {i32}, {i64}, {f32}, {u8}, {var}, {expr}, {rank}, {tensormap}";

std::array<uint32_t, 3> parse_dim3(const Node& n) {
  std::vector<Node> v = n.items_exactly(3, "u32 dims [x, y, z]");
  return {v[0].u32(), v[1].u32(), v[2].u32()};
}

TensorMap parse_tensormap(const Node& n) {
  n.expect_object("a tensormap");
  n.allow_keys({"param", "dtype", "dims", "strides", "box", "swizzle", "l2_promotion", "oob_nan"});
  TensorMap t;
  t.param = n.at("param").u32();
  Node dtype = n.at("dtype");
  std::string s = dtype.str();
  std::optional<TmaDType> d = parse_tma_dtype(s);
  if (!d) fail(dtype.path(), "unknown tensormap dtype `" + s + "`");
  t.dtype = *d;
  for (const Node& e : n.at("dims").items("u64 dims")) t.dims.push_back(e.u64());
  if (auto v = n.get("strides")) {
    for (const Node& e : v->items("u64 strides")) t.strides.push_back(e.u64());
  }
  for (const Node& e : n.at("box").items("u32 box extents")) t.box.push_back(e.u32());
  if (auto v = n.get("swizzle")) t.swizzle = v->u32();
  if (auto v = n.get("l2_promotion")) t.l2_promotion = v->u32();
  if (auto v = n.get("oob_nan")) t.oob_nan = v->boolean();
  return t;
}

PackField parse_field(const Node& n) {
  std::string form = pick_form(n, {"param", "scratch", "i32", "i64", "f32", "u8", "var", "expr",
                                   "rank", "tensormap"},
                               "pack field source", kFieldSources);
  n.allow_keys({"at", "width", form.c_str()});
  PackField f;
  f.at = n.at("at").u32();
  if (auto v = n.get("width")) f.width = v->u32();
  Node src = n.at(form.c_str());
  if (form == "param") {
    f.source = ParamRef{src.u32()};
  } else if (form == "scratch") {
    f.source = ScratchRef{src.str()};
  } else if (form == "i32") {
    f.source = LitI32{src.i32()};
  } else if (form == "i64") {
    f.source = LitI64{src.i64()};
  } else if (form == "f32") {
    f.source = LitF32{src.f32()};
  } else if (form == "u8") {
    f.source = LitU8{src.u8()};
  } else if (form == "var") {
    f.source = VarRef{src.str()};
  } else if (form == "expr") {
    f.source = parse_expr(src);
  } else if (form == "rank") {
    f.source = RankRef{src.str()};
  } else {
    f.source = parse_tensormap(src);
  }
  return f;
}

Pack parse_pack(const Node& n) {
  n.expect_object("a pack");
  n.allow_keys({"size", "fields"});
  Pack p;
  p.size = n.at("size").u32();
  for (const Node& f : n.at("fields").items("pack fields")) p.fields.push_back(parse_field(f));
  return p;
}

LaunchArg parse_launch_arg(const Node& n) {
  std::string form = pick_form(n, {"param", "scratch", "i32", "i64", "f32", "u8", "rank", "pack"},
                               "launch arg", kLaunchArgForms);
  n.allow_keys({form.c_str()});
  Node v = n.at(form.c_str());
  if (form == "param") return ParamRef{v.u32()};
  if (form == "scratch") return ScratchRef{v.str()};
  if (form == "i32") return LitI32{v.i32()};
  if (form == "i64") return LitI64{v.i64()};
  if (form == "f32") return LitF32{v.f32()};
  if (form == "u8") return LitU8{v.u8()};
  if (form == "rank") return RankRef{v.str()};
  return parse_pack(v);
}

Launch parse_launch(const Node& n) {
  n.expect_object("a launch");
  Launch l;
  for (const char* key : {"cubin", "sha256"}) {
    if (n.has(key)) {
      fail(json_pointer_append(n.path(), key),
           std::string("inline `") + key + "` is the generator form of a launch; normalize hoists it "
               "into `modules` and leaves `\"module\": name`");
    }
  }
  if (!n.has("module")) {
    // The extern form: geometry without a module matches neither launch form.
    for (const char* key : {"block", "grid", "shared_mem", "cluster", "pdl"}) {
      if (n.has(key)) {
        fail(json_pointer_append(n.path(), key),
             std::string("launch geometry `") + key +
                 "` without a `module`: a kernel launch needs a `module`, an extern launch "
                 "(`extern:<name>`) takes no geometry");
      }
    }
    n.allow_keys({"entry", "params", "args"});
  } else {
    n.allow_keys({"module", "entry", "params", "block", "grid", "shared_mem", "cluster", "pdl",
                  "args"});
    l.module = n.at("module").str();
  }
  l.entry = n.at("entry").str();
  l.is_extern = !l.module && l.entry.rfind("extern:", 0) == 0;
  if (auto v = n.get("params")) l.params = parse_params(*v);
  if (l.module) {
    l.block = parse_dim3(n.at("block"));
    std::vector<Node> g = n.at("grid").items_exactly(3, "grid expressions [x, y, z]");
    l.grid = {parse_expr(g[0]), parse_expr(g[1]), parse_expr(g[2])};
    if (auto v = n.get("shared_mem")) l.shared_mem = parse_expr(*v);
    if (auto v = n.get("cluster")) l.cluster = parse_dim3(*v);
    if (auto v = n.get("pdl")) l.pdl = v->boolean();
  }
  if (auto v = n.get("args")) {
    std::vector<LaunchArg> args;
    for (const Node& a : v->items("launch args")) args.push_back(parse_launch_arg(a));
    l.args = std::move(args);
  }
  return l;
}

Scratch parse_scratch(const Node& n) {
  n.expect_object("a scratch buffer");
  n.allow_keys({"dtype", "shape"});
  Scratch s;
  s.dtype = parse_dtype_at(n.at("dtype"));
  s.shape = parse_shape(n.at("shape"));
  return s;
}

}  // namespace

Op parse_op(const Node& n) {
  n.expect_object("an op");
  n.allow_keys({"params", "impl"});
  Op op;
  op.params = parse_params(n.at("params"));
  Node impl = n.at("impl");
  impl.expect_object("an impl");
  impl.allow_keys({"scratch", "launches"});
  if (auto s = impl.get("scratch")) {
    std::map<std::string, Scratch> scratch;
    for (auto& [name, v] : s->entries("scratch buffers")) scratch.emplace(name, parse_scratch(v));
    op.impl.scratch = std::move(scratch);
  }
  for (const Node& l : impl.at("launches").items("launches")) {
    op.impl.launches.push_back(parse_launch(l));
  }
  return op;
}

}  // namespace kernrt::manifest::detail
