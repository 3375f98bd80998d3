// The GEMM built-ins on a GPU (cuBLASLt opened at run time): C = A·Wᵀ in bf16 and in f32,
// C += A·Wᵀ, row strides for A and C, m from a var, eager and graph bit-identical, and
// nothing written outside the m x n window (rows past m, C's padding columns). Host
// references in double from the same bf16 inputs.
#include <cmath>
#include <cstring>

#include "gemm_manifest.hpp"
#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

constexpr int kM = 64, kN = 96, kK = 128, kLda = 136, kLdc = 104;

uint16_t to_bf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);  // round to nearest even
}

float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

class GpuGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device_available(&why)) GTEST_SKIP() << why;
    auto v = manifest::verify_json(testing::kGemmManifest);
    ASSERT_TRUE(v) << messages(v.errors);
    auto r = Runtime::load(*v.value, LoadOptions{});
    ASSERT_TRUE(r) << messages(r.errors);
    rt_ = std::move(*r.value);
    const auto fa = random_floats(kM * kLda, 41), fw = random_floats(kN * kK, 42);
    for (float f : fa) a_.push_back(to_bf16(f));
    for (float f : fw) w_.push_back(to_bf16(f));
    KERNRT_ASSERT_OK(rt_->write_input("a", a_.data(), a_.size() * 2));
    KERNRT_ASSERT_OK(rt_->write_input("w", w_.data(), w_.size() * 2));
  }
  double ref(int i, int j) const {
    double s = 0;
    for (int k = 0; k < kK; ++k) s += double(from_bf16(a_[i * kLda + k])) * from_bf16(w_[j * kK + k]);
    return s;
  }
  std::unique_ptr<Runtime> rt_;
  std::vector<uint16_t> a_, w_;
};

TEST_F(GpuGemm, Bf16OutputWithStridesAndAVarRowCount) {
  for (int m : {kM, 37}) {
    SCOPED_TRACE("m = " + std::to_string(m));
    poison(*rt_, "c");
    KERNRT_ASSERT_OK(rt_->run("gemm", {{"m", static_cast<uint64_t>(m)}}));
    const auto c = as<uint16_t>(read(*rt_, "c"));
    double err = 0, norm = 0;
    for (int i = 0; i < kM; ++i) {
      for (int j = 0; j < kLdc; ++j) {
        const uint16_t got = c[i * kLdc + j];
        if (i >= m || j >= kN) {
          ASSERT_EQ(got, 0xFFFF) << "written outside the window at [" << i << "][" << j << "]";
          continue;
        }
        const double want = ref(i, j);
        err += (from_bf16(got) - want) * (from_bf16(got) - want);
        norm += want * want;
      }
    }
    EXPECT_LT(std::sqrt(err / norm), 4e-3) << "bf16 output: rounding is ~2e-3";
  }
}

TEST_F(GpuGemm, F32OutputAndAccumulateAndGraphs) {
  poison(*rt_, "cf");
  KERNRT_ASSERT_OK(rt_->run("gemm_f32", {{"m", kM}}));
  const auto cf = as<float>(read(*rt_, "cf"));
  double err = 0, norm = 0;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      const double d = cf[i * kN + j] - ref(i, j);
      err += d * d;
      norm += ref(i, j) * ref(i, j);
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-5) << "f32 accumulation of exact bf16 products";

  KERNRT_ASSERT_OK(rt_->run("gemm", {{"m", kM}}));
  const auto once = as<uint16_t>(read(*rt_, "c"));
  KERNRT_ASSERT_OK(rt_->run("gemm_acc", {{"m", kM}}));  // C = round(round(A·Wᵀ) + A·Wᵀ)
  const auto twice = as<uint16_t>(read(*rt_, "c"));
  double e2 = 0, n2 = 0;
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      const double want = double(from_bf16(once[i * kLdc + j])) + ref(i, j);
      const double d = from_bf16(twice[i * kLdc + j]) - want;
      e2 += d * d;
      n2 += want * want;
    }
  }
  EXPECT_LT(std::sqrt(e2 / n2), 4e-3);

  KERNRT_ASSERT_OK(rt_->run("gemm", {{"m", kM}}, true));  // captured, then replayed
  KERNRT_ASSERT_OK(rt_->run("gemm", {{"m", kM}}, true));
  EXPECT_EQ(as<uint16_t>(read(*rt_, "c")), once) << "graph replay differs from eager";
}

}  // namespace
}  // namespace kernrt::gputest
