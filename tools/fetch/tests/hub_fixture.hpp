// The fetch tests' fixture: a fake hub (fake_hub.py) on 127.0.0.1 with files laid out as
// <root>/<org>/<repo>/<revision>/<path>, a fresh cache folder per test, and fetch Options
// pointing at both. The server exits by itself after 60 s and is killed at teardown.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fetch.hpp"
#include "kernrt/manifest/sha256.hpp"

namespace kernrt::fetch::testing {

namespace fs = std::filesystem;

// `n` deterministic bytes that differ per seed.
inline std::string payload(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Hub : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kernrt_fetch_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root");
    const std::string port_file = (dir_ / "port").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("python3", "python3", KERNRT_FAKE_HUB, (dir_ / "root").c_str(), port_file.c_str(),
               (dir_ / "log").c_str(), "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ASSERT_GT(pid_, 0);
    for (int i = 0; i < 200 && !fs::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(fs::exists(port_file)) << "fake hub did not start";
    endpoint_ = "http://127.0.0.1:" + slurp(port_file);
    options_.cache_dir = (dir_ / "cache").string();
    options_.endpoint = endpoint_;
    options_.stall_timeout_s = 1;
    options_.connect_timeout_s = 5;
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  // Puts `bytes` on the hub at org/repo/<revision>/<path>.
  void serve(const std::string& path, const std::string& bytes, const std::string& revision = "main") {
    const fs::path p = dir_ / "root" / "org" / "repo" / revision / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }

  static manifest::Module module(const std::string& source, const std::string& bytes) {
    return manifest::Module{source, sha256_hex(bytes)};
  }

  std::string blob(const std::string& bytes) const {
    return (dir_ / "cache" / "blobs" / sha256_hex(bytes)).string();
  }
  std::string log() const { return slurp(dir_ / "log"); }
  size_t requests() const {
    const std::string l = log();
    return static_cast<size_t>(std::count(l.begin(), l.end(), '\n'));
  }
  // Nothing but the lock file may be left in blobs/ besides verified blobs.
  bool partial_left(const std::string& bytes) const {
    return fs::exists(blob(bytes) + ".partial");
  }

  fs::path dir_;
  pid_t pid_ = -1;
  std::string endpoint_;
  Options options_;
};

}  // namespace kernrt::fetch::testing
