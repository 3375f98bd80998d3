// Shared helpers of the runtime's GPU tests (test_gpu_*.cpp): where the pinned test
// manifests and cubins are, loading one through the public API, seeded random data, and
// the skip rules. A GPU test skips when no device is present or when the test kernels
// were not built (KERNRT_BUILD_KERNELS=OFF); a refusal test that needs no device skips
// only in the second case.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"

namespace kernrt::gputest {

inline std::string test_manifest(const std::string& name) {
  return std::string(KERNRT_BINARY_DIR) + "/manifests/test/" + name + ".json";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool artifacts_built() { return std::filesystem::exists(test_manifest("scratch_pair")); }

inline std::string messages(const Errors& errors) {
  std::string s;
  for (const auto& e : errors) s += e.to_string() + "\n";
  return s;
}

// Verifies a pinned test manifest, then loads it from `cubin_dir`.
inline Result<std::unique_ptr<Runtime>> load(const std::string& name,
                                             const std::string& cubin_dir = KERNRT_CUBIN_DIR) {
  auto v = manifest::verify_json(read_text(test_manifest(name)));
  if (!v) return Result<std::unique_ptr<Runtime>>::fail(v.errors);
  LoadOptions o;
  o.cubin_dirs = {cubin_dir};
  return Runtime::load(*v.value, o);
}

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

template <class T>
std::vector<T> as(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Fills a whole buffer with 0xFF bytes (a NaN for floats), so unwritten elements show.
inline void poison(Runtime& rt, const std::string& buffer) {
  std::vector<uint8_t> junk(rt.buffer_bytes(buffer), 0xFF);
  auto e = rt.write_buffer(buffer, junk.data(), junk.size());
  ASSERT_FALSE(e) << e->to_string();
}

inline std::vector<uint8_t> read(Runtime& rt, const std::string& buffer) {
  std::vector<uint8_t> out;
  auto e = rt.read_buffer(buffer, &out);
  EXPECT_FALSE(e) << e->to_string();
  return out;
}

template <class T>
void write(Runtime& rt, const std::string& buffer, const std::vector<T>& data) {
  auto e = rt.write_input(buffer, data.data(), data.size() * sizeof(T));
  ASSERT_FALSE(e) << e->to_string();
}

// Base of every Gpu* suite: skips without a device or without the built test kernels.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device_available(&why)) GTEST_SKIP() << why;
    if (!artifacts_built()) GTEST_SKIP() << "test kernels not built: " << test_manifest("*");
  }
};

#define KERNRT_ASSERT_OK(expr)                                    \
  do {                                                            \
    auto kernrt_err_ = (expr);                                    \
    ASSERT_FALSE(kernrt_err_) << kernrt_err_->to_string();        \
  } while (0)

#define KERNRT_LOAD_OR_FAIL(var, name)                                      \
  auto var##_loaded = ::kernrt::gputest::load(name);                        \
  ASSERT_TRUE(var##_loaded) << ::kernrt::gputest::messages(var##_loaded.errors); \
  ::kernrt::Runtime& var = **var##_loaded.value

}  // namespace kernrt::gputest
