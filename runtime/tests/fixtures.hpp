// Shared helpers of the runtime CPU tests: reading repository files, verifying manifests,
// temporary directories, and a fake tensormap encoder that records what it was asked.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernrt/manifest/parse.hpp"
#include "kernrt/manifest/verify.hpp"
#include "lower.hpp"
#include "memory.hpp"
#include "tensormap.hpp"

namespace kernrt::testing {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string source_path(const std::string& rel) {
  return std::string(KERNRT_SOURCE_DIR) + "/" + rel;
}
inline std::string shared_path(const std::string& rel) {
  return std::string(KERNRT_SHARED_DIR) + "/" + rel;
}

inline manifest::Manifest parse_file(const std::string& path) {
  auto r = manifest::parse_manifest(read_text(path));
  EXPECT_TRUE(r) << path << ": " << (r.errors.empty() ? "" : r.errors[0].to_string());
  return r ? *r.value : manifest::Manifest{};
}

inline Result<manifest::Verified> verify_file(const std::string& path) {
  return manifest::verify_json(read_text(path));
}

inline std::string all_messages(const Errors& errors) {
  std::string s;
  for (const auto& e : errors) s += e.to_string() + "\n";
  return s;
}

// Fake device addresses for a memory plan: every allocation 256-byte aligned, in name
// order, with a gap after each so an overrun lands outside every other region.
inline rt::Allocations fake_allocations(const rt::MemoryPlan& plan, uint64_t base = 0x7f0000000000,
                                        uint64_t gap = 256) {
  rt::Allocations a;
  uint64_t next = base;
  auto take = [&](uint64_t bytes) {
    rt::Region r{next, bytes};
    next += (bytes + 255) / 256 * 256 + gap;
    return r;
  };
  for (const auto& [n, b] : plan.buffers) a.buffers[n] = take(b);
  for (const auto& [n, b] : plan.states) a.states[n] = take(b);
  for (const auto& [op, s] : plan.scratch) {
    for (const auto& [n, b] : s) a.scratch[op][n] = take(b);
  }
  return a;
}

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kernrt-rt-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Records every spec; the blob is 128 copies of (call number + 1), so tests can see which
// descriptor landed where.
class FakeEncoder : public rt::TensorMapEncoder {
 public:
  Result<rt::TensorMapBlob> encode(const rt::TensorMapSpec& spec, const std::string& path) override {
    specs.push_back(spec);
    paths.push_back(path);
    rt::TensorMapBlob blob;
    blob.fill(static_cast<uint8_t>(specs.size()));
    return Result<rt::TensorMapBlob>::ok(blob);
  }
  std::vector<rt::TensorMapSpec> specs;
  std::vector<std::string> paths;
};

}  // namespace kernrt::testing
