// program_io: run one program of a manifest on one GPU, inputs from files, outputs to files
// (reference/kern-schema.md §4.1). Raw little-endian binaries, staged by buffer name; the
// serving protocol (`fill`, `batch`) is never consulted.
//
// Order: parse flags (each number checked: --iters, --tokens >= 1, --gpu >= 0) -> read the
// manifest (a regular file of at most --max-bytes) and verify it -> refuse a topology ->
// check program, vars (given, in range, every var the program reads), buffer names, input
// and fill files (regular, sized), output files (creatable, not two outputs to one file),
// weights files (plan.hpp) -> only then open the driver, load, write inputs and fills, run
// (eager or graph, optionally timed) and write outputs. So every rejection of the manifest
// or the request happens before anything is launched, with or without a GPU. Exit codes:
// 0 ok, 1 manifest or request rejected, 2 could not run (usage, I/O, driver, any exception,
// reported with the manifest's name). Diagnostics go to stderr as `file: /path: message`
// (escaped: kernrt::printable); results to stdout. Input contents are checked against
// their `domain` by the runtime's write_input, after the load and before any launch.
// Deliberately does not check fill roles.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <sys/stat.h>

#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"
#include "plan.hpp"

namespace {

using kernrt::Error;
using kernrt::ErrorKind;
using kernrt::Errors;

constexpr int kOk = 0;
constexpr int kRejected = 1;
constexpr int kCannotRun = 2;

struct Options {
  std::string manifest;
  std::string cubins = "build/cubins/run";
  int gpu = 0;
  bool graph = false;
  int iters = 0;  // 0 = not timed
  uint64_t tokens = 0;  // token capacity of paged states; 0 = the runtime's default
  bool json = false;
  uint64_t max_bytes = kernrt::kDefaultMaxManifestBytes;
  std::map<std::string, uint64_t> ranks;  // --rank GROUP=I
  std::string rendezvous;
  kernrt::program_io::Flags flags;
};

// GROUP=I with I a whole number: one rank of --rank.
std::optional<std::pair<std::string, uint64_t>> parse_rank(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == 0 || eq == std::string::npos || eq + 1 == s.size()) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = eq + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  return std::make_pair(s.substr(0, eq), v);
}

// Errors kept per report; the rest are counted ("… and N more").
constexpr size_t kMaxErrors = 100;

int exit_code_for(const Errors& errors) {
  for (const auto& e : errors) {
    if (e.kind == ErrorKind::Driver || e.kind == ErrorKind::Io) return kCannotRun;
  }
  return kRejected;
}

// Prints every error as `label: /path: message` to stderr; with --json also one object
// on stdout. Returns the exit code.
int fail(const Options& o, const std::string& label, const Errors& errors, uint64_t omitted = 0) {
  const std::string shown = kernrt::printable(label);
  for (size_t i = 0; i < errors.size() && i < kMaxErrors; ++i) {
    // bounded(): the runtime's messages quote names too, uncut.
    std::cerr << shown << ": " << kernrt::bounded(errors[i]).to_string() << "\n";
  }
  if (errors.size() > kMaxErrors) omitted += errors.size() - kMaxErrors;
  if (omitted != 0) std::cerr << shown << ": \xe2\x80\xa6 and " << kernrt::with_commas(omitted) << " more\n";
  const int code = exit_code_for(errors);
  if (o.json) {
    nlohmann::json j;
    j["status"] = code == kRejected ? "rejected" : "failed";
    j["exit_code"] = code;
    j["errors"] = nlohmann::json::array();
    for (size_t i = 0; i < errors.size() && i < kMaxErrors; ++i) {
      const auto& e = errors[i];
      j["errors"].push_back(
          {{"kind", kernrt::to_string(e.kind)}, {"path", e.path}, {"message", e.message}});
    }
    j["omitted"] = omitted;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return code;
}

std::optional<Error> write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(reinterpret_cast<const char*>(bytes.data()),
                     static_cast<std::streamsize>(bytes.size()));
  if (!out) return Error{ErrorKind::Io, path, "cannot write output file", 0, 0};
  return std::nullopt;
}

