// program_io as a user runs it: exit codes (0 ok, 1 rejected, 2 could not run) and the
// messages on stderr. Request problems (bad input size, var above max, topology) are
// found before the driver is opened, so these run on any machine; the "no device" case
// hides the GPU with CUDA_VISIBLE_DEVICES=-1 so it behaves the same on the H200. The
// GpuProgramIo suite runs a real round trip and skips without a device.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernrt/runtime.hpp"

namespace {

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "program_io_cli_" + std::to_string(::getpid());
    std::string cmd = "mkdir -p '" + d + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return d;
  }();
  return dir;
}

std::string temp_path(const std::string& name) { return temp_dir() + "/" + name; }

void write_bytes(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

// Runs program_io with `args` (and an optional environment prefix), capturing both streams.
Outcome run_cli(const std::string& args, const std::string& env = "") {
  const std::string out = temp_path("stdout.txt"), err = temp_path("stderr.txt");
  const std::string cmd = env + " '" + KERNRT_PROGRAM_IO + "' " + args + " >'" + out + "' 2>'" +
                          err + "'";
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

// A template from kernels/test/manifests with every @SHA256:...@ placeholder replaced by a
// well-formed hash that no cubin has: it verifies, and a load would not find the module.
std::string fake_pinned(const std::string& name) {
  std::string text =
      slurp(std::string(KERNRT_SOURCE_DIR) + "/kernels/test/manifests/" + name + ".json");
  text = std::regex_replace(text, std::regex("@SHA256:[^@]*@"), std::string(64, 'a'));
  const std::string path = temp_path(name + ".json");
  write_bytes(path, text.data(), text.size());
  return path;
}

std::string manifest_arg(const std::string& path) {
  return "--manifest '" + path + "' --cubins '" + temp_dir() + "'";
}

TEST(ProgramIoCli, HelpListsEveryOptionOnOneLine) {
  auto o = run_cli("--help");
  EXPECT_EQ(o.code, 0) << o.err;
  for (const char* opt : {"--manifest", "--cubins", "--gpu", "--program", "--env", "--graph",
                          "--iters", "--in", "--out", "--dump", "--fill", "--tokens", "--weights", "--rank",
                          "--rendezvous", "--json",
                          "--version"}) {
    std::regex line(std::string("\\n\\s*") + opt + "[^\\n]*[A-Z][a-z]+[^\\n]*\\n");
    EXPECT_TRUE(std::regex_search(o.out, line)) << opt << " in:\n" << o.out;
  }
}

TEST(ProgramIoCli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_cli("").code, 2);  // --manifest is required
  EXPECT_EQ(run_cli("--manifest /nonexistent/m.json").code, 2);
  EXPECT_EQ(run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --iters 0").code, 2);
  EXPECT_EQ(run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --bogus").code, 2);
}

TEST(ProgramIoCli, ManifestFailingVerificationExitsOne) {
  std::string text = slurp(fake_pinned("scratch_pair"));
  text.replace(text.find("\"schema_version\": 4"), 19, "\"schema_version\": 3");
  const std::string path = temp_path("v3.json");
  write_bytes(path, text.data(), text.size());
  auto o = run_cli(manifest_arg(path));
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find(path + ": /schema_version: unsupported schema_version 3"),
            std::string::npos)
      << o.err;
}

TEST(ProgramIoCli, TopologyManifestWithoutItsRanksRefusedBeforeTheDriver) {
  auto o = run_cli(manifest_arg(fake_pinned("topology")), "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("/topology/groups/tp: topology group `tp` has 2 ranks and this process was "
                       "given no index in it"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("/topology: a multi-rank load needs a rendezvous directory"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
  // An index outside the group, with a rendezvous: still before the driver.
  auto out = run_cli(manifest_arg(fake_pinned("topology")) + " --rank tp=2 --rendezvous '" + temp_dir() + "'",
                     "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(out.code, 1);
  EXPECT_NE(out.err.find("rank 2 is outside topology group `tp` of 2 rank(s)"), std::string::npos) << out.err;
  // With a valid rank the checks pass and the missing device decides.
  auto ok = run_cli(manifest_arg(fake_pinned("topology")) + " --rank tp=1 --rendezvous '" + temp_dir() + "'",
                    "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(ok.code, 2) << ok.err;
  EXPECT_NE(ok.err.find("no CUDA"), std::string::npos) << ok.err;
}

TEST(ProgramIoCli, RankFlagsSayWhatTheyExpect) {
  const std::string m = manifest_arg(fake_pinned("topology"));
  auto bad = run_cli(m + " --rank tp");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("expected GROUP=INDEX such as tp=1, found `tp`"), std::string::npos) << bad.err;
  EXPECT_EQ(run_cli(m + " --rank tp=x").code, 2);
  EXPECT_EQ(run_cli(m + " --rank =1").code, 2);
  auto twice = run_cli(m + " --rank tp=1 --rank tp=0");
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("group `tp` was given twice"), std::string::npos) << twice.err;
  EXPECT_EQ(run_cli(m + " --rank tp=1 --rendezvous /nonexistent/kernrt-job").code, 2);
}

TEST(ProgramIoCli, OversizedInputRejectedBeforeTheDriver) {
  std::vector<float> x(11, 1.0f);
  const std::string xin = temp_path("x44.bin");
  write_bytes(xin, x.data(), x.size() * sizeof(float));
  auto o = run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --env n=10 --in x=" + xin,
                   "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("/buffers/x: input `x` holds at most 40 bytes at these vars, file `" +
                       xin + "` has 44 bytes"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
}

TEST(ProgramIoCli, PartialElementRejected) {
  const std::string xin = temp_path("x6.bin");
  write_bytes(xin, "abcdef", 6);
  auto o = run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --in x=" + xin,
                   "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("has 6 bytes (not a whole number of elements)"), std::string::npos)
      << o.err;
}

TEST(ProgramIoCli, VarAboveMaxRejected) {
  auto o = run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --vars n=4097",
                   "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("/vars/n: var `n` = 4097 is outside [1, 4096]"), std::string::npos)
      << o.err;
}

TEST(ProgramIoCli, NoDeviceExitsTwo) {
  auto o = run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8",
                   "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("no CUDA driver/device"), std::string::npos) << o.err;
}

TEST(ProgramIoCli, JsonReportsRejection) {
  auto o = run_cli(manifest_arg(fake_pinned("scratch_pair")) + " --env n=0 --json",
                   "CUDA_VISIBLE_DEVICES=-1");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.out.find("\"status\":\"rejected\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"path\":\"/vars/n\""), std::string::npos) << o.out;
}

// ---- every request problem before the driver (issue 16, items 3 and 6) ------------------
// Each case runs with the GPU hidden: finding the problem must not need the driver, and the
// message must be the request's, never "no CUDA".

Outcome run_hidden(const std::string& args) { return run_cli(args, "CUDA_VISIBLE_DEVICES=-1"); }

TEST(ProgramIoChecks, VarsTheProgramReadsMustBeGiven) {
  auto o = run_hidden(manifest_arg(fake_pinned("scratch_pair")));
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("/vars/n: var `n` not given: program `main` reads it (pass --vars n=N in "
                       "[1, 4096])"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
}

TEST(ProgramIoChecks, DuplicateInputRefused) {
  const std::string a = temp_path("xa.bin"), b = temp_path("xb.bin");
  write_bytes(a, "abcd", 4);
  write_bytes(b, "efgh", 4);
  auto o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --in x=" + a +
                      " --in x=" + b);
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("/buffers/x: --in `x` is given twice"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
}

TEST(ProgramIoChecks, OutputToADirectoryOrAMissingFolderRefused) {
  auto o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --out y=" + temp_dir());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--out `y`: `" + temp_dir() + "` is a directory"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
  o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --out y=" + temp_dir() +
                 "/nowhere/y.bin");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("folder `" + temp_dir() + "/nowhere` does not exist"), std::string::npos) << o.err;
  const std::string y = temp_path("y.bin");
  o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --out y=" + y + " --dump y=" + y);
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("--dump: file `" + y + "` is named by two outputs"), std::string::npos) << o.err;
}

TEST(ProgramIoChecks, MissingWeightsFileRefused) {
  auto o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --weights " +
                      temp_path("absent.safetensors"));
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("absent.safetensors: weights file does not exist"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("no CUDA"), std::string::npos) << o.err;
}

