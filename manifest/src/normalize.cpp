// normalize (§1.7): the generator post-pass ("linker") that makes a longhand manifest
// minimal without changing what runs, in kern's order:
//   1. hoist modules: a launch's inline `{"cubin", "sha256"}` becomes a `modules` entry
//      (an existing entry with the same hash is reused, whatever its name; otherwise the
//      name is the `hf:` repo or the file stem without `.cubin` and a `-<sha12>` suffix,
//      plus `-<sha8>` when the name is taken) and the launch keeps `"module": name`;
//   2. fold constants: an interface scalar that every call of an op passes as the same
//      literal leaves the interface and becomes that literal in each launch's wiring
//      (pack fields keep `at`/`width`; other param indices, tensormaps included, are
//      renumbered; launches keep their ABI);
//   3. default the identity: launch `params` equal to the interface and `args` that
//      forward the interface in order are left out;
//   4. `extern:` launches drop `module`, `block`, `grid` and `shared_mem`;
// then writes canonically. Input is manifest or fragment text (a fragment has no calls,
// so nothing folds). It checks no verifier rule: what it cannot rewrite it leaves alone.
#include "kernrt/manifest/normalize.hpp"

#include <regex>
#include <set>

#include "kernrt/manifest/writer.hpp"
#include "parse_internal.hpp"