// --fill: the file's bytes repeated over the whole state, the last copy cut at its end
// (a large paged pool from a small pattern). A file larger than the state is refused
// before anything is written.
std::optional<Error> fill_state(kernrt::Runtime& rt, const kernrt::program_io::FileBinding& f) {
  auto read = kernrt::read_regular_file(f.path, f.bytes);  // the size the plan checked
  if (!read) return read.errors.front();
  const std::string& bytes = *read.value;
  if (bytes.empty()) {
    return Error{ErrorKind::Io, f.path, "fill file for `" + f.name + "` is empty", 0, 0};
  }
  const uint64_t total = rt.state_bytes(f.name);
  if (bytes.size() > total) {
    return Error{ErrorKind::Caller, kernrt::json_pointer_append("/states", f.name),
                 "fill file `" + f.path + "` has " + std::to_string(bytes.size()) +
                     " bytes, more than state `" + f.name + "` holds (" + std::to_string(total) +
                     " bytes at this capacity)",
                 0, 0};
  }
  for (uint64_t at = 0; at < total; at += bytes.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes.size(), total - at));
    if (auto e = rt.write_state_at(f.name, at, bytes.data(), n)) return e;
  }
  return std::nullopt;
}

int run_plan(const Options& o, const kernrt::manifest::Verified& verified,
             const kernrt::program_io::Plan& plan) {
  std::string why;
  if (!kernrt::device_available(&why)) {
    const std::string prefix = "no CUDA driver/device";
    const std::string message = why.rfind(prefix, 0) == 0 ? why : prefix + ": " + why;
    return fail(o, o.manifest, {Error{ErrorKind::Driver, "", message, 0, 0}});
  }
  kernrt::LoadOptions lo;
  lo.cubin_dirs = {o.cubins};
  lo.gpu = o.gpu;
  lo.weight_files = o.flags.weights;
  lo.token_capacity = o.tokens;
  lo.ranks = o.ranks;
  lo.rendezvous = o.rendezvous;
  auto loaded = kernrt::Runtime::load(verified, lo);
  if (!loaded) return fail(o, o.manifest, loaded.errors);
  kernrt::Runtime& rt = **loaded.value;

  for (const auto& in : plan.inputs) {
    auto bytes = kernrt::read_regular_file(in.path, in.bytes);  // the size the plan checked
    if (!bytes) return fail(o, o.manifest, bytes.errors);
    if (auto e = rt.write_input(in.name, bytes.value->data(), bytes.value->size())) {
      return fail(o, o.manifest, {*e});
    }
  }

  for (const auto& f : plan.fills) {
    if (auto e = fill_state(rt, f)) return fail(o, o.manifest, {*e});
  }

  std::optional<kernrt::TimingStats> timing;
  if (o.iters > 0) {
    auto t = rt.time(plan.program, plan.vars, o.graph, o.iters);
    if (!t) return fail(o, o.manifest, t.errors);
    timing = *t.value;
  } else if (auto e = rt.run(plan.program, plan.vars, o.graph)) {
    return fail(o, o.manifest, {*e});
  }

  for (const auto& out : plan.outputs) {
    std::vector<uint8_t> bytes;
    if (auto e = rt.read_output(out.name, &bytes)) return fail(o, o.manifest, {*e});
    if (auto e = write_file(out.path, bytes)) return fail(o, o.manifest, {*e});
  }
  for (const auto& d : plan.dumps) {
    std::vector<uint8_t> bytes;
    auto e = d.is_state ? rt.read_state(d.name, &bytes) : rt.read_buffer(d.name, &bytes);
    if (e) return fail(o, o.manifest, {*e});
    if (auto w = write_file(d.path, bytes)) return fail(o, o.manifest, {*w});
  }

  const std::string mode = o.graph ? "graph" : "eager";
  if (o.json) {
    nlohmann::json j = {{"status", "ok"},          {"program", plan.program},
                        {"vars", plan.vars},       {"mode", mode},
                        {"inputs", plan.inputs.size()}, {"outputs", plan.outputs.size()},
                        {"dumps", plan.dumps.size()}};
    if (timing) {
      j["timing"] = {{"iters", timing->iters}, {"median_us", timing->median_us},
                     {"min_us", timing->min_us}, {"mean_us", timing->mean_us}};
    }
    j["modules"] = rt.module_files();
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kOk;
  }
  std::cout << "`" << kernrt::printable(plan.program) << "` ran with "
            << kernrt::printable(kernrt::program_io::format_vars(plan.vars))
            << " (" << mode << "); " << plan.inputs.size() << " inputs in, "
            << plan.outputs.size() << " outputs out, " << plan.dumps.size() << " dumps\n";
  if (timing) {
    std::printf("timing: %d iters, median %.3f us, min %.3f us per iteration (%s, CUDA events)\n",
                timing->iters, timing->median_us, timing->min_us,
                o.graph ? "graph replay" : "eager launches");
  }
  // Where each module's verified bytes came from: a cubin dir, a host .so, the cache.
  for (const auto& [name, file] : rt.module_files()) {
    std::cout << "module `" << kernrt::printable(kernrt::shortened(name)) << "`: `"
              << kernrt::printable(file) << "`\n";
  }
  return kOk;
}

