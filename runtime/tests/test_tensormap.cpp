// Tensormap argument computation: enum mapping, spanning outer extent, the 16-byte base
// alignment check and both footprint checks, each error at the field's pointer.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "tensormap.hpp"

namespace kernrt {
namespace {

// The decode example's K descriptor: bf16 [256, 64 slots, 4 heads, pages], page stride
// 524288 (two layers of 262144).
manifest::TensorMap k_descriptor() {
  manifest::TensorMap tm;
  tm.param = 2;
  tm.dtype = manifest::TmaDType::bf16;
  tm.dims = {256, 64, 4, 0};
  tm.strides = {4096, 1024, 524288};
  tm.box = {64, 64, 1, 1};
  tm.swizzle = 128;
  tm.l2_promotion = 128;
  return tm;
}

constexpr uint64_t kKvBytes = 22ull * 2 * 64 * 4 * 2 * 256 * 2;  // 11534336
const rt::TensorMapSite kSite{"/ops/attn/impl/launches/0/args/0/pack/fields/1/tensormap",
                              "`kv` + 262144 in call /programs/decode/calls/0"};

TEST(TensorMap, SpanningOuterDimComputedFromBytesLeft) {
  const uint64_t base = 0x7f0000000000;
  auto r = rt::tensormap_spec(k_descriptor(), base + 262144, kKvBytes - 262144, kSite);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  const auto& s = *r.value;
  // inner footprint = 512 + 63*4096 + 3*1024 = 261632; (11272192 - 261632) / 524288 + 1 = 22
  EXPECT_EQ(s.rank, 4u);
  EXPECT_EQ(s.dims[3], 22u);
  EXPECT_EQ(s.dims[0], 256u);
  EXPECT_EQ(s.address, base + 262144);
  EXPECT_EQ(s.strides[0], 4096u);
  EXPECT_EQ(s.strides[2], 524288u);
  EXPECT_EQ(s.box[1], 64u);
  EXPECT_EQ(s.dtype, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(s.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(s.l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  EXPECT_EQ(s.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  EXPECT_EQ(s.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  for (uint32_t d = 0; d < 4; ++d) EXPECT_EQ(s.element_strides[d], 1u);
}

TEST(TensorMap, SpanningExtentRoundsDownToWholeOuterSteps) {
  // V at 262656: 11271680 bytes left, minus 261632 = 11010048 = 21 * 524288 exactly.
  auto r = rt::tensormap_spec(k_descriptor(), 0x1000 + 262656, kKvBytes - 262656, kSite);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value->dims[3], 22u);
  // One byte less leaves room for only 21 whole pages after the first.
  r = rt::tensormap_spec(k_descriptor(), 0x1000 + 262656, kKvBytes - 262656 - 1, kSite);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value->dims[3], 21u);
}

TEST(TensorMap, RejectsUnalignedBase) {
  auto r = rt::tensormap_spec(k_descriptor(), 0x7f0000000008, kKvBytes, kSite);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Manifest);
  EXPECT_EQ(r.errors[0].path, kSite.path);
  EXPECT_NE(r.errors[0].message.find("0x7f0000000008"), std::string::npos);
  EXPECT_NE(r.errors[0].message.find("is not 16-byte aligned"), std::string::npos);
  EXPECT_NE(r.errors[0].message.find("`kv` + 262144"), std::string::npos) << r.errors[0].message;
}

TEST(TensorMap, RejectsInnerFootprintPastAllocation) {
  auto r = rt::tensormap_spec(k_descriptor(), 0x1000, 261631, kSite);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].path, kSite.path);
  EXPECT_NE(r.errors[0].message.find("inner footprint 261632 bytes exceeds the 261631 bytes left"),
            std::string::npos)
      << r.errors[0].message;
}

TEST(TensorMap, RejectsFullFootprintPastAllocation) {
  manifest::TensorMap q;
  q.param = 1;
  q.dtype = manifest::TmaDType::bf16;
  q.dims = {256, 6, 4, 2};
  q.strides = {512, 3072, 12288};
  q.box = {64, 6, 1, 1};
  // footprint = 512 + 5*512 + 3*3072 + 1*12288 = 24576 = the q buffer at tokens 2
  auto ok = rt::tensormap_spec(q, 0x1000, 24576, kSite);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.value->dims[3], 2u);
  EXPECT_EQ(rt::tensormap_footprint(q, 4), 24576u);
  auto r = rt::tensormap_spec(q, 0x1000, 24575, kSite);
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("footprint 24576 bytes exceeds the 24575 bytes left"),
            std::string::npos)
      << r.errors[0].message;
}

TEST(TensorMap, MapsU4AndOobNanAndNoSwizzle) {
  manifest::TensorMap tm;
  tm.dtype = manifest::TmaDType::u4;
  tm.dims = {64, 8};  // 64 nibbles = 32 bytes per row
  tm.strides = {32};
  tm.box = {64, 8};
  tm.oob_nan = true;
  auto r = rt::tensormap_spec(tm, 0x2000, 256, kSite);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->dtype, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B);
  EXPECT_EQ(r.value->oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  EXPECT_EQ(r.value->swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
  EXPECT_EQ(r.value->l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  EXPECT_EQ(rt::tensormap_footprint(tm, 2), 32u + 7 * 32);
}

}  // namespace
}  // namespace kernrt
