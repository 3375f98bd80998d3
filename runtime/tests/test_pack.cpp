// Pack building on the CPU with the fake encoder: the decode example's 1280-byte
// TRTLLM-GEN parameter block (pointer fields at 912/1000/1080/984/1008/1016, i32
// constants at their offsets, descriptors at 0/128/384/512 with the spanning page count
// computed, var fields rewritten per run), plus the field-level rules of §1.12.
#include <gtest/gtest.h>

#include <cstring>

#include "fixtures.hpp"
#include "lower.hpp"
#include "memory.hpp"
#include "pack.hpp"

namespace kernrt {
namespace {

uint64_t load_le(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

class DecodePack : public ::testing::Test {
 protected:
  void SetUp() override {
    m = testing::parse_file(testing::source_path("examples/decode.json"));
    auto plan = rt::plan_memory(m, 0, 0);
    ASSERT_TRUE(plan) << testing::all_messages(plan.errors);
    alloc = testing::fake_allocations(*plan.value);
    auto lowered = rt::lower(m, alloc, encoder);
    ASSERT_TRUE(lowered) << testing::all_messages(lowered.errors);
    low = std::move(*lowered.value);
    ASSERT_EQ(low.programs.count("decode"), 1u);
    const auto& launches = low.programs.at("decode").launches;
    ASSERT_EQ(launches.size(), 1u);
    ASSERT_EQ(launches[0].packs.size(), 1u);
    pack = &launches[0].packs[0];
  }

  manifest::Manifest m;
  rt::Allocations alloc;
  testing::FakeEncoder encoder;
  rt::LoweredManifest low;
  const rt::PackPlan* pack = nullptr;
};

TEST_F(DecodePack, PointerFieldsLandAtTheirOffsets) {
  ASSERT_EQ(pack->size, 1280u);
  const uint8_t* img = pack->base.data();
  EXPECT_EQ(load_le(img + 912, 8), alloc.buffers.at("out").address);
  EXPECT_EQ(load_le(img + 1000, 8), alloc.buffers.at("table").address);
  EXPECT_EQ(load_le(img + 1080, 8), alloc.buffers.at("seq").address);
  EXPECT_EQ(load_le(img + 984, 8), alloc.scratch.at("attn_decode").at("counter").address);
  EXPECT_EQ(load_le(img + 1008, 8), alloc.scratch.at("attn_decode").at("partial").address);
  EXPECT_EQ(load_le(img + 1016, 8), alloc.scratch.at("attn_decode").at("stats").address);
}

TEST_F(DecodePack, I32ConstantsAtTheirOffsets) {
  const uint8_t* img = pack->base.data();
  EXPECT_EQ(load_le(img + 1164, 4), 4u);    // KV heads
  EXPECT_EQ(load_le(img + 1168, 4), 24u);   // Q heads
  EXPECT_EQ(load_le(img + 1172, 4), 6u);    // Q heads per KV head
  EXPECT_EQ(load_le(img + 1112, 4), 2147483647u);
  EXPECT_EQ(load_le(img + 1180, 4), static_cast<uint32_t>(-1431655765));  // negative i32 bits
  EXPECT_EQ(load_le(img + 1216, 4), 1065353216u);  // 1.0f as i32 bits
  EXPECT_EQ(load_le(img + 1252, 4), 256u);
}

TEST_F(DecodePack, TensorMapsAtTheirOffsetsAndUncoveredBytesZero) {
  ASSERT_EQ(encoder.specs.size(), 4u);
  const uint8_t* img = pack->base.data();
  // The fake fills descriptor k with byte k (1-based, in field order: Q, K, V, O).
  const size_t at[4] = {0, 128, 384, 512};
  for (int k = 0; k < 4; ++k) {
    for (size_t b = 0; b < 128; ++b) ASSERT_EQ(img[at[k] + b], k + 1) << "descriptor " << k;
  }
  for (size_t b = 256; b < 384; ++b) EXPECT_EQ(img[b], 0) << b;  // sliding-window pool: unused
  for (size_t b = 640; b < 912; ++b) EXPECT_EQ(img[b], 0) << b;  // K/V scale maps, grid dims
  EXPECT_EQ(load_le(img + 920, 8), 0u);                          // ptrSfO: no field
}

TEST_F(DecodePack, DescriptorArgumentsIncludeSpanningPageCount) {
  const uint64_t kv = alloc.buffers.at("kv").address;
  const auto& q = encoder.specs[0];
  const auto& k = encoder.specs[1];
  const auto& v = encoder.specs[2];
  const auto& o = encoder.specs[3];
  EXPECT_EQ(q.address, alloc.buffers.at("q").address);
  EXPECT_EQ(q.rank, 4u);
  EXPECT_EQ(q.dims[3], 2u);
  EXPECT_EQ(k.address, kv + 262144);
  EXPECT_EQ(v.address, kv + 262656);
  EXPECT_EQ(k.dims[3], 22u);  // 22 pages of 524288 bytes span the two-layer kv buffer
  EXPECT_EQ(v.dims[3], 22u);
  EXPECT_EQ(o.address, alloc.buffers.at("out").address);
  EXPECT_EQ(o.rank, 5u);
  EXPECT_EQ(o.box[1], 8u);
  EXPECT_NE(encoder.paths[1].find("/ops/attn_decode/impl/launches/0/args/0/pack/fields/1/tensormap"),
            std::string::npos)
      << encoder.paths[1];
}

TEST_F(DecodePack, VarFieldsRecomputedPerRun) {
  ASSERT_EQ(pack->dynamic.size(), 2u);  // params 7 (seqs) and 8 (tokens) via the call's vars
  std::vector<uint8_t> image(pack->size, 0xEE);
  const auto seqs = low.vars.find("seqs");
  const auto tokens = low.vars.find("tokens");
  ASSERT_TRUE(seqs && tokens);
  std::vector<uint64_t> dense(low.vars.names.size(), 1);
  dense[*seqs] = 2;
  dense[*tokens] = 1;
  ASSERT_TRUE(pack->write(dense.data(), image.data()));
  EXPECT_EQ(load_le(image.data() + 1116, 4), 2u);
  EXPECT_EQ(load_le(image.data() + 1244, 4), 1u);
  EXPECT_EQ(std::memcmp(image.data(), pack->base.data(), 1116), 0);
  dense[*tokens] = 2;
  ASSERT_TRUE(pack->write(dense.data(), image.data()));
  EXPECT_EQ(load_le(image.data() + 1244, 4), 2u);
  EXPECT_EQ(image[256], 0);  // the 0xEE prefill is gone: the image is rebuilt from the base
  // Both vars feed the launch, so the program reads both.
  EXPECT_TRUE(low.programs.at("decode").reads[*seqs]);
  EXPECT_TRUE(low.programs.at("decode").reads[*tokens]);
}

TEST_F(DecodePack, GridAndSharedMemoryLowered) {
  const auto& l = low.programs.at("decode").launches[0];
  EXPECT_EQ(l.call, "/programs/decode/calls/0");
  EXPECT_EQ(l.path, "/ops/attn_decode/impl/launches/0");
  ASSERT_EQ(low.functions.size(), 1u);
  EXPECT_EQ(low.functions[0].param_sizes, std::vector<uint32_t>{1280});
  EXPECT_EQ(low.shared_mem_max[0], 144992u);
  std::vector<uint64_t> dense(low.vars.names.size(), 1);
  dense[*low.vars.find("seqs")] = 2;
  uint64_t gz = 0, gx = 0;
  ASSERT_TRUE(l.grid[2].eval(dense.data(), &gz));
  ASSERT_TRUE(l.grid[0].eval(dense.data(), &gx));
  EXPECT_EQ(gz, 2u);
  EXPECT_EQ(gx, 38u);
  EXPECT_FALSE(l.grid[0].dynamic);
}

// ---- field rules on a hand-built pack ---------------------------------------------------

struct MiniPack : ::testing::Test {
  std::vector<rt::Slot> iface;
  std::vector<manifest::ParamType> types;
  std::map<std::string, rt::Region> scratch{{"s", rt::Region{0xABCDEF00, 64}}};
  rt::VarTable vars;
  testing::FakeEncoder encoder;
  rt::PackContext ctx;
  void SetUp() override {
    manifest::Manifest m;
    m.vars["n"] = manifest::Var{8};
    vars = rt::VarTable::from(m);
    rt::Slot p;
    p.pointer = true;
    p.region = rt::Region{0x1122334455667700, 4096};
    p.value = rt::Value::fixed(p.region.address);
    p.what = "`x`";
    iface.push_back(p);
    types.push_back(manifest::ParamType{manifest::ParamType::Kind::Buffer});
    ctx.interface = &iface;
    ctx.interface_types = &types;
    ctx.scratch = &scratch;
    ctx.vars = &vars;
    ctx.encoder = &encoder;
    ctx.path = "/ops/o/impl/launches/0/args/0/pack";
    ctx.call = "/programs/p/calls/0";
  }
};

TEST_F(MiniPack, WidthTruncatesLittleEndianAndLiteralsUseTheirBits) {
  manifest::Pack pk;
  pk.size = 48;
  pk.fields.push_back({0, std::nullopt, manifest::ParamRef{0}});
  pk.fields.push_back({8, 3u, manifest::ParamRef{0}});
  pk.fields.push_back({12, std::nullopt, manifest::LitF32{1.5}});
  pk.fields.push_back({16, std::nullopt, manifest::LitI64{-2}});
  pk.fields.push_back({24, std::nullopt, manifest::LitU8{7}});
  pk.fields.push_back({28, std::nullopt, manifest::VarRef{"n"}});
  pk.fields.push_back({32, std::nullopt, manifest::Expr::mul(manifest::Expr::variable("n"), 3)});
  pk.fields.push_back({40, std::nullopt, manifest::ScratchRef{"s"}});
  auto r = rt::build_pack_plan(pk, ctx);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  std::vector<uint8_t> img(48);
  uint64_t dense[1] = {5};
  ASSERT_TRUE(r.value->write(dense, img.data()));
  EXPECT_EQ(load_le(img.data(), 8), 0x1122334455667700u);
  EXPECT_EQ(load_le(img.data() + 8, 4), 0x667700u);  // width 3: byte 11 stays zero
  EXPECT_EQ(load_le(img.data() + 12, 4), 0x3FC00000u);  // 1.5f
  EXPECT_EQ(load_le(img.data() + 16, 8), 0xFFFFFFFFFFFFFFFEu);
  EXPECT_EQ(img[24], 7);
  EXPECT_EQ(img[25], 0);
  EXPECT_EQ(load_le(img.data() + 28, 4), 5u);
  EXPECT_EQ(load_le(img.data() + 32, 4), 15u);
  EXPECT_EQ(load_le(img.data() + 36, 4), 0u);
  EXPECT_EQ(load_le(img.data() + 40, 8), 0xABCDEF00u);
}

TEST_F(MiniPack, RejectsFieldOutsideImageAndMisplacedTensorMap) {
  manifest::Pack pk;
  pk.size = 256;
  pk.fields.push_back({252, std::nullopt, manifest::LitI64{1}});
  manifest::TensorMap tm;
  tm.dtype = manifest::TmaDType::u8;
  tm.dims = {16};
  tm.box = {16};
  pk.fields.push_back({32, std::nullopt, tm});
  pk.fields.push_back({0, 9u, manifest::LitI32{1}});
  auto r = rt::build_pack_plan(pk, ctx);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 3u) << testing::all_messages(r.errors);
  EXPECT_EQ(r.errors[0].path, "/ops/o/impl/launches/0/args/0/pack/fields/0");
  EXPECT_NE(r.errors[0].message.find("width 8 at 252"), std::string::npos);
  EXPECT_EQ(r.errors[1].path, "/ops/o/impl/launches/0/args/0/pack/fields/1");
  EXPECT_NE(r.errors[1].message.find("64-byte aligned"), std::string::npos);
  EXPECT_NE(r.errors[2].message.find("must be 1-8 bytes wide"), std::string::npos);
  EXPECT_TRUE(encoder.specs.empty());
}

TEST_F(MiniPack, TensorMapErrorNamesFieldAndCall) {
  iface[0].region.address += 8;  // a call offset that breaks 16-byte alignment
  iface[0].what = "`x` + 8";
  manifest::Pack pk;
  pk.size = 128;
  manifest::TensorMap tm;
  tm.dtype = manifest::TmaDType::u8;
  tm.dims = {16, 4};
  tm.strides = {16};
  tm.box = {16, 4};
  pk.fields.push_back({0, std::nullopt, tm});
  auto r = rt::build_pack_plan(pk, ctx);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].path, "/ops/o/impl/launches/0/args/0/pack/fields/0/tensormap");
  EXPECT_NE(r.errors[0].message.find("`x` + 8 in call /programs/p/calls/0"), std::string::npos)
      << r.errors[0].message;
}

}  // namespace
}  // namespace kernrt
