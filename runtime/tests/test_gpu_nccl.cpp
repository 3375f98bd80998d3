// The NCCL built-ins on one GPU: a one-rank communicator for group `tp` (the runtime mints
// the id and joins it at load), each collective enqueued on the compute stream. With one
// rank an all-reduce, all-gather and reduce-scatter copy their first n elements; the test
// checks that, that nothing past n is written, and that graph replay gives the same bytes.
// Skips without a device or without libnccl.so.2 (the refusal is then the loader's).
#include "nccl.hpp"
#include "nccl_manifest.hpp"
#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

class GpuNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device_available(&why)) GTEST_SKIP() << why;
    auto lib = rt::Nccl::open();
    if (!lib) GTEST_SKIP() << lib.errors[0].message;
    auto v = manifest::verify_json(testing::kNcclManifest);
    ASSERT_TRUE(v) << messages(v.errors);
    auto r = Runtime::load(*v.value, LoadOptions{});
    ASSERT_TRUE(r) << messages(r.errors);
    rt_ = std::move(*r.value);
  }
  std::unique_ptr<Runtime> rt_;
};

TEST_F(GpuNccl, OneRankAllReduceCopiesTheFirstNElementsEagerAndUnderGraphReplay) {
  std::vector<uint16_t> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(0x3F80 + (i % 97));  // bf16 1.0..
  write(*rt_, "x", x);
  for (bool graph : {false, true}) {
    for (uint64_t n : {uint64_t{1024}, uint64_t{300}}) {
      SCOPED_TRACE(std::string(graph ? "graph" : "eager") + " n = " + std::to_string(n));
      poison(*rt_, "y");
      KERNRT_ASSERT_OK(rt_->run("all_reduce", {{"n", n}}, graph));
      const auto y = as<uint16_t>(read(*rt_, "y"));
      ASSERT_EQ(y.size(), x.size());
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], i < n ? x[i] : uint16_t{0xFFFF}) << "element " << i;
      }
    }
  }
  EXPECT_GE(rt_->graph_cache_size(), 2u);
}

TEST_F(GpuNccl, OneRankAllGatherAndReduceScatter) {
  std::vector<float> g(256);
  std::vector<int32_t> h(256);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.5f * static_cast<float>(i) - 3.0f;
    h[i] = static_cast<int32_t>(i * 7) - 900;
  }
  write(*rt_, "g", g);
  write(*rt_, "h", h);
  poison(*rt_, "gy");
  poison(*rt_, "hy");
  KERNRT_ASSERT_OK(rt_->run("all_gather", {}));
  KERNRT_ASSERT_OK(rt_->run("reduce_scatter", {}));
  EXPECT_EQ(as<float>(read(*rt_, "gy")), g);
  EXPECT_EQ(as<int32_t>(read(*rt_, "hy")), h);
}

}  // namespace
}  // namespace kernrt::gputest
