// runtime_overhead: what kernrt adds on top of the CUDA driver, measured in one process.
//
//  1. graph replay of the 100-call program of tiny100.json (100 launches of a one-add
//     kernel) vs a hand-written CUDA graph captured from the same 100 cuLaunchKernel
//     calls of the same cubin; device time per replay with CUDA events (as
//     Runtime::time), median per round, rounds alternated; gate: ours/peer <= 1.05.
//  2. eager host overhead per launch: host wall time of Runtime::run(eager) of that
//     program vs a raw loop of 100 cuLaunchKernel, each plus one stream synchronize,
//     divided by 100.
//  3. load time of modules10.json (10 modules): verify_json + Runtime::load vs 10 raw
//     cuModuleLoadData of the same cubins.
// Prints a table; --jsonl appends one line per case, --markdown writes the table.
// Deliberately does not measure kernel speed (the kernel does one add) or inputs: the
// tiny program has none, so nothing but launch paths is timed.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"
#include "raw_cuda.hpp"

namespace {

using kernrt::bench::median;
namespace fs = std::filesystem;

constexpr int kCalls = 100;
constexpr double kGraphGate = 1.05;

struct Options {
  std::string manifests = "build/manifests/test";
  std::string cubins = "build/cubins/run";
  int gpu = 0;
  int rounds = 7;
  int iters = 1000;
  int loads = 10;
  std::string jsonl;
  std::string markdown;
  std::string commit = "unknown";
};

struct Row {
  std::string name;
  double ours = 0, peer = 0;
  std::string peer_name;
  std::string unit;
  bool gated = false;
  bool pass = true;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read `" + path + "`");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<char> bytes_of(const std::string& path) {
  const std::string s = slurp(path);
  return std::vector<char>(s.begin(), s.end());
}

kernrt::manifest::Verified verify(const std::string& text, const std::string& path) {
  auto v = kernrt::manifest::verify_json(text);
  if (!v) throw std::runtime_error(path + ": " + v.errors.front().to_string());
  return std::move(*v.value);
}

std::unique_ptr<kernrt::Runtime> load(const kernrt::manifest::Verified& v, const Options& o) {
  kernrt::LoadOptions lo;
  lo.cubin_dirs = {o.cubins};
  lo.gpu = o.gpu;
  auto r = kernrt::Runtime::load(v, lo);
  if (!r) throw std::runtime_error("load: " + r.errors.front().to_string());
  return std::move(*r.value);
}

void ok(const std::optional<kernrt::Error>& e, const char* what) {
  if (e) throw std::runtime_error(std::string(what) + ": " + e->to_string());
}

uint32_t counter(kernrt::Runtime& rt) {
  std::vector<uint8_t> b;
  ok(rt.read_buffer("counter", &b), "read counter");
  uint32_t v = 0;
  std::memcpy(&v, b.data(), 4);
  return v;
}

double since_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

std::vector<Row> measure(const Options& o, std::string* gpu_name) {
  kernrt::bench::RawCuda cu;
  std::string why;
  if (!cu.open(&why)) throw std::runtime_error(why);
  const std::string tiny_cubin = o.cubins + "/test_tiny.sm90a.cubin";
  kernrt::bench::RawTiny raw(cu, o.gpu, bytes_of(tiny_cubin), "test_tiny_sm90a");
  *gpu_name = raw.device_name();

  const std::string tiny_path = o.manifests + "/tiny100.json";
  auto rt = load(verify(slurp(tiny_path), tiny_path), o);
  if (rt->launch_count("step") != kCalls) throw std::runtime_error("tiny100: expected 100 launches");

  // ---- 1. graph replay, rounds alternated so drift hits both sides alike
  raw.capture(kCalls);
  std::vector<double> ours_graph, peer_graph;
  const uint32_t c0 = counter(*rt), r0 = raw.counter();
  for (int r = 0; r < o.rounds; ++r) {
    auto t = rt->time("step", {}, true, o.iters);
    if (!t) throw std::runtime_error("time: " + t.errors.front().to_string());
    ours_graph.push_back(t.value->median_us);
    peer_graph.push_back(median(raw.replay_us(o.iters)));
  }
  // Every replay ran all 100 launches on both sides (warm-ups included).
  const uint64_t want = static_cast<uint64_t>(o.rounds) * (o.iters + 1) * kCalls;
  if (counter(*rt) - c0 != want || raw.counter() - r0 != want) {
    throw std::runtime_error("counter mismatch: a replay skipped launches");
  }

  // ---- 2. eager host overhead per launch
  std::vector<double> ours_eager, peer_eager;
  ok(rt->run("step", {}, false), "warm-up");
  raw.eager_host_us(kCalls);
  for (int r = 0; r < o.rounds; ++r) {
    for (int i = 0; i < o.iters / 10; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      ok(rt->run("step", {}, false), "run");
      ours_eager.push_back(since_us(t0) / kCalls);
      peer_eager.push_back(raw.eager_host_us(kCalls) / kCalls);
    }
  }
  rt.reset();

  // ---- 3. load time of a 10-module manifest
  const std::string m10_path = o.manifests + "/modules10.json";
  const std::string m10 = slurp(m10_path);
  const auto v10 = verify(m10, m10_path);
  std::vector<std::vector<char>> cubins;
  for (const auto& [name, module] : v10.manifest().modules) {
    cubins.push_back(bytes_of(o.cubins + "/" + module.source));
  }
  load(v10, o).reset();  // warm: driver, primary context, file cache
  std::vector<double> ours_load, peer_load, ours_verify;
  for (int i = 0; i < o.loads; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto v = verify(m10, m10_path);
    ours_verify.push_back(since_us(t0));
    auto r = load(v, o);
    ours_load.push_back(since_us(t0));
    ok(r->run("step", {}, false), "modules10 run");
    if (counter(*r) != 55) throw std::runtime_error("modules10: counter is not 1 + 2 + ... + 10");
    r.reset();
    t0 = std::chrono::steady_clock::now();
    std::vector<CUmodule> mods(cubins.size());
    for (size_t k = 0; k < cubins.size(); ++k) {
      cu.check(cu.api->cuModuleLoadData(&mods[k], cubins[k].data()), "cuModuleLoadData");
    }
    peer_load.push_back(since_us(t0));
    for (CUmodule m : mods) cu.api->cuModuleUnload(m);
  }

  std::vector<Row> rows;
  const double og = median(ours_graph), pg = median(peer_graph);
  rows.push_back({"graph replay, 100 tiny launches (us per replay)", og, pg,
                  "hand-written CUDA graph of 100 cuLaunchKernel", "us", true, og <= kGraphGate * pg});
  rows.push_back({"eager host overhead per launch (us)", median(ours_eager), median(peer_eager),
                  "raw cuLaunchKernel loop", "us", false, true});
  rows.push_back({"load manifest with 10 modules (us)", median(ours_load), median(peer_load),
                  "raw cuModuleLoadData x10", "us", false, true});
  rows.push_back({"verify manifest with 10 modules (us)", median(ours_verify), 0, "", "us", false,
                  true});
  return rows;
}

void report(const Options& o, const std::vector<Row>& rows, const std::string& gpu) {
  std::printf("%-50s %12s %12s %8s  %s\n", "case", "kernrt", "peer", "ratio", "peer");
  for (const auto& r : rows) {
    const double ratio = r.peer > 0 ? r.ours / r.peer : 0.0;
    std::printf("%-50s %12.3f %12.3f %8.3f  %s%s\n", r.name.c_str(), r.ours, r.peer, ratio,
                r.peer_name.c_str(), r.gated ? (r.pass ? "  [gate <= 1.05: pass]" : "  [gate <= 1.05: FAIL]") : "");
  }
  if (!o.jsonl.empty()) {
    std::ofstream out(o.jsonl, std::ios::app);
    for (const auto& r : rows) {
      nlohmann::ordered_json j = {{"date", today()}, {"gpu", gpu}, {"commit", o.commit},
                                  {"family", "runtime"}, {"case", r.name}, {"kind", "bench"},
                                  {"ours_us", r.ours}};
      if (r.peer > 0) {
        j["peer"] = r.peer_name;
        j["peer_us"] = r.peer;
        j["speedup_vs_peer"] = r.peer / r.ours;
      }
      if (r.gated) {
        j["gate"] = kGraphGate;  // on ours_us / peer_us
        j["pass"] = r.pass;
      }
      out << j.dump() << "\n";
    }
  }
  if (!o.markdown.empty()) {
    std::ofstream md(o.markdown);
    md << "| case | kernrt | peer | kernrt / peer | peer is |\n|---|---:|---:|---:|---|\n";
    for (const auto& r : rows) {
      md << "| " << r.name << " | " << r.ours << " | ";
      if (r.peer > 0) md << r.peer << " | " << r.ours / r.peer;
      else md << "- | -";
      md << " | " << r.peer_name << (r.gated ? (r.pass ? " (gate <= 1.05: pass)" : " (gate <= 1.05: FAIL)") : "")
         << " |\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Measure kernrt's launch, graph and load overhead against the raw CUDA driver",
               "runtime_overhead"};
  app.get_formatter()->column_width(36);
  app.add_option("--manifests", o.manifests, "Read tiny100.json and modules10.json from here")
      ->capture_default_str();
  app.add_option("--cubins", o.cubins, "Load the test cubins from here")->capture_default_str();
  app.add_option("--gpu", o.gpu, "Run on this CUDA device ordinal")->capture_default_str();
  app.add_option("--rounds", o.rounds, "Alternate ours and the peer this many rounds")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--iters", o.iters, "Time this many graph replays per round")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--loads", o.loads, "Time this many manifest loads")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--jsonl", o.jsonl, "Append one JSON line per case to this file");
  app.add_option("--markdown", o.markdown, "Write the result table as markdown to this file");
  app.add_option("--commit", o.commit, "Record this commit in the JSON lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    std::string gpu;
    const auto rows = measure(o, &gpu);
    report(o, rows, gpu);
    return rows.front().pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "runtime_overhead: " << e.what() << "\n";
    return 2;
  }
}
