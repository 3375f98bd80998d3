// Graph mode on a GPU: a captured-and-replayed program produces the same bytes as the
// eager launches of the same program and vars (every test manifest), 1000 replays stay
// bit-identical and read each step's new inputs, and every replay runs every launch.
#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

class GpuGraph : public GpuTest {};

struct Case {
  const char* manifest;
  std::map<std::string, uint64_t> vars;
  std::vector<std::pair<std::string, size_t>> inputs;  // f32 input and element count
  std::vector<std::string> outputs;
};

TEST_F(GpuGraph, EagerAndGraphBitIdentical) {
  const std::vector<Case> cases = {
      {"tma_copy", {}, {{"src2", 32 * 80}, {"src3", 4 * 16 * 64}}, {"dst2", "dst3", "dst3_shift"}},
      {"pack_echo", {{"n", 37}}, {{"x", 80}}, {"out"}},
      {"scratch_pair", {{"n", 777}}, {{"x", 4096}}, {"y"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.manifest);
    KERNRT_LOAD_OR_FAIL(rt, c.manifest);
    uint32_t seed = 100;
    for (const auto& [name, count] : c.inputs) write(rt, name, random_floats(count, seed++));
    std::map<std::string, std::vector<uint8_t>> eager;
    for (const auto& o : c.outputs) poison(rt, o);
    KERNRT_ASSERT_OK(rt.run("main", c.vars, false));
    for (const auto& o : c.outputs) eager[o] = read(rt, o);
    for (int round = 0; round < 2; ++round) {  // the capture run, then a cached replay
      for (const auto& o : c.outputs) poison(rt, o);
      KERNRT_ASSERT_OK(rt.run("main", c.vars, true));
      for (const auto& o : c.outputs) {
        ASSERT_EQ(read(rt, o), eager[o]) << "output `" << o << "` round " << round;
      }
    }
    EXPECT_EQ(rt.graph_cache_size(), 1u);
  }
}

TEST_F(GpuGraph, ThousandReplaysBitIdenticalAndReadNewInputs) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const std::map<std::string, uint64_t> vars = {{"n", 4096}};
  const auto x = random_floats(4096, 7);
  write(rt, "x", x);
  KERNRT_ASSERT_OK(rt.run("main", vars, false));
  const auto reference = read(rt, "y");
  for (int i = 1; i <= 1000; ++i) {
    KERNRT_ASSERT_OK(rt.run("main", vars, true));
    if (i % 100 == 0) {
      ASSERT_EQ(read(rt, "y"), reference) << "after replay " << i;
    }
  }
  // Input contents are read at replay: a new x gives the new result, without a recapture.
  const auto x2 = random_floats(4096, 8);
  write(rt, "x", x2);
  KERNRT_ASSERT_OK(rt.run("main", vars, true));
  const auto y = as<float>(read(rt, "y"));
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(y[i], 2.0f * x2[4095 - i] + x2[i]) << "y[" << i << "]";
  EXPECT_EQ(rt.graph_cache_size(), 1u);
}

TEST_F(GpuGraph, EveryReplayRunsEveryLaunch) {
  KERNRT_LOAD_OR_FAIL(rt, "tiny100");
  ASSERT_EQ(rt.launch_count("step"), 100u);
  const uint32_t before = as<uint32_t>(read(rt, "counter")).at(0);
  KERNRT_ASSERT_OK(rt.run("step", {}, false));
  for (int i = 0; i < 1000; ++i) KERNRT_ASSERT_OK(rt.run("step", {}, true));
  const uint32_t after = as<uint32_t>(read(rt, "counter")).at(0);
  EXPECT_EQ(after - before, 100u * 1001u);
}

}  // namespace
}  // namespace kernrt::gputest
