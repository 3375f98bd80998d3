// kernrt-fetch: put every module of one or more manifests into the artifact cache, verified,
// without a GPU, so program_io and the runtime (which never touch the network) find them.
//
// Owns the command line: each FILE is read (a regular file of at most --max-bytes) and
// verified first (a manifest: every rule; --fragment: the `modules` table, rule 9), so
// nothing is fetched for a rejected manifest. Then per module: an `hf:` source is
// downloaded into `<cache>/blobs/<sha256>` or found there (kernrt::fetch); a local source
// (a label such as `x.cubin`) is looked up by hash in each --cubins DIR and in the cache,
// and never downloaded. One line per module on stdout says where it is. Exit 0 when every
// module of every FILE is present and verified, 1 when a FILE is rejected or a module is
// missing or served with the wrong bytes, 2 when the tool could not run (usage, a FILE
// that cannot be read, the network or the disk, any exception).
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "fetch.hpp"
#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/registry.hpp"
#include "kernrt/manifest/verify.hpp"

namespace {

using kernrt::Error;
using kernrt::ErrorKind;
using kernrt::printable;
using kernrt::shortened;

constexpr int kOk = 0, kRejected = 1, kCannotRun = 2;

struct Cli {
  std::vector<std::string> files;
  std::vector<std::string> cubins;
  bool fragment = false;
  uint64_t max_bytes = kernrt::kDefaultMaxManifestBytes;
  kernrt::fetch::Options fetch = kernrt::fetch::from_environment();
  std::map<std::string, std::string> local;  // sha256 -> file, from every --cubins DIR
};

int worst(int a, int b) { return a > b ? a : b; }

int code_of(const Error& e) { return e.kind == ErrorKind::Io ? kCannotRun : kRejected; }

void report(const std::string& file, const Error& e) {
  std::cerr << printable(file) << ": " << kernrt::bounded(e).to_string() << "\n";
}

// The modules of one FILE once it passed verification, or the exit code of its rejection.
int modules_of(const Cli& c, const std::string& file, std::map<std::string, kernrt::manifest::Module>* out) {
  auto text = kernrt::read_regular_file(file, c.max_bytes, "--max-bytes");
  if (!text) {
    report(file, text.errors.front());
    return kCannotRun;
  }
  kernrt::Errors errors;
  uint64_t omitted = 0;
  if (c.fragment) {
    auto f = kernrt::manifest::parse_fragment(*text.value);
    if (f) {
      errors = kernrt::manifest::verify_modules(f.value->modules);
      *out = std::move(f.value->modules);
    } else {
      errors = std::move(f.errors);
    }
  } else {
    auto m = kernrt::manifest::parse_manifest_owned(std::move(*text.value));
    if (m) {
      auto v = kernrt::manifest::verify(std::move(*m.value));
      if (v) *out = v.value->manifest().modules;
      errors = std::move(v.errors);
      omitted = v.omitted;
    } else {
      errors = std::move(m.errors);
    }
  }
  if (errors.empty() && omitted == 0) return kOk;
  std::cout << printable(file) << ": manifest failed verification, nothing fetched:\n";
  for (const Error& e : errors) std::cout << "  - " << e.to_string() << "\n";
  if (omitted) std::cout << "  \xe2\x80\xa6 and " << kernrt::with_commas(omitted) << " more\n";
  return kRejected;
}

int fetch_one(const Cli& c, const std::string& file, const std::string& name,
              const kernrt::manifest::Module& m) {
  const std::string head = printable(file) + ": module `" + printable(shortened(name)) + "` (" +
                           printable(shortened(m.source)) + "): ";
  if (!kernrt::is_registry_source(m.source)) {
    std::string sha = m.sha256;
    for (char& ch : sha) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    auto hit = c.local.find(sha);
    if (hit != c.local.end()) {
      std::cout << head << "`" << printable(hit->second) << "`\n";
      return kOk;
    }
    if (auto blob = kernrt::verified_blob(c.fetch.cache_dir, sha)) {
      std::cout << head << "in the cache `" << printable(*blob) << "`\n";
      return kOk;
    }
    report(file, Error{ErrorKind::Artifact, kernrt::json_pointer_append("/modules", shortened(name)),
                       "a local module is not downloaded, and no file with sha256 `" + sha +
                           "` is in " + (c.cubins.empty() ? std::string("any --cubins DIR (none given)")
                                                         : "the --cubins DIRs") +
                           " or the cache: build or copy it",
                       0, 0});
    return kRejected;
  }
  auto got = kernrt::fetch::fetch_module(name, m, c.fetch);
  if (!got) {
    report(file, got.errors.front());
    return code_of(got.errors.front());
  }
  const kernrt::fetch::Fetched& f = *got.value;
  if (f.origin == kernrt::fetch::Origin::cache) {
    std::cout << head << "in the cache `" << printable(f.path) << "`\n";
  } else {
    std::cout << head << (f.resumed ? "resumed, " : "") << "downloaded "
              << kernrt::with_commas(f.received) << " bytes into `" << printable(f.path) << "`\n";
  }
  return kOk;
}

int run(int argc, char** argv) {
  Cli c;
  CLI::App app{"Download the hf: modules of kern manifests into the artifact cache and check "
               "every module is present with its pinned sha256", "kernrt-fetch"};
  app.set_version_flag("--version", std::string("kernrt-fetch ") + KERNRT_VERSION);
  app.add_option("FILE", c.files, "Manifest (or fragment) files whose modules to fetch")
      ->required()->type_name("FILE");
  app.add_flag("--fragment", c.fragment, "Read FILEs as `modules` + `ops` merge fragments");
  app.add_option("--cubins", c.cubins, "Look for local (non-hf:) modules in DIR (repeatable)")
      ->type_name("DIR")->check(CLI::Validator(CLI::ExistingDirectory).description(""));
  app.add_option("--cache-dir", c.fetch.cache_dir,
                 "Keep blobs/<sha256> here (default $KERNRT_CACHE_DIR or ~/.cache/kernrt)")
      ->type_name("DIR");
  app.add_option("--endpoint", c.fetch.endpoint,
                 "Hub URL (default $KERNRT_HF_ENDPOINT, $HF_ENDPOINT or https://huggingface.co)")
      ->type_name("URL");
  app.add_flag("--offline", c.fetch.offline, "Use the cache only (also KERNRT_OFFLINE=1)");
  app.add_option("--stall-timeout", c.fetch.stall_timeout_s,
                 "End a download below 1 byte/s for this many seconds (kept to resume)")
      ->type_name("S")->check(CLI::Range(1L, 3600L).description(""))->capture_default_str();
  std::string max_bytes = "64M", max_download = "4G";
  auto bytes_check = CLI::Validator(
      [](const std::string& s) {
        return kernrt::parse_byte_count(s) ? std::string()
                                           : "expected a byte count >= 1 such as 64M, found `" + s + "`";
      },
      "", "bytes");
  app.add_option("--max-bytes", max_bytes, "Refuse FILEs larger than N bytes (K/M/G suffixes)")
      ->type_name("N")->check(bytes_check)->capture_default_str();
  app.add_option("--max-download", max_download, "Refuse an artifact larger than N bytes")
      ->type_name("N")->check(bytes_check)->capture_default_str();
  bool quiet = false;
  app.add_flag("--quiet", quiet, "Print no progress lines on stderr");
  // Usage errors quote the user's words: escaped like every other message (issue 16, item 4).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return kernrt::printable(e.what()) + "\nRun with --help for more information.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kCannotRun;
  }
  c.max_bytes = *kernrt::parse_byte_count(max_bytes);
  c.fetch.max_bytes = *kernrt::parse_byte_count(max_download);
  while (c.fetch.endpoint.size() > 1 && c.fetch.endpoint.back() == '/') c.fetch.endpoint.pop_back();
  if (!quiet) c.fetch.progress = &std::cerr;
  for (const std::string& dir : c.cubins) {
    auto files = kernrt::hash_files_in(dir);
    if (!files) {
      report(dir, files.errors.front());
      return kCannotRun;
    }
    c.local.insert(files.value->begin(), files.value->end());
  }

  int code = kOk;
  for (const std::string& file : c.files) {
    try {
      std::map<std::string, kernrt::manifest::Module> modules;
      const int verdict = modules_of(c, file, &modules);
      code = worst(code, verdict);
      if (verdict != kOk) continue;
      for (const auto& [name, m] : modules) code = worst(code, fetch_one(c, file, name, m));
    } catch (const std::exception& e) {
      std::cerr << printable(file) << ": could not be fetched: " << printable(e.what()) << "\n";
      code = kCannotRun;
    }
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kernrt-fetch: could not run: " << kernrt::printable(e.what()) << "\n";
  } catch (...) {
    std::cerr << "kernrt-fetch: could not run: unexpected exception\n";
  }
  return kCannotRun;
}
