// A `once` program runs exactly once, right after load (kern-schema §1.14): once.json's
// `init` adds 3 to a carry counter, `step` adds 1. Each load starts from a zeroed counter.
#include <cstdint>

#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

class GpuOnce : public GpuTest {};

uint32_t counter(Runtime& rt) {
  const auto v = as<uint32_t>(read(rt, "counter"));
  return v.empty() ? 0u : v[0];
}

TEST_F(GpuOnce, OnceProgramRunsExactlyOnceAtLoad) {
  {
    KERNRT_LOAD_OR_FAIL(rt, "once");
    EXPECT_EQ(counter(rt), 3u) << "`init` did not run exactly once at load";
    KERNRT_ASSERT_OK(rt.run("step", {}));
    KERNRT_ASSERT_OK(rt.run("step", {}, /*graph=*/true));
    EXPECT_EQ(counter(rt), 5u) << "running `step` ran `init` again";
  }
  KERNRT_LOAD_OR_FAIL(again, "once");
  EXPECT_EQ(counter(again), 3u) << "a second load did not start from a zeroed counter";
}

}  // namespace
}  // namespace kernrt::gputest
