// State writes through the Runtime API on a GPU: write_state_at lands its bytes at the
// offset and nowhere else (states start zeroed); a write past the end, an offset past the
// end or an unknown state is a Caller error that changes nothing; and a kernel bound to
// states reads and writes what the host wrote (scratch_pair's `double_state`: blob = 2 pool).
#include <cstdint>
#include <vector>

#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

class GpuStates : public GpuTest {};

std::vector<uint8_t> state(Runtime& rt, const std::string& name) {
  std::vector<uint8_t> out;
  auto e = rt.read_state(name, &out);
  EXPECT_FALSE(e) << e->to_string();
  return out;
}

TEST_F(GpuStates, WriteAtOffsetLandsThereOnlyAndRefusalsChangeNothing) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  ASSERT_EQ(rt.state_bytes("blob"), 16384u);
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  KERNRT_ASSERT_OK(rt.write_state_at("blob", 100, data.data(), data.size()));
  KERNRT_ASSERT_OK(rt.write_state_at("blob", 16384 - 4, data.data(), 4));  // up to the end
  auto want = std::vector<uint8_t>(16384, 0);
  std::copy(data.begin(), data.end(), want.begin() + 100);
  std::copy(data.begin(), data.begin() + 4, want.end() - 4);
  ASSERT_EQ(state(rt, "blob"), want);

  auto e = rt.write_state_at("blob", 16192, data.data(), 200);  // 8 bytes past the end
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, ErrorKind::Caller);
  EXPECT_EQ(e->path, "/states/blob");
  EXPECT_NE(e->message.find("at most 192 bytes, got 200"), std::string::npos) << e->message;
  e = rt.write_state_at("blob", 16385, data.data(), 0);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("offset 16385 is past the end of state `blob` (16384 bytes)"),
            std::string::npos) << e->message;
  e = rt.write_state_at("nope", 0, data.data(), 1);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("unknown state `nope`"), std::string::npos) << e->message;
  EXPECT_EQ(state(rt, "blob"), want) << "a refused write changed the state";

  // The pool's second half written at an offset, then the kernel doubles all of it.
  const auto pool = random_floats(4096, 31);
  KERNRT_ASSERT_OK(rt.write_state_at("pool", 0, pool.data(), 2048 * 4));
  KERNRT_ASSERT_OK(rt.write_state_at("pool", 2048 * 4, pool.data() + 2048, 2048 * 4));
  write(rt, "x", random_floats(4096, 32));
  KERNRT_ASSERT_OK(rt.run("main", {{"n", 4096}}));
  const auto blob = as<float>(state(rt, "blob"));
  ASSERT_EQ(blob.size(), 4096u);
  for (size_t i = 0; i < blob.size(); ++i) ASSERT_EQ(blob[i], 2.0f * pool[i]) << "blob[" << i << "]";
}

}  // namespace
}  // namespace kernrt::gputest