TEST(ProgramIoChecks, CountFlagsSayWhatTheyExpect) {
  for (const char* flag : {"--iters 0", "--tokens 0", "--iters -3", "--gpu -1", "--iters 1e9"}) {
    auto o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 " + flag);
    EXPECT_EQ(o.code, 2) << flag;
    EXPECT_NE(o.err.find("expected an integer >= "), std::string::npos) << flag << ": " << o.err;
    EXPECT_LT(o.err.size(), 300u) << flag << ": " << o.err;  // once a 300-digit range
  }
}

TEST(ProgramIoChecks, FilesThatAreNotFilesRefused) {
  auto o = run_hidden("--manifest /dev/zero");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("/dev/zero: is a character device, not a regular file"), std::string::npos) << o.err;
  const std::string fifo = temp_path("pipe");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  o = run_cli("--manifest " + fifo, "CUDA_VISIBLE_DEVICES=-1 timeout 20");
  EXPECT_EQ(o.code, 2);  // not 124: the FIFO is refused, never opened for a blocking read
  EXPECT_NE(o.err.find(fifo + ": is a FIFO, not a regular file"), std::string::npos) << o.err;
  o = run_hidden(manifest_arg(fake_pinned("scratch_pair")) + " --env n=8 --in x=" + fifo);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("input file for `x` is a FIFO, not a regular file"), std::string::npos) << o.err;
  o = run_hidden("--manifest " + temp_dir());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("is a directory, expected a regular file"), std::string::npos) << o.err;
  const std::string big = temp_path("big.json");
  write_bytes(big, std::string(4096, ' ').data(), 4096);
  o = run_hidden("--max-bytes 1K --manifest " + big);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("more than the limit of 1,024 bytes; raise it with --max-bytes"), std::string::npos)
      << o.err;
}