namespace kernrt::manifest {

namespace {

using detail::fail;
using detail::Json;

// "out/argmax-0123456789ab.cubin" -> "argmax"; "hf:org/repo/path/x.cubin@rev" -> "repo".
std::string module_name_for(const std::string& source, const std::string& pointer) {
  std::string name;
  if (source.rfind("hf:", 0) == 0) {
    std::string rest = source.substr(3, source.find('@') == std::string::npos ? std::string::npos
                                                                                : source.find('@') - 3);
    std::size_t a = rest.find('/');
    if (a != std::string::npos) name = rest.substr(a + 1, rest.find('/', a + 1) - a - 1);
  } else {
    std::size_t slash = source.find_last_of('/');
    name = slash == std::string::npos ? source : source.substr(slash + 1);
    const std::string ext = ".cubin";
    if (name.size() >= ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
      name.resize(name.size() - ext.size());
    } else if (name.find('.') != std::string::npos) {
      name.resize(name.find_last_of('.'));
    }
    static const std::regex kShaSuffix("-[0-9a-f]{12}$");
    name = std::regex_replace(name, kShaSuffix, "");
  }
  if (name.empty()) fail(pointer, "cannot derive a module name from `cubin` `" + source + "`");
  return name;
}

bool is_extern_entry(const Json& launch) {
  auto e = launch.find("entry");
  return e != launch.end() && e->is_string() && e->get<std::string>().rfind("extern:", 0) == 0;
}

void hoist_launch(Json& launch, const std::string& pointer, Json& modules) {
  if (!launch.is_object()) return;
  bool has_cubin = launch.contains("cubin");
  bool has_sha = launch.contains("sha256");
  if (has_cubin != has_sha) {
    fail(pointer, std::string("an inline artifact needs both `cubin` and `sha256`, found only `") +
                      (has_cubin ? "cubin" : "sha256") + "`");
  }
  if (has_cubin) {
    if (launch.contains("module")) {
      fail(json_pointer_append(pointer, "module"), "a launch names both `module` and an inline `cubin`");
    }
    const Json& cubin = launch["cubin"];
    const Json& sha = launch["sha256"];
    if (!cubin.is_string()) fail(json_pointer_append(pointer, "cubin"), "expected a string, found " + detail::describe(cubin));
    if (!sha.is_string()) fail(json_pointer_append(pointer, "sha256"), "expected a string, found " + detail::describe(sha));
    std::string source = cubin.get<std::string>();
    std::string hash = sha.get<std::string>();
    std::string name;
    for (auto it = modules.begin(); it != modules.end() && name.empty(); ++it) {
      auto s = it->find("sha256");
      if (it->is_object() && s != it->end() && *s == hash) name = it.key();
    }
    if (name.empty()) {
      name = module_name_for(source, json_pointer_append(pointer, "cubin"));
      if (modules.contains(name)) name += "-" + hash.substr(0, 8);
      if (modules.contains(name)) {
        fail(json_pointer_append(pointer, "cubin"), "module name `" + name + "` is already taken by another hash");
      }
      modules[name] = Json{{"source", source}, {"sha256", hash}};
    }
    launch.erase("cubin");
    launch.erase("sha256");
    launch["module"] = name;
  }
  if (is_extern_entry(launch)) {
    for (const char* k : {"module", "block", "grid", "shared_mem"}) launch.erase(k);
  }
}

void hoist(Json& root) {
  if (!root.is_object()) return;
  if (!root.contains("modules")) root["modules"] = Json::object();
  Json& modules = root["modules"];
  if (!modules.is_object()) return;  // the typed parse reports it
  auto ops = root.find("ops");
  if (ops == root.end() || !ops->is_object()) return;
  for (auto op = ops->begin(); op != ops->end(); ++op) {
    if (!op->is_object() || !op->contains("impl")) continue;
    Json& impl = (*op)["impl"];
    if (!impl.is_object() || !impl.contains("launches") || !impl["launches"].is_array()) continue;
    Json& launches = impl["launches"];
    std::string base = json_pointer_append(json_pointer_append(json_pointer_append("/ops", op.key()), "impl"), "launches");
    for (std::size_t i = 0; i < launches.size(); ++i) {
      hoist_launch(launches[i], json_pointer_append(base, static_cast<uint64_t>(i)), modules);
    }
  }
}

bool same_literal(const CallArg& a, const CallArg& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<LitI32>(&a)) return x->v == std::get<LitI32>(b).v;
  if (auto* x = std::get_if<LitI64>(&a)) return x->v == std::get<LitI64>(b).v;
  if (auto* x = std::get_if<LitF32>(&a)) return x->v == std::get<LitF32>(b).v;
  if (auto* x = std::get_if<LitU8>(&a)) return x->v == std::get<LitU8>(b).v;
  return false;
}

// Writes the literal a folded call arg becomes into launch wiring or a pack field
// (emplace: no temporary variant, which also keeps gcc's -Wmaybe-uninitialized quiet).
template <class V>
void assign_literal(const CallArg& a, V* out) {
  if (auto* x = std::get_if<LitI32>(&a)) {
    out->template emplace<LitI32>(*x);
  } else if (auto* y = std::get_if<LitI64>(&a)) {
    out->template emplace<LitI64>(*y);
  } else if (auto* z = std::get_if<LitF32>(&a)) {
    out->template emplace<LitF32>(*z);
  } else if (auto* w = std::get_if<LitU8>(&a)) {
    out->template emplace<LitU8>(*w);
  }
}

void fold_op(Op& op, std::vector<Call*>& calls) {
  std::map<uint32_t, CallArg> folded;
  for (uint32_t i = 0; i < op.params.size(); ++i) {
    if (!op.params[i].is_scalar()) continue;
    bool all = true;
    for (Call* c : calls) {
      all = all && c->args.size() == op.params.size() && same_literal(c->args[i], calls[0]->args[i]);
    }
    if (all) folded.emplace(i, calls[0]->args[i]);
  }
  if (folded.empty()) return;
  std::map<uint32_t, uint32_t> renumber;
  std::vector<ParamType> kept;
  for (uint32_t i = 0; i < op.params.size(); ++i) {
    if (folded.count(i)) continue;
    renumber[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(op.params[i]);
  }
  auto renumbered = [&](uint32_t i) { return renumber.count(i) ? renumber[i] : i; };
  for (Launch& l : op.impl.launches) {
    if (!l.params) l.params = op.params;  // the launch keeps its ABI
    if (!l.args) {
      std::vector<LaunchArg> fwd;
      fwd.resize(op.params.size());  // default-constructed alternative: ParamRef{0}
      for (uint32_t i = 0; i < op.params.size(); ++i) std::get<ParamRef>(fwd[i]).index = i;
      l.args = std::move(fwd);
    }
    for (LaunchArg& a : *l.args) {
      if (auto* p = std::get_if<ParamRef>(&a)) {
        if (folded.count(p->index)) {
          assign_literal(folded.at(p->index), &a);
        } else {
          p->index = renumbered(p->index);
        }
      } else if (auto* pack = std::get_if<Pack>(&a)) {
        for (PackField& f : pack->fields) {
          if (auto* fp = std::get_if<ParamRef>(&f.source)) {
            if (folded.count(fp->index)) {
              assign_literal(folded.at(fp->index), &f.source);
            } else {
              fp->index = renumbered(fp->index);
            }
          } else if (auto* tm = std::get_if<TensorMap>(&f.source)) {
            tm->param = renumbered(tm->param);
          }
        }
      }
    }
  }
  op.params = std::move(kept);
  for (Call* c : calls) {
    std::vector<CallArg> args;
    for (uint32_t i = 0; i < c->args.size(); ++i) {
      if (!folded.count(i)) args.push_back(std::move(c->args[i]));
    }
    c->args = std::move(args);
  }
}

void fold_constants(Manifest& m) {
  std::map<std::string, std::vector<Call*>> calls_by_op;
  for (auto& [name, program] : m.programs) {
    for (Call& c : program.calls) calls_by_op[c.op].push_back(&c);
  }
  for (auto& [name, op] : m.ops) {
    auto it = calls_by_op.find(name);
    if (it != calls_by_op.end()) fold_op(op, it->second);
  }
}

void default_identity(std::map<std::string, Op>& ops) {
  for (auto& [name, op] : ops) {
    for (Launch& l : op.impl.launches) {
      if (l.params && *l.params == op.params) l.params.reset();
      if (!l.args || l.args->size() != op.params.size()) continue;
      bool forward = true;
      for (std::size_t i = 0; i < l.args->size(); ++i) {
        const auto* p = std::get_if<ParamRef>(&(*l.args)[i]);
        forward = forward && p && p->index == i;
      }
      if (forward) l.args.reset();
    }
  }
}

bool is_fragment(const Json& root) {
  if (!root.is_object() || root.contains("schema_version")) return false;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() != "modules" && it.key() != "ops") return false;
  }
  return root.contains("ops");
}

}  // namespace

Result<std::string> normalize(std::string_view text) {
  Result<Json> json = detail::read_json(text);
  if (!json) return Result<std::string>::fail(std::move(json.errors));
  Json& root = *json.value;
  try {
    bool fragment = is_fragment(root);
    hoist(root);
    if (fragment) {
      Fragment f = detail::parse_fragment_json(root);
      default_identity(f.ops);
      return Result<std::string>::ok(write_fragment(f));
    }
    Manifest m = detail::parse_manifest_json(root);
    fold_constants(m);
    default_identity(m.ops);
    return Result<std::string>::ok(write_manifest(m));
  } catch (const detail::ParseFailure& f) {
    return Result<std::string>::fail(f.error);
  } catch (const std::exception& e) {
    Error err;
    err.kind = ErrorKind::Parse;
    err.message = std::string("internal normalize error: ") + e.what();
    return Result<std::string>::fail(std::move(err));
  }
}

}  // namespace kernrt::manifest
