// Per-file verification and output of kernrt-verify (see report.hpp).
#include "report.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernrt/manifest/expr.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/protocol.hpp"
#include "kernrt/manifest/registry.hpp"
#include "kernrt/manifest/sha256.hpp"
#include "kernrt/manifest/verify.hpp"

namespace kernrt::verify_tool {
namespace fs = std::filesystem;
using namespace kernrt::manifest;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

// Keeps at most opts.max_errors errors in `r`, counting the rest.
void add_error(FileReport* r, const Options& opts, Error e) {
  if (r->errors.size() < opts.max_errors) {
    r->errors.push_back(std::move(e));
  } else {
    ++r->omitted;
  }
}

// With --cubins: each module's bytes must be a file of DIR or a verified cache blob (the
// runtime looks in the same places); records where each was found.
void check_hashes(const std::map<std::string, Module>& modules, const Options& opts,
                  FileReport* r) {
  if (!opts.cubins_dir) return;
  for (const auto& [name, md] : modules) {
    ModuleOrigin o{name, md.source, "", false};
    auto hit = opts.cubin_files.find(lower(md.sha256));
    if (hit != opts.cubin_files.end()) {
      o.path = hit->second;
    } else if (auto blob = verified_blob(opts.cache_dir, md.sha256)) {
      o.path = *blob;
      o.cached = true;
    }
    r->modules.push_back(o);
    if (!o.path.empty()) continue;
    Error e;
    e.kind = ErrorKind::Artifact;
    e.path = json_pointer_append(json_pointer_append("/modules", shortened(name)), "sha256");
    const std::string cache = opts.cache_dir.empty() ? "" : " or `" + opts.cache_dir + "/blobs`";
    e.message = "module `" + shortened(name) + "` expects sha256 `" + shortened(md.sha256) +
                "`, which no file in `" + *opts.cubins_dir + "`" + cache + " has (" +
                (is_registry_source(md.source)
                     ? "fetch it with `kernrt-fetch MANIFEST`"
                     : "build or copy the artifact there") + ")";
    add_error(r, opts, std::move(e));
  }
}

void collect(const Expr& e, std::set<std::string>* names) {
  std::vector<std::string> vars;
  collect_vars(e, &vars);
  names->insert(vars.begin(), vars.end());
}

}  // namespace

std::map<std::string, Var> fragment_vars(const Fragment& f, const std::map<std::string, Var>& given) {
  std::set<std::string> names;
  for (const auto& entry : f.ops) {
    const Op& op = entry.second;
    if (op.impl.scratch) {
      for (const auto& s : *op.impl.scratch) {
        for (const Expr& d : s.second.shape) collect(d, &names);
      }
    }
    for (const Launch& l : op.impl.launches) {
      for (const Expr& g : l.grid) collect(g, &names);
      if (l.shared_mem) collect(*l.shared_mem, &names);
      if (!l.args) continue;
      for (const LaunchArg& a : *l.args) {
        const auto* pack = std::get_if<Pack>(&a);
        if (pack == nullptr) continue;
        for (const PackField& fl : pack->fields) {
          if (const auto* v = std::get_if<VarRef>(&fl.source)) names.insert(v->name);
          if (const auto* e = std::get_if<Expr>(&fl.source)) collect(*e, &names);
        }
      }
    }
  }
  std::map<std::string, Var> vars;
  for (const std::string& n : names) vars[n].max = 1;
  for (const auto& [n, v] : given) vars[n] = v;
  return vars;
}

FileReport check_file(const std::string& path, const Options& opts) {
  FileReport r;
  r.file = path;
  Result<std::string> text = read_regular_file(path, opts.max_bytes, "--max-bytes");
  if (!text.value) {
    r.verdict = Verdict::io_error;
    r.errors = std::move(text.errors);
    return r;
  }
  VerifyOptions vo;
  vo.max_errors = opts.max_errors;
  if (opts.fragment) {
    Result<Fragment> f = parse_fragment(*text.value);
    text.value.reset();  // the typed model is all that is needed from here on
    if (!f.value) {
      r.verdict = Verdict::rejected;
      r.errors = std::move(f.errors);
      return r;
    }
    r.fragment_vars = fragment_vars(*f.value, opts.fragment_vars);
    r.errors = verify_fragment(*f.value, r.fragment_vars, vo, &r.omitted);
    check_hashes(f.value->modules, opts, &r);
  } else {
    Result<Manifest> m = parse_manifest_owned(std::move(*text.value));  // frees the text early
    if (!m.value) {
      r.verdict = Verdict::rejected;
      r.errors = std::move(m.errors);
      return r;
    }
    Result<Verified> v = verify(std::move(*m.value), vo);
    if (!v.value) {
      r.verdict = Verdict::rejected;
      r.errors = std::move(v.errors);
      r.omitted = v.omitted;
      return r;
    }
    check_hashes(v.value->manifest().modules, opts, &r);
    Result<Protocol> p = check_protocol(*v.value, opts.max_errors);
    r.protocol_checked = true;
    if (p.value) {
      r.forwards = p.value->forwards.size();
      r.fills = p.value->fills.size();
    } else {
      r.misfits = std::move(p.errors);
      r.misfits_omitted = p.omitted;
    }
  }
  r.verdict = r.errors.empty() && r.omitted == 0 ? Verdict::verified : Verdict::rejected;
  return r;
}