TEST(ProgramIoChecks, ManifestNameIsPrintedEscaped) {
  const std::string evil = temp_path("evil\nok.json");
  write_bytes(evil, "[]", 2);
  auto o = run_hidden("--manifest '" + evil + "'");
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("evil\\nok.json: /: "), std::string::npos) << o.err;
}

// ---- on a device ---------------------------------------------------------------------------

class GpuProgramIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!kernrt::device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    manifest_ = std::string(KERNRT_BINARY_DIR) + "/manifests/test/scratch_pair.json";
    if (!std::ifstream(manifest_)) GTEST_SKIP() << "test kernels not built: " << manifest_;
  }
  std::string manifest_;
};

TEST_F(GpuProgramIo, ScratchPairRoundTripEagerAndTimedGraph) {
  const int n = 1000;
  std::vector<float> x(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  const std::string xin = temp_path("x.bin"), yout = temp_path("y.bin");
  write_bytes(xin, x.data(), x.size() * sizeof(float));
  const std::string base = "--manifest '" + manifest_ + "' --cubins '" + KERNRT_BINARY_DIR +
                           "/cubins/run' --env n=1000 --in x=" + xin + " --out y=" + yout;
  for (const std::string extra : {"", " --graph --iters 20"}) {
    std::remove(yout.c_str());
    auto o = run_cli(base + extra);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("`main` ran with {n=1000}"), std::string::npos) << o.out;
    if (!extra.empty()) {
      EXPECT_NE(o.out.find("timing: 20 iters, median"), std::string::npos) << o.out;
      EXPECT_NE(o.out.find("graph replay"), std::string::npos) << o.out;
    }
    const std::string y = slurp(yout);
    ASSERT_EQ(y.size(), 4096u * sizeof(float));  // the whole allocation, at n's max
    std::vector<float> got(n);
    std::memcpy(got.data(), y.data(), n * sizeof(float));
    for (int i = 0; i < n; ++i) {
      const float want = 2.0f * x[n - 1 - i] + x[i];
      ASSERT_EQ(got[i], want) << "y[" << i << "]" << extra;
    }
  }
}

