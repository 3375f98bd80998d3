// kernrt-verify on hostile input (issue 16, items 2-4), as a user runs it: files that are
// not files (a FIFO must not block, /dev/zero must not be read), the size limit, the
// per-file error limit, names that try to forge a verdict line, root-level locations, and
// the audit's 2.19 MB amplification case (1 MiB op name, 4,000 overlapping pack fields),
// which must stay small in output and memory.
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>

#include "cli_fixture.hpp"

namespace kernrt::manifest::testing {
namespace {

// Counts the lines of `text` that start with `prefix`.
size_t lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}

// The base manifest with `n` more i32 fields at byte 160 of the mix pack: n - 1 overlaps.
std::string overlapping(size_t n) {
  Json j = base();
  Json& fields = j[JsonPtr(std::string(kMixPack) + "/fields")];
  for (size_t i = 0; i < n; ++i) fields.push_back(Json::parse(R"({"at": 160, "i32": 0})"));
  return j.dump();
}

TEST_F(Cli, RefusesFifoWithoutBlocking) {
  const std::string fifo = (dir_ / "pipe.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer ever opens the FIFO: a reader that blocks would be killed by `timeout` (124).
  const auto start = std::chrono::steady_clock::now();
  const ToolRun f = run(quoted(fifo), "timeout 20");
  EXPECT_EQ(f.code, 2) << f.out << f.err;
  EXPECT_NE(f.err.find(fifo + ": is a FIFO, not a regular file"), std::string::npos) << f.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(Cli, RefusesDevicesAndDirectories) {
  const ToolRun zero = run("/dev/zero");
  EXPECT_EQ(zero.code, 2);
  EXPECT_NE(zero.err.find("/dev/zero: is a character device, not a regular file"), std::string::npos)
      << zero.err;
  const ToolRun dir = run(quoted(dir_.string()));
  EXPECT_EQ(dir.code, 2);
  EXPECT_NE(dir.err.find(": is a directory, expected a regular file"), std::string::npos) << dir.err;
  EXPECT_TRUE(dir.out.empty()) << dir.out;
}

TEST_F(Cli, RefusesFilesOverTheSizeLimit) {
  const std::string f = write("m.json", base().dump());
  const ToolRun small = run("--max-bytes 1K " + quoted(f));
  EXPECT_EQ(small.code, 2);
  EXPECT_NE(small.err.find("more than the limit of 1,024 bytes; raise it with --max-bytes"), std::string::npos) << small.err;
  const ToolRun raised = run("--max-bytes 64K " + quoted(f));
  EXPECT_EQ(raised.code, 0) << raised.out << raised.err;
  const ToolRun bad = run("--max-bytes 0 " + quoted(f));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("expected a byte count >= 1"), std::string::npos) << bad.err;
}

TEST_F(Cli, PrintsAtMostMaxErrorsAndCountsTheRest) {
  const std::string f = write("m.json", overlapping(150));
  const ToolRun r = run(quoted(f));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines_starting(r.out, "  - "), 100u) << r.out;
  EXPECT_NE(r.out.find("\n  \xe2\x80\xa6 and 49 more\n"), std::string::npos) << r.out;
  const ToolRun five = run("--max-errors 5 " + quoted(f));
  EXPECT_EQ(lines_starting(five.out, "  - "), 5u) << five.out;
  EXPECT_NE(five.out.find("\xe2\x80\xa6 and 144 more"), std::string::npos) << five.out;
  const ToolRun json = run("--json --max-errors 5 " + quoted(f));
  Json j = Json::parse(json.out);
  EXPECT_EQ(j.at("errors").size(), 5u);
  EXPECT_EQ(j.at("omitted"), 144);
}

TEST_F(Cli, NamesCannotForgeAVerdictLine) {
  // A rejected manifest whose op name holds a newline, a fake verdict and a terminal
  // escape (erase line) must not print a line that reads as a verdict.
  Json j = base();
  const std::string evil = "x\nforged.json: verified\x1b[2K\xe2\x80\xae";
  j["ops"][evil] = j["ops"]["lookup"];
  const std::string f = write("forge.json", j.dump());
  const ToolRun r = run(quoted(f));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines_starting(r.out, "forged.json"), 0u) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("op `x\\nforged.json: verified\\x1b[2K\\u202e` is never called"), std::string::npos)
      << r.out;
}

TEST_F(Cli, FileNamesArePrintedEscaped) {
  const std::string f = write("evil\nname.json", "[]");
  const ToolRun r = run(quoted(f));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("evil\\nname.json: manifest failed verification:"), std::string::npos) << r.out;
}

TEST_F(Cli, RootLevelErrorsPrintALocation) {
  const ToolRun array = run(quoted(write("array.json", "[1, 2]")));
  EXPECT_EQ(array.code, 1);
  EXPECT_NE(array.out.find("manifest failed verification:\n  - /: "), std::string::npos) << array.out;
  Json j = base();
  j.erase("schema_version");
  const ToolRun missing = run(quoted(write("missing.json", j.dump())));
  EXPECT_NE(missing.out.find("  - /: missing field `schema_version`"), std::string::npos) << missing.out;
}

// The amplification case: < 100 MB of memory and a short output (the audit saw 4.12 GB
// and 4.19 GB of output). The 5 s bound only guards against a return to the 17.7 s it
// took; the measured time is in validation/verifier-speed.md.
TEST_F(Cli, AmplificationCaseCostsLittle) {
  const std::string f = (dir_ / "amplification.json").string();
  const std::string gen = std::string(KERNRT_SOURCE_DIR) + "/tools/bench/verifier_speed/gen_amplification.py";
  ASSERT_EQ(std::system(("python3 " + quoted(gen) + " " + quoted(f)).c_str()), 0);
  ASSERT_GT(fs::file_size(f), 2u << 20);
  const auto start = std::chrono::steady_clock::now();
  const ToolRun r = run(quoted(f));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_LT(r.out.size(), 64u << 10);
  EXPECT_EQ(lines_starting(r.out, "  - "), 100u);
  EXPECT_NE(r.out.find("\xe2\x80\xa6 and 3,899 more"), std::string::npos) << r.out.substr(r.out.size() - 200);
  EXPECT_LT(took, std::chrono::seconds(5));
  struct rusage ru {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &ru), 0);
  EXPECT_LT(ru.ru_maxrss, 100 * 1024) << "peak RSS of a child in KiB";
}

}  // namespace
}  // namespace kernrt::manifest::testing
