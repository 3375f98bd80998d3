// kernrt-verify: verify kern schema-v4 manifests (or `modules` + `ops` fragments) offline.
//
// Owns the command line only: options, the output scheme and exit codes. Each file is
// handled by report.cpp; every rule lives in kernrt::manifest. Exit 0 when every file
// verified, 1 when any was rejected, 2 when the tool could not run (usage, unreadable
// file, a FILE that is not a regular file or is larger than --max-bytes, missing or
// unreadable --cubins DIR, an exception of any kind). A serving-protocol misfit is not a
// failure.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/registry.hpp"
#include "report.hpp"

namespace {

constexpr const char* kVersion = "kernrt-verify 0.1.0 (kern schema 4)";

constexpr const char* kFooter = R"(Output:
  stdout, per file, one of:
    `FILE: verified; serving protocol: N forwards, M fills`
    `FILE: verified; manifest does not fit the serving protocol:` and one
      `  - /path: message` line per misfit (a misfit is not a failure: exit 0)
    `FILE: verified (fragment; vars NAME=MAX, ...)` with the bounds the launch
      limits were checked at (--fragment)
    with --cubins, after a verdict: one `  module `NAME`: `PATH`` line per module
      (`cache `PATH` (SOURCE)` for a blob of the cache)
    `FILE: manifest failed verification:` and one `  - /path: message` line per
      problem (`  - line:column: message` for syntax errors), at most --max-errors,
      then `  … and N more`
  Control characters and invisible format characters in names are printed escaped
  (\n, \x1b, \u202e); names longer than 80 bytes are cut with `…`.
  stderr: `FILE: message` for a file that cannot be read, and usage errors.
  --json: one JSON object per file and line on stdout: {"file", "verdict":
  "verified"|"rejected"|"error", "errors": [{"kind", "path", "message", "line",
  "column"}], "omitted", "protocol": {"fits", "forwards", "fills", "misfits",
  "misfits_omitted"}, "fragment_vars", "modules": [{"name", "source", "from",
  "cache"}]}.
Exit codes: 0 all verified, 1 any rejected, 2 usage or I/O error.)";

// `name=max`, max an integer >= 1.
std::string check_var(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return "expected name=max, found `" + s + "`";
  const std::string digits = s.substr(eq + 1);
  if (digits.empty() || digits.size() > 19 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return "max of `" + s.substr(0, eq) + "` must be an integer >= 1, found `" + digits + "`";
  }
  if (std::stoull(digits) < 1) return "max of `" + s.substr(0, eq) + "` must be >= 1, found 0";
  return std::string();
}

// A validator without its own type name in --help (the option's type_name says it).
CLI::Validator quiet(CLI::Validator v) {
  v.description("");
  return v;
}

int run(int argc, char** argv) {
  CLI::App app{"Verify kern schema-v4 manifests (all 24 rules) and report serving-protocol fit",
               "kernrt-verify"};
  app.footer(kFooter);
  app.set_version_flag("--version", kVersion, "Print the version and exit");

  std::vector<std::string> files;
  std::string cubins;
  std::vector<std::string> vars;
  kernrt::verify_tool::Options opts;
  // No CLI11 file validator: every file problem (missing, FIFO, device, directory, too
  // large) is reported by the one reader, as `FILE: message` with exit code 2.
  app.add_option("FILE", files, "Manifest (or fragment) files to verify")
      ->required()
      ->type_name("FILE");
  auto* cubins_opt =
      app.add_option("--cubins", cubins,
                     "Require every module's sha256 among the files in DIR or the cache; "
                     "print where each was found")
          ->type_name("DIR")
          ->check(quiet(CLI::ExistingDirectory));
  opts.cache_dir = kernrt::default_cache_dir();
  app.add_option("--cache-dir", opts.cache_dir,
                 "Look for blobs/<sha256> here (default $KERNRT_CACHE_DIR or ~/.cache/kernrt)")
      ->type_name("DIR");
  auto* fragment_flag = app.add_flag("--fragment", opts.fragment,
                                     "Verify FILEs as `modules` + `ops` merge fragments");
  app.add_option("--vars", vars, "Set a fragment var's max (NAME=MAX, comma-separated; default 1)")
      ->type_name("NAME=MAX")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->check(CLI::Validator(check_var, "", "var"))
      ->needs(fragment_flag);
  app.add_flag("--json", opts.json, "Print one JSON object per file instead of text");
  std::string max_bytes = "64M";
  app.add_option("--max-bytes", max_bytes, "Refuse FILEs larger than N bytes (K/M/G suffixes)")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& s) {
            return kernrt::parse_byte_count(s) ? std::string()
                                               : "expected a byte count >= 1 such as 65536 or "
                                                 "64M, found `" + s + "`";
          },
          "", "bytes"));
  app.add_option("--max-errors", opts.max_errors, "Print at most N problems per file, count the rest")
      ->type_name("N")
      ->capture_default_str()
      ->check(quiet(CLI::Range(size_t{1}, size_t{1} << 30)));

  // Usage errors quote the user's words: escaped like every other message (issue 16, item 4).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return kernrt::printable(e.what()) + "\nRun with --help for more information.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version to stdout, errors to stderr
    return code == 0 ? 0 : 2;
  }

  opts.max_bytes = *kernrt::parse_byte_count(max_bytes);
  for (const std::string& v : vars) {
    const size_t eq = v.find('=');
    opts.fragment_vars[v.substr(0, eq)].max = std::stoull(v.substr(eq + 1));
  }
  if (*cubins_opt) {
    opts.cubins_dir = cubins;
    auto indexed = kernrt::hash_files_in(cubins);
    if (!indexed.value) {
      for (const auto& e : indexed.errors) {
        std::cerr << kernrt::printable(e.path) << ": " << kernrt::printable(e.message) << "\n";
      }
      return 2;
    }
    opts.cubin_files = std::move(*indexed.value);
  }

  bool rejected = false;
  bool io_failed = false;
  for (const std::string& f : files) {
    kernrt::verify_tool::FileReport report;
    try {
      report = kernrt::verify_tool::check_file(f, opts);
    } catch (const std::exception& e) {
      // Resource exhaustion (bad_alloc) or a bug: this file could not be checked.
      report.file = f;
      report.verdict = kernrt::verify_tool::Verdict::io_error;
      report.errors = {kernrt::Error{kernrt::ErrorKind::Io, f,
                                     std::string("could not be checked: ") + e.what(), 0, 0}};
    }
    rejected = rejected || report.verdict == kernrt::verify_tool::Verdict::rejected;
    io_failed = io_failed || report.verdict == kernrt::verify_tool::Verdict::io_error;
    if (opts.json) {
      kernrt::verify_tool::print_json(report, std::cout);
    } else {
      kernrt::verify_tool::print_text(report, std::cout, std::cerr);
    }
  }
  std::cout.flush();
  if (io_failed) return 2;
  return rejected ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // The library returns errors as values; this only catches resource exhaustion.
    std::cerr << "kernrt-verify: " << kernrt::printable(e.what()) << "\n";
  } catch (...) {
    std::cerr << "kernrt-verify: unexpected exception\n";
  }
  return 2;
}