// --fill repeats a pattern over a paged state sized by --tokens (the last copy cut at the
// end); --dump reads it back. A pattern larger than the state is refused, nothing written.
TEST_F(GpuProgramIo, FillRepeatsAPatternOverAStateSizedByTokens) {
  std::vector<uint8_t> pattern(48);
  std::mt19937 rng(11);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng());
  const std::string pin = temp_path("pattern.bin"), xin = temp_path("x1.bin");
  const std::string dump = temp_path("pool.bin"), yout = temp_path("y1.bin");
  write_bytes(pin, pattern.data(), pattern.size());
  const float one = 1.0f;
  write_bytes(xin, &one, sizeof one);
  const std::string base = "--manifest '" + manifest_ + "' --cubins '" + KERNRT_BINARY_DIR +
                           "/cubins/run' --env n=1 --in x=" + xin + " --out y=" + yout;
  auto o = run_cli(base + " --tokens 1000 --fill pool=" + pin + " --dump pool=" + dump);
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string got = slurp(dump);
  ASSERT_EQ(got.size(), 16000u);  // 16 bytes per token x 1000 tokens
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(static_cast<uint8_t>(got[i]), pattern[i % pattern.size()]) << "pool byte " << i;
  }
  o = run_cli(base + " --tokens 2 --fill pool=" + pin);  // 32-byte state, 48-byte pattern
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("more than state `pool` holds (32 bytes"), std::string::npos) << o.err;
}

// A kernel artifact that is a host shared library: libkernrt_test_hostlib.so, built by nvcc
// from two translation units (two fatbin containers), pinned by the hash of the whole file.
// The two entries are in different containers (nvcc may add one of its own before them).
// y = (x + 1) * 3, exact in f32, eagerly and as a replayed graph; program_io says the
// module came from the .so.
TEST(GpuProgramIoHostLib, KernelsFromASharedLibraryRunThroughProgramIo) {
  std::string why;
  if (!kernrt::device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const std::string manifest = std::string(KERNRT_BINARY_DIR) + "/manifests/test/hostlib.json";
  const std::string so = std::string(KERNRT_BINARY_DIR) + "/cubins/run/libkernrt_test_hostlib.so";
  if (!std::ifstream(manifest) || !std::ifstream(so)) GTEST_SKIP() << "test kernels not built: " << manifest;
  const int n = 1000;
  std::vector<float> x(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (auto& v : x) v = dist(rng);
  const std::string xin = temp_path("hx.bin"), yout = temp_path("hy.bin");
  write_bytes(xin, x.data(), x.size() * sizeof(float));
  const std::string base = "--manifest '" + manifest + "' --cubins '" + KERNRT_BINARY_DIR +
                           "/cubins/run' --env n=1000 --in x=" + xin + " --out y=" + yout;
  for (const std::string extra : {"", " --graph --iters 5"}) {
    std::remove(yout.c_str());
    auto o = run_cli(base + extra);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("module `hostlib`: `" + so + "`"), std::string::npos) << o.out;
    const std::string y = slurp(yout);
    ASSERT_EQ(y.size(), 4096u * sizeof(float));
    std::vector<float> got(n);
    std::memcpy(got.data(), y.data(), n * sizeof(float));
    for (int i = 0; i < n; ++i) {
      const float plus_one = x[i] + 1.0f;
      ASSERT_EQ(got[i], plus_one * 3.0f) << "y[" << i << "]" << extra;
    }
  }
}

}  // namespace
