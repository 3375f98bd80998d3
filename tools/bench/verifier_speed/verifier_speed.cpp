// kernrt-verifier-speed: times parse and verify of one manifest separately (Done-when:
// a 1 MB manifest verifies in under 20 ms, parse included).
//
// Usage: kernrt-verifier-speed FILE [RUNS]. Each run parses the text, then verifies a copy
// made outside the timed region, then checks the serving protocol; it prints the median,
// min and max of each phase in milliseconds, as wall-clock time and as this thread's CPU
// time (which a machine shared with other builds inflates less). It measures the library
// as called, not file I/O. A reference row times a plain nlohmann::json DOM parse of the
// same text (no duplicate-key check, no typed model), the floor any DOM-based parse pays.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/protocol.hpp"
#include "kernrt/manifest/verify.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Wall and CPU milliseconds of one phase.
struct Timer {
  Clock::time_point wall0 = Clock::now();
  double cpu0 = thread_cpu_ms();
  void stop(std::vector<double>* wall, std::vector<double>* cpu) const {
    wall->push_back(std::chrono::duration<double, std::milli>(Clock::now() - wall0).count());
    cpu->push_back(thread_cpu_ms() - cpu0);
  }
};

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  Stats s;
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kernrt::manifest;
  using kernrt::Result;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: kernrt-verifier-speed FILE [RUNS]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open for reading\n", argv[1]);
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int runs = argc == 3 ? std::max(1, std::atoi(argv[2])) : 20;

  // [phase][0 = wall, 1 = cpu]: parse, verify, protocol, total, reference DOM parse
  std::vector<double> ms[5][2];
  size_t calls = 0;
  for (int r = 0; r < runs; ++r) {
    const Timer t0;
    Result<Manifest> m = parse_manifest(text);
    t0.stop(&ms[0][0], &ms[0][1]);
    if (!m.value) {
      std::fprintf(stderr, "%s: %s\n", argv[1], m.errors.at(0).to_string().c_str());
      return 1;
    }
    calls = 0;
    for (const auto& p : m.value->programs) calls += p.second.calls.size();
    Manifest copy = *m.value;  // verify() consumes its argument; the copy is not counted
    const Timer t1;
    Result<Verified> v = verify(std::move(copy));
    t1.stop(&ms[1][0], &ms[1][1]);
    if (!v.value) {
      std::fprintf(stderr, "%s: %s\n", argv[1], v.errors.at(0).to_string().c_str());
      return 1;
    }
    const Timer t2;
    Result<Protocol> p = check_protocol(*v.value);
    t2.stop(&ms[2][0], &ms[2][1]);
    (void)p;
    ms[3][0].push_back(ms[0][0].back() + ms[1][0].back() + ms[2][0].back());
    ms[3][1].push_back(ms[0][1].back() + ms[1][1].back() + ms[2][1].back());
    const Timer t3;
    const nlohmann::json dom = nlohmann::json::parse(text, nullptr, false);
    t3.stop(&ms[4][0], &ms[4][1]);
    if (dom.is_discarded()) return 1;
  }
  std::printf("%s: %zu bytes, %zu calls, %d runs\n", argv[1], text.size(), calls, runs);
  std::printf("%-22s %10s %9s %9s %10s %9s %9s\n", "phase (ms)", "wall med", "min", "max",
              "cpu med", "min", "max");
  const char* const names[5] = {"parse", "verify", "protocol", "parse+verify+protocol",
                                "reference: json dom"};
  for (int i = 0; i < 5; ++i) {
    const Stats w = stats(ms[i][0]);
    const Stats c = stats(ms[i][1]);
    std::printf("%-22s %10.3f %9.3f %9.3f %10.3f %9.3f %9.3f\n", names[i], w.median, w.min, w.max,
                c.median, c.min, c.max);
  }
  return 0;
}
