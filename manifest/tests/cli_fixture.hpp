// The kernrt-verify CLI tests' fixture: runs the built binary (KERNRT_BINARY_DIR/bin) with
// arguments in a fresh temporary folder per test and captures exit code, stdout, stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "verify_fixture.hpp"

namespace kernrt::manifest::testing {

namespace fs = std::filesystem;

inline const fs::path kTool = fs::path(KERNRT_BINARY_DIR) / "bin" / "kernrt-verify";
inline const fs::path kCorpus = fs::path(KERNRT_SHARED_DIR) / "corpus";

struct ToolRun {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kTool)) << "kernrt-verify not built at " << kTool;
    dir_ = fs::temp_directory_path() /
           ("kernrt_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  // Runs the tool with `args`, behind an optional command `prefix` (e.g. "timeout 20").
  ToolRun run(const std::string& args, const std::string& prefix = "") {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    const std::string cmd = prefix + " " + quoted(kTool.string()) + " " + args + " >" + quoted(out.string()) + " 2>" +
                            quoted(err.string());
    const int status = std::system(cmd.c_str());
    ToolRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;  // a signal (crash) is never ok
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Malformed input must be rejected (exit 1) with a message, never crash.
  void expect_rejected_input(const std::string& name, const std::string& bytes) {
    const std::string f = write(name, bytes);
    const ToolRun r = run(quoted(f));
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find(f + ": manifest failed verification:\n  - "), std::string::npos) << r.out;
  }

  fs::path dir_;
};

inline std::string corpus(const std::string& f) { return quoted((kCorpus / f).string()); }

}  // namespace kernrt::manifest::testing