// A count flag's validator: an integer in [lo, 2^31 - 1], said plainly (CLI11's own
// PositiveNumber prints a 300-digit range for --iters 0).
CLI::Validator count_at_least(long long lo) {
  return CLI::Validator(
      [lo](const std::string& s) -> std::string {
        const bool digits = !s.empty() && s.size() <= 10 &&
                            s.find_first_not_of("0123456789") == std::string::npos;
        if (digits && std::stoll(s) >= lo && std::stoll(s) <= 2147483647LL) return "";
        return "expected an integer >= " + std::to_string(lo) + ", found `" + s + "`";
      },
      "", "count");
}

int run_cli(Options& o, int argc, char** argv) {
  CLI::App app{"Run one program of a kern schema-v4 manifest on one GPU, inputs and outputs "
               "as raw little-endian files", "program_io"};
  app.get_formatter()->column_width(40);
  app.set_version_flag("--version", std::string("program_io (kernrt) ") + KERNRT_VERSION);
  // The manifest is checked by the one reader (regular file, size limit), not CLI11.
  app.add_option("--manifest", o.manifest, "Read the manifest from this JSON file")
      ->required()->type_name("FILE");
  app.add_option("--cubins", o.cubins, "Hash every *.cubin and *.so in this directory")
      ->check(CLI::Validator(CLI::ExistingDirectory).description(""))->type_name("DIR")->capture_default_str();
  app.add_option("--gpu", o.gpu, "Run on this CUDA device ordinal")
      ->check(count_at_least(0))->type_name("N")->capture_default_str();
  app.add_option("--program", o.flags.program, "Run this program (default: the only one)")
      ->type_name("NAME");
  app.add_option("--env,--vars", o.flags.vars, "Set a var (repeatable)")
      ->type_name("NAME=VALUE");
  app.add_flag("--graph", o.graph, "Capture the program as a CUDA graph and replay it");
  app.add_option("--iters", o.iters, "Time this many iterations with CUDA events")
      ->check(count_at_least(1))->type_name("N");
  app.add_option("--in", o.flags.inputs, "Write a file into an input buffer")
      ->type_name("NAME=FILE");
  app.add_option("--out", o.flags.outputs, "Write an output buffer to a file")
      ->type_name("NAME=FILE");
  app.add_option("--dump", o.flags.dumps, "Write any buffer or state to a file")
      ->type_name("NAME=FILE");
  app.add_option("--fill", o.flags.fills, "Fill a state by repeating a file's bytes over it")
      ->type_name("NAME=FILE");
  app.add_option("--tokens", o.tokens,
                 "Token capacity of paged states (default " +
                     std::to_string(kernrt::kDefaultTokenCapacity) + ")")
      ->check(count_at_least(1))->type_name("N");
  app.add_option("--weights", o.flags.weights, "Bind weights by name from this safetensors file")
      ->type_name("FILE");
  std::vector<std::string> ranks;
  app.add_option("--rank", ranks, "This process's index in a topology group (repeatable; one "
                                  "process per rank)")
      ->check(CLI::Validator(
          [](const std::string& s) {
            return parse_rank(s) ? std::string() : "expected GROUP=INDEX such as tp=1, found `" + s + "`";
          },
          "", "rank"))
      ->type_name("GROUP=I");
  app.add_option("--rendezvous", o.rendezvous, "Directory shared by the ranks of one job (fresh per job)")
      ->check(CLI::Validator(CLI::ExistingDirectory).description(""))->type_name("DIR");
  std::string max_bytes = "64M";
  app.add_option("--max-bytes", max_bytes, "Refuse a manifest larger than N bytes (K/M/G suffixes)")
      ->check(CLI::Validator(
          [](const std::string& s) {
            return kernrt::parse_byte_count(s) ? std::string()
                                               : "expected a byte count >= 1 such as 64M, found `" + s + "`";
          },
          "", "bytes"))
      ->type_name("N")->capture_default_str();
  app.add_flag("--json", o.json, "Print the result or the errors as one JSON object");
  // Usage errors quote the user's words: escaped like every other message (issue 16, item 4).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return kernrt::printable(e.what()) + "\nRun with --help for more information.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version (0) or the usage error
    return code == 0 ? kOk : kCannotRun;
  }
  o.max_bytes = *kernrt::parse_byte_count(max_bytes);
  for (const auto& r : ranks) {
    const auto [group, index] = *parse_rank(r);
    if (!o.ranks.emplace(group, index).second) {
      std::cerr << "--rank " << kernrt::printable(r) << ": group `" << kernrt::printable(group)
                << "` was given twice\nRun with --help for more information.\n";
      return kCannotRun;
    }
  }

  auto text = kernrt::read_regular_file(o.manifest, o.max_bytes, "--max-bytes");
  if (!text) return fail(o, o.manifest, text.errors);
  auto parsed = kernrt::manifest::parse_manifest_owned(std::move(*text.value));
  if (!parsed) return fail(o, o.manifest, parsed.errors);
  auto verified = kernrt::manifest::verify(std::move(*parsed.value));
  if (!verified) return fail(o, o.manifest, verified.errors, verified.omitted);
  const auto& m = verified.value->manifest();
  kernrt::LoadOptions place;
  place.ranks = o.ranks;
  place.rendezvous = o.rendezvous;
  if (auto e = kernrt::check_ranks(m, place); !e.empty()) return fail(o, o.manifest, e);
  auto plan = kernrt::program_io::make_plan(m, o.flags, kernrt::program_io::real_files());
  if (!plan) return fail(o, o.manifest, plan.errors);
  return run_plan(o, *verified.value, *plan.value);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    return run_cli(o, argc, argv);
  } catch (const std::exception& e) {
    // The libraries return errors as values; this catches resource exhaustion (bad_alloc).
    std::cerr << kernrt::printable(o.manifest.empty() ? "program_io" : o.manifest)
              << ": could not run: " << kernrt::printable(e.what()) << "\n";
  } catch (...) {
    std::cerr << kernrt::printable(o.manifest.empty() ? "program_io" : o.manifest)
              << ": could not run: unexpected exception\n";
  }
  return kCannotRun;
}
