// Memory plan sizes: buffers and scratch at var maxima, staging per input, per-token
// states at the token capacity rounded to the page unit, per-sequence states at
// seqs.max + 2 slots, and the caller errors for impossible capacities.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "memory.hpp"

namespace kernrt {
namespace {

TEST(MemoryPlan, DecodeExampleSizesAtVarMaxima) {
  auto m = testing::parse_file(testing::source_path("examples/decode.json"));
  auto r = rt::plan_memory(m, 0, 0);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  const auto& p = *r.value;
  EXPECT_EQ(p.buffers.at("q"), 2u * 24 * 256 * 2);
  EXPECT_EQ(p.buffers.at("out"), 2u * 24 * 256 * 2);
  EXPECT_EQ(p.buffers.at("kv"), 11534336u);
  EXPECT_EQ(p.buffers.at("table"), 2u * 11 * 4);
  EXPECT_EQ(p.scratch.at("attn_decode").at("counter"), 48u * 4);
  EXPECT_EQ(p.scratch.at("attn_decode").at("partial"), 2u * 4 * 38 * 8 * 256 * 4);
  EXPECT_EQ(p.scratch.at("attn_decode").at("stats"), 2u * 4 * 38 * 8 * 2 * 4);
  // Staging: inputs only (out is an output).
  EXPECT_EQ(p.staging.count("out"), 0u);
  EXPECT_EQ(p.staging.at("kv"), 11534336u);
  EXPECT_EQ(p.staging.size(), 5u);
}

// plain.json: kv {bytes_per_token: 1} paged by a block table of stride 16, gdn
// {bytes_per_seq: 24} addressed by a line table [3, seqs] with seqs <= 4.
TEST(MemoryPlan, StatesScaleWithCapacityAndSlots) {
  auto m = testing::parse_file(testing::shared_path("corpus/kern/plain.json"));
  auto r = rt::plan_memory(m, 0, 0);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->page_tokens, 16u);
  EXPECT_EQ(r.value->token_capacity, 65536u);
  EXPECT_EQ(r.value->states.at("kv"), 65536u);
  EXPECT_EQ(r.value->seq_slots, 6u);  // seqs.max 4 + 2
  EXPECT_EQ(r.value->states.at("gdn"), 6u * 24);

  auto custom = rt::plan_memory(m, 1000, 9);
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom.value->token_capacity, 992u);  // rounded down to whole 16-token pages
  EXPECT_EQ(custom.value->states.at("kv"), 992u);
  EXPECT_EQ(custom.value->states.at("gdn"), 9u * 24);
}

TEST(MemoryPlan, RejectsCapacityBelowOnePage) {
  auto m = testing::parse_file(testing::shared_path("corpus/kern/plain.json"));
  auto r = rt::plan_memory(m, 10, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Caller);
  EXPECT_EQ(r.errors[0].message, "token capacity 10 is below one page of 16 tokens");
}

TEST(MemoryPlan, FixedStateAndMinimalManifest) {
  auto m = testing::parse_file(testing::shared_path("corpus/kern/minimal.json"));
  m.states["fixed"] = manifest::State{0, 4096, 0};
  auto r = rt::plan_memory(m, 128, 0);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->states.at("fixed"), 4096u);
  EXPECT_EQ(r.value->states.at("kv"), 256u * 128);  // no page table: page unit 1
  EXPECT_EQ(r.value->page_tokens, 1u);
  EXPECT_EQ(r.value->device_bytes(),
            [&] {
              uint64_t t = 0;
              for (const auto& [n, b] : r.value->buffers) t += b;
              return t + 4096 + 256 * 128;
            }());
}

}  // namespace
}  // namespace kernrt

namespace kernrt {
namespace {

// Writes at an offset share the size rules: the offset inside the allocation and on an
// element, the bytes within what is left after it.
TEST(Memory, CheckWriteAtAnOffset) {
  const char data[16] = {};
  EXPECT_FALSE(rt::check_write("input", "q", "/buffers/q", 64, 4, 16, data, 48));
  auto e = rt::check_write("input", "q", "/buffers/q", 64, 4, 16, data, 52);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "input `q` takes at most 12 bytes, got 16");
  e = rt::check_write("input", "q", "/buffers/q", 64, 4, 4, data, 2);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "offset 2 into input `q` is not on an element (4 bytes each)");
  e = rt::check_write("state", "kv", "/states/kv", 64, 1, 0, data, 65);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "offset 65 is past the end of state `kv` (64 bytes)");
  EXPECT_EQ(e->path, "/states/kv");
}

}  // namespace
}  // namespace kernrt
