// The test manifests through the Runtime API on a GPU: a TMA copy through runtime-encoded
// descriptors (2-D window with a row stride, 3-D with a spanning outer dim, also at a call
// offset), the 1280-byte pack image landing field by field, and a two-launch op through
// scratch. Checks are bit-exact against host references; outputs are poisoned first.
#include <cstddef>
#include <cstdint>

#include "../../kernels/test/params.h"
#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

class GpuKernels : public GpuTest {};

TEST_F(GpuKernels, TmaCopyWindowAndSpanningDim) {
  KERNRT_LOAD_OR_FAIL(rt, "tma_copy");
  const auto src2 = random_floats(32 * 80, 1);
  const auto src3 = random_floats(4 * 16 * 64, 2);
  write(rt, "src2", src2);
  write(rt, "src3", src3);
  for (const char* b : {"dst2", "dst3", "dst3_shift"}) poison(rt, b);
  KERNRT_ASSERT_OK(rt.run("main", {}));

  const auto dst2 = as<float>(read(rt, "dst2"));
  ASSERT_EQ(dst2.size(), 32u * 64u);
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 64; ++c) {
      ASSERT_EQ(dst2[r * 64 + c], src2[r * 80 + c]) << "dst2[" << r << "][" << c << "]";
    }
  }
  const auto dst3 = as<float>(read(rt, "dst3"));
  ASSERT_EQ(dst3.size(), src3.size());
  for (size_t i = 0; i < src3.size(); ++i) ASSERT_EQ(dst3[i], src3[i]) << "dst3 element " << i;

  // Called one 4 KiB page in: the spanning dim resolves to 3 pages, so page 3 of the
  // output is TMA's zero fill, not a read past the allocation.
  const auto shift = as<float>(read(rt, "dst3_shift"));
  const size_t page = 16 * 64;
  for (size_t i = 0; i < 3 * page; ++i) {
    ASSERT_EQ(shift[i], src3[i + page]) << "dst3_shift element " << i;
  }
  for (size_t i = 3 * page; i < 4 * page; ++i) {
    ASSERT_EQ(shift[i], 0.0f) << "dst3_shift element " << i << " (past the spanned extent)";
  }
}

// Reads a little-endian value of `width` bytes at `at`.
uint64_t le(const std::vector<uint8_t>& b, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}

TEST_F(GpuKernels, PackEchoFieldsLandExactly) {
  using test::EchoBlock;
  KERNRT_LOAD_OR_FAIL(rt, "pack_echo");
  const auto x = random_floats(80, 3);
  write(rt, "x", x);
  const uint64_t x_addr = rt.buffer_address("x");
  const uint64_t out_addr = rt.buffer_address("out");
  ASSERT_NE(x_addr, 0u);
  ASSERT_NE(out_addr, 0u);

  for (uint64_t n : {37u, 64u}) {  // var and expr fields are recomputed for every run
    poison(rt, "out");
    KERNRT_ASSERT_OK(rt.run("main", {{"n", n}}));
    const auto out = read(rt, "out");
    ASSERT_EQ(out.size(), test::kEchoOutBytes);

    // Expected image: every field at its offset, every other byte zero.
    std::vector<uint8_t> want(sizeof(EchoBlock), 0);
    auto put = [&](size_t at, uint64_t v, size_t width) {
      for (size_t i = 0; i < width; ++i) want[at + i] = static_cast<uint8_t>(v >> (8 * i));
    };
    float f = 0.1f;
    uint32_t fbits = 0;
    std::memcpy(&fbits, &f, 4);
    put(offsetof(EchoBlock, x), x_addr + 16, 8);  // the call's offset of 16 bytes
    put(offsetof(EchoBlock, out), out_addr, 8);
    put(offsetof(EchoBlock, lit_i32), static_cast<uint32_t>(-123456789), 4);
    put(offsetof(EchoBlock, lit_f32), fbits, 4);
    put(offsetof(EchoBlock, lit_i64), static_cast<uint64_t>(-1234567890123456789LL), 8);
    put(offsetof(EchoBlock, lit_u8), 165, 1);
    put(offsetof(EchoBlock, var_n), n, 4);
    put(offsetof(EchoBlock, expr_mul), 3 * n, 4);
    put(offsetof(EchoBlock, expr_ceil), (n + 3) / 4, 8);
    put(offsetof(EchoBlock, var_n16), n, 2);
    put(offsetof(EchoBlock, scratch), le(out, offsetof(EchoBlock, scratch), 8), 8);
    put(offsetof(EchoBlock, k), 2 * n, 4);
    put(offsetof(EchoBlock, lit_i32_w2), 0xFFFE, 2);
    put(offsetof(EchoBlock, tail), 0x7FFFFFFFFFFFFFFFull, 8);
    for (size_t i = sizeof(CUtensorMap); i < sizeof(EchoBlock); ++i) {
      ASSERT_EQ(out[i], want[i]) << "n=" << n << " byte " << i << " of the block";
    }
    bool map_written = false;
    for (size_t i = 0; i < sizeof(CUtensorMap); ++i) map_written |= out[i] != 0;
    EXPECT_TRUE(map_written) << "the tensormap at offset 0 is all zero";
    EXPECT_NE(le(out, offsetof(EchoBlock, scratch), 8), 0u) << "scratch pointer";

    // The packed pointers are the pointers the launch got directly, and they work.
    EXPECT_EQ(le(out, test::kEchoOutDirectX, 8), x_addr + 16);
    EXPECT_EQ(le(out, test::kEchoOutDirectOut, 8), out_addr);
    float x_via_pack = 0;
    std::memcpy(&x_via_pack, out.data() + test::kEchoOutXViaPack, 4);
    EXPECT_EQ(x_via_pack, x[4]);
    EXPECT_EQ(le(out, test::kEchoOutMarkViaPack, 4),
              uint64_t{test::echo_mark(0)} | uint64_t{test::echo_mark(1)} << 8 |
                  uint64_t{test::echo_mark(2)} << 16 | uint64_t{test::echo_mark(3)} << 24);
    // The descriptor in the block loads the box [16, 2] at (0, 0) from x + 16 bytes.
    for (int i = 0; i < 32; ++i) {
      float v = 0;
      std::memcpy(&v, out.data() + test::kEchoOutTmaTile + 4 * i, 4);
      ASSERT_EQ(v, x[4 + i]) << "tma tile element " << i;
    }
  }
}

TEST_F(GpuKernels, ScratchPairTwoLaunchesInOrder) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  for (int n : {1, 1000, 4096}) {
    const auto x = random_floats(static_cast<size_t>(n), 10 + static_cast<uint32_t>(n));
    write(rt, "x", x);
    poison(rt, "y");
    KERNRT_ASSERT_OK(rt.run("main", {{"n", static_cast<uint64_t>(n)}}));
    const auto y = as<float>(read(rt, "y"));
    ASSERT_EQ(y.size(), 4096u);
    for (int i = 0; i < n; ++i) {
      const float want = 2.0f * x[n - 1 - i] + x[i];
      ASSERT_EQ(y[i], want) << "n=" << n << " y[" << i << "]";
    }
    for (int i = n; i < 4096; ++i) {  // past n nothing is written: still the poison
      uint32_t bits = 0;
      std::memcpy(&bits, &y[i], 4);
      ASSERT_EQ(bits, 0xFFFFFFFFu) << "n=" << n << " y[" << i << "] written past n";
    }
  }
}

}  // namespace
}  // namespace kernrt::gputest
