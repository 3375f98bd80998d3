// normalize (§1.7): the generator post-pass. On the strictly read JSON it
//   1. hoists inline `{"cubin": ..., "sha256": ...}` launch artifacts into `modules`
//      (name = file stem, or the repo of an `hf:` ref; `-<sha8>` on a collision with a
//      different hash; the same hash reuses the existing entry),
//   2. drops `block`/`grid`/`shared_mem` from module-less `extern:` launches,
// then parses the result (manifest, or fragment when the text has exactly `modules`
// and `ops`), 3. drops launch `params` equal to the interface and `args` that forward
// the params in order, and writes canonically. It does not fold constant scalars into
// launches (step 2 of kern's pass) and checks no verifier rule.
#include "kernrt/manifest/normalize.hpp"

#include "kernrt/manifest/writer.hpp"
#include "parse_internal.hpp"

namespace kernrt::manifest {

namespace {

using detail::fail;
using detail::Json;

// "kernels/argmax.cubin" -> "argmax"; "hf:org/repo/path/x.cubin@rev" -> "repo".
std::string module_name_for(const std::string& source, const std::string& pointer) {
  std::string name;
  if (source.rfind("hf:", 0) == 0) {
    std::string rest = source.substr(3);
    std::size_t a = rest.find('/');
    std::size_t b = a == std::string::npos ? std::string::npos : rest.find('/', a + 1);
    if (b != std::string::npos) name = rest.substr(a + 1, b - a - 1);
  } else {
    std::size_t slash = source.find_last_of('/');
    name = slash == std::string::npos ? source : source.substr(slash + 1);
    std::size_t dot = name.find('.');
    if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  }
  if (name.empty()) fail(pointer, "cannot derive a module name from `cubin` `" + source + "`");
  return name;
}

void hoist_launch(Json& launch, const std::string& pointer, Json& modules) {
  if (!launch.is_object()) return;
  bool has_cubin = launch.contains("cubin");
  bool has_sha = launch.contains("sha256");
  if (!has_cubin && !has_sha) {
    if (!launch.contains("module") && launch.contains("entry") && launch["entry"].is_string() &&
        launch["entry"].get<std::string>().rfind("extern:", 0) == 0) {
      launch.erase("block");
      launch.erase("grid");
      launch.erase("shared_mem");
    }
    return;
  }
  if (!has_cubin || !has_sha) {
    fail(pointer, std::string("an inline artifact needs both `cubin` and `sha256`, found only `") +
                      (has_cubin ? "cubin" : "sha256") + "`");
  }
  if (launch.contains("module")) {
    fail(json_pointer_append(pointer, "module"), "a launch names both `module` and an inline `cubin`");
  }
  const Json& cubin = launch["cubin"];
  const Json& sha = launch["sha256"];
  if (!cubin.is_string()) fail(json_pointer_append(pointer, "cubin"), "expected a string, found " + detail::describe(cubin));
  if (!sha.is_string()) fail(json_pointer_append(pointer, "sha256"), "expected a string, found " + detail::describe(sha));
  std::string source = cubin.get<std::string>();
  std::string hash = sha.get<std::string>();
  std::string base = module_name_for(source, json_pointer_append(pointer, "cubin"));
  std::string name = base;
  for (int attempt = 0;; ++attempt) {
    auto it = modules.find(name);
    if (it == modules.end()) {
      modules[name] = Json{{"source", source}, {"sha256", hash}};
      break;
    }
    if (it->is_object() && it->contains("sha256") && (*it)["sha256"] == hash) break;  // reuse
    if (attempt == 0) {
      name = base + "-" + hash.substr(0, 8);
    } else {
      name = base + "-" + hash.substr(0, 8) + "-" + std::to_string(attempt + 1);
    }
  }
  launch.erase("cubin");
  launch.erase("sha256");
  launch["module"] = name;
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
    std::string base = json_pointer_append(json_pointer_append("/ops", op.key()), "impl");
    base = json_pointer_append(base, "launches");
    for (std::size_t i = 0; i < launches.size(); ++i) {
      hoist_launch(launches[i], json_pointer_append(base, static_cast<uint64_t>(i)), modules);
    }
  }
}

// kern's "default the identity": params equal to the interface and args that forward
// every launch param in order are the defaults, so they are left out.
void default_identity(std::map<std::string, Op>& ops) {
  for (auto& [name, op] : ops) {
    for (Launch& l : op.impl.launches) {
      if (l.params && *l.params == op.params) l.params.reset();
      if (!l.args) continue;
      const std::vector<ParamType>& abi = l.params ? *l.params : op.params;
      if (l.args->size() != abi.size() || abi.size() != op.params.size()) continue;
      bool forward = true;
      for (std::size_t i = 0; i < l.args->size(); ++i) {
        const auto* p = std::get_if<ParamRef>(&(*l.args)[i]);
        forward = forward && p && p->index == i;
      }
      if (forward && !l.params) l.args.reset();
    }
  }
}

bool is_fragment(const Json& root) {
  return root.is_object() && root.size() == 2 && root.contains("modules") && root.contains("ops");
}

}  // namespace

Result<std::string> normalize(std::string_view text) {
  Result<Json> json = detail::read_json(text);
  if (!json) return Result<std::string>::fail(std::move(json.errors));
  Json& root = *json.value;
  try {
    bool fragment = is_fragment(root) || (root.is_object() && root.size() == 1 && root.contains("ops"));
    hoist(root);
    if (fragment) {
      Fragment f = detail::parse_fragment_json(root);
      default_identity(f.ops);
      return Result<std::string>::ok(write_fragment(f));
    }
    Manifest m = detail::parse_manifest_json(root);
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
