// program_io: run one program of a manifest on one GPU, inputs from files, outputs to files
// (reference/kern-schema.md §4.1). Raw little-endian binaries, staged by buffer name; the
// serving protocol (`fill`, `batch`) is never consulted.
//
// Order: parse flags -> read + verify the manifest -> refuse a topology -> check program,
// vars, buffer names and input file sizes (plan.hpp) -> only then open the driver, load,
// write inputs and fills, run (eager or graph, optionally timed) and write outputs. So every
// rejection of the manifest or the request happens before anything is launched, with or
// without a GPU. Exit codes: 0 ok, 1 manifest or request rejected, 2 could not run (usage,
// I/O, driver). Diagnostics go to stderr as `file: /path: message`; results to stdout.
// Input contents are checked against their `domain` by the runtime's write_input, after
// the load and before any launch. Deliberately does not check fill roles.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <sys/stat.h>

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
  std::vector<std::string> weights;
  kernrt::program_io::Flags flags;
};

int exit_code_for(const Errors& errors) {
  for (const auto& e : errors) {
    if (e.kind == ErrorKind::Driver || e.kind == ErrorKind::Io) return kCannotRun;
  }
  return kRejected;
}

// Prints every error as `label: /path: message` to stderr; with --json also one object
// on stdout. Returns the exit code.
int fail(const Options& o, const std::string& label, const Errors& errors) {
  for (const auto& e : errors) std::cerr << label << ": " << e.to_string() << "\n";
  const int code = exit_code_for(errors);
  if (o.json) {
    nlohmann::json j;
    j["status"] = code == kRejected ? "rejected" : "failed";
    j["exit_code"] = code;
    j["errors"] = nlohmann::json::array();
    for (const auto& e : errors) {
      j["errors"].push_back(
          {{"kind", kernrt::to_string(e.kind)}, {"path", e.path}, {"message", e.message}});
    }
    std::cout << j.dump() << "\n";
  }
  return code;
}

std::optional<uint64_t> file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
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
  std::string bytes;
  if (!read_file(f.path, &bytes) || bytes.empty()) {
    return Error{ErrorKind::Io, f.path, "cannot read fill file for `" + f.name + "`", 0, 0};
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
  lo.weight_files = o.weights;
  lo.token_capacity = o.tokens;
  auto loaded = kernrt::Runtime::load(verified, lo);
  if (!loaded) return fail(o, o.manifest, loaded.errors);
  kernrt::Runtime& rt = **loaded.value;

  for (const auto& in : plan.inputs) {
    std::string bytes;
    if (!read_file(in.path, &bytes)) {
      return fail(o, o.manifest, {Error{ErrorKind::Io, in.path, "cannot read input file", 0, 0}});
    }
    if (auto e = rt.write_input(in.name, bytes.data(), bytes.size())) return fail(o, o.manifest, {*e});
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
    std::cout << j.dump() << "\n";
    return kOk;
  }
  std::cout << "`" << plan.program << "` ran with " << kernrt::program_io::format_vars(plan.vars)
            << " (" << mode << "); " << plan.inputs.size() << " inputs in, "
            << plan.outputs.size() << " outputs out, " << plan.dumps.size() << " dumps\n";
  if (timing) {
    std::printf("timing: %d iters, median %.3f us, min %.3f us per iteration (%s, CUDA events)\n",
                timing->iters, timing->median_us, timing->min_us,
                o.graph ? "graph replay" : "eager launches");
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Run one program of a kern schema-v4 manifest on one GPU, inputs and outputs "
               "as raw little-endian files", "program_io"};
  app.get_formatter()->column_width(40);
  app.set_version_flag("--version", std::string("program_io (kernrt) ") + KERNRT_VERSION);
  app.add_option("--manifest", o.manifest, "Read the manifest from this JSON file")
      ->required()->check(CLI::Validator(CLI::ExistingFile).description(""))->type_name("FILE");
  app.add_option("--cubins", o.cubins, "Hash every *.cubin in this directory")
      ->check(CLI::Validator(CLI::ExistingDirectory).description(""))->type_name("DIR")->capture_default_str();
  app.add_option("--gpu", o.gpu, "Run on this CUDA device ordinal")->type_name("N")->capture_default_str();
  app.add_option("--program", o.flags.program, "Run this program (default: the only one)")
      ->type_name("NAME");
  app.add_option("--env,--vars", o.flags.vars, "Set a var (repeatable)")
      ->type_name("NAME=VALUE");
  app.add_flag("--graph", o.graph, "Capture the program as a CUDA graph and replay it");
  app.add_option("--iters", o.iters, "Time this many iterations with CUDA events")
      ->check(CLI::Validator(CLI::PositiveNumber).description(""))->type_name("N");
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
      ->check(CLI::Validator(CLI::PositiveNumber).description(""))->type_name("N");
  app.add_option("--weights", o.weights, "Bind weights by name from this safetensors file")
      ->type_name("FILE");
  app.add_flag("--json", o.json, "Print the result or the errors as one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version (0) or the usage error
    return code == 0 ? kOk : kCannotRun;
  }

  std::string text;
  if (!read_file(o.manifest, &text)) {
    return fail(o, o.manifest, {Error{ErrorKind::Io, o.manifest, "cannot read manifest", 0, 0}});
  }
  auto verified = kernrt::manifest::verify_json(text);
  if (!verified) return fail(o, o.manifest, verified.errors);
  const auto& m = verified.value->manifest();
  if (auto e = kernrt::program_io::refuse_topology(m)) return fail(o, o.manifest, {*e});
  auto plan = kernrt::program_io::make_plan(m, o.flags, &file_size);
  if (!plan) return fail(o, o.manifest, plan.errors);
  return run_plan(o, *verified.value, *plan.value);
}