namespace {

void print_more(uint64_t omitted, std::ostream& out) {
  if (omitted != 0) out << "  \xe2\x80\xa6 and " << with_commas(omitted) << " more\n";
}

}  // namespace

void print_text(const FileReport& r, std::ostream& out, std::ostream& err) {
  const std::string file = printable(r.file);
  switch (r.verdict) {
    case Verdict::io_error:
      for (const Error& e : r.errors) err << file << ": " << printable(e.message) << "\n";
      return;
    case Verdict::rejected:
      out << file << ": manifest failed verification:\n";
      for (const Error& e : r.errors) out << "  - " << e.to_string() << "\n";
      print_more(r.omitted, out);
      return;
    case Verdict::verified:
      break;
  }
  out << file << ": verified";
  if (!r.protocol_checked) {
    out << " (fragment";
    const char* sep = "; vars ";
    for (const auto& [name, v] : r.fragment_vars) {
      out << sep << printable(shortened(name)) << "=" << v.max;
      sep = ", ";
    }
    out << ")\n";
  } else if (r.misfits.empty()) {
    out << "; serving protocol: " << r.forwards << " forwards, " << r.fills << " fills\n";
  } else {
    out << "; manifest does not fit the serving protocol:\n";
    for (const Error& e : r.misfits) out << "  - " << e.to_string() << "\n";
    print_more(r.misfits_omitted, out);
  }
  for (const ModuleOrigin& m : r.modules) {
    out << "  module `" << printable(shortened(m.name)) << "`: "
        << (m.cached ? "cache " : "") << "`" << printable(m.path) << "`";
    if (m.cached) out << " (" << printable(shortened(m.source)) << ")";
    out << "\n";
  }
}

namespace {

nlohmann::json error_json(const Error& e) {
  nlohmann::json j = nlohmann::json::object();
  j["kind"] = to_string(e.kind);
  j["path"] = e.path;
  j["message"] = e.message;
  j["line"] = e.line;
  j["column"] = e.column;
  return j;
}

}  // namespace

void print_json(const FileReport& r, std::ostream& out) {
  nlohmann::json j = nlohmann::json::object();
  j["file"] = r.file;
  j["verdict"] = r.verdict == Verdict::verified   ? "verified"
                 : r.verdict == Verdict::rejected ? "rejected"
                                                  : "error";
  j["errors"] = nlohmann::json::array();
  for (const Error& e : r.errors) j["errors"].push_back(error_json(e));
  j["omitted"] = r.omitted;
  if (!r.fragment_vars.empty()) {
    nlohmann::json vars = nlohmann::json::object();
    for (const auto& [name, v] : r.fragment_vars) vars[name] = v.max;
    j["fragment_vars"] = std::move(vars);
  }
  if (!r.modules.empty()) {
    nlohmann::json mods = nlohmann::json::array();
    for (const ModuleOrigin& m : r.modules) {
      mods.push_back({{"name", m.name}, {"source", m.source},
                      {"from", m.path.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.path)},
                      {"cache", m.cached}});
    }
    j["modules"] = std::move(mods);
  }
  if (r.protocol_checked) {
    nlohmann::json p = nlohmann::json::object();
    p["fits"] = r.misfits.empty();
    p["forwards"] = r.forwards;
    p["fills"] = r.fills;
    p["misfits"] = nlohmann::json::array();
    for (const Error& e : r.misfits) p["misfits"].push_back(error_json(e));
    p["misfits_omitted"] = r.misfits_omitted;
    j["protocol"] = std::move(p);
  }
  // Replace invalid UTF-8 (a file name or a message quoting bad input) instead of throwing.
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace kernrt::verify_tool
