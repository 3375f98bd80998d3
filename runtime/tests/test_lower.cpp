// Lowering every shipped single-GPU manifest on the CPU (fake addresses, fake encoder):
// what the GPU will see is checked here first — arg counts, offsets, tensormap
// footprints and spans, pack bounds — plus the lowering rules themselves: default
// forwarding, literal bits, call offsets, var masks, deduplicated functions.
#include <gtest/gtest.h>

#include <filesystem>

#include "fixtures.hpp"
#include "gemm_manifest.hpp"
#include "lower.hpp"
#include "memory.hpp"

namespace kernrt {
namespace {

rt::Allocations fake(const rt::MemoryPlan& plan) {
  return testing::fake_allocations(plan, 0x100000000, 4096);
}

std::vector<std::string> shipped() {
  std::vector<std::string> files;
  for (const char* dir : {"examples", "examples/h200", "kernels/test/manifests"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(testing::source_path(dir), ec)) {
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Lower, EveryShippedManifestLowersAtRankZero) {
  size_t lowered = 0;
  for (const auto& file : shipped()) {
    auto parsed = manifest::parse_manifest(testing::read_text(file));
    if (!parsed) continue;  // not a manifest (e.g. a fragment); the verifier's tests own it
    const auto& m = *parsed.value;
    if (!rt::check_supported(m).empty()) continue;  // extern fixtures
    rt::Ranks ranks;  // a topology manifest as its rank 0 in every group
    if (m.topology) {
      for (const auto& [group, size] : m.topology->groups) ranks[group] = 0;
    }
    auto plan = rt::plan_memory(m, 4096, 0);
    ASSERT_TRUE(plan) << file << "\n" << testing::all_messages(plan.errors);
    testing::FakeEncoder enc;
    auto low = rt::lower(m, fake(*plan.value), enc, &ranks);
    EXPECT_TRUE(low) << file << "\n" << testing::all_messages(low.errors);
    ++lowered;
  }
  EXPECT_GE(lowered, 3u);
}

const char* kMini = R"({
  "schema_version": 4, "model": "mini",
  "vars": {"n": {"max": 64}, "unused": {"max": 3}},
  "buffers": {
    "x": {"dtype": "f32", "shape": ["n", 4], "kind": "input"},
    "y": {"dtype": "f32", "shape": [64, 4], "kind": "output"}
  },
  "modules": {"k": {"source": "k.cubin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}},
  "ops": {
    "scale": {
      "params": ["in buffer<f32>", "out buffer<f32>", "i32", "f32"],
      "impl": {"launches": [
        {"module": "k", "entry": "scale_a", "block": [128, 1, 1], "grid": [{"ceil_div": ["n", 128]}, 1, 1]},
        {"module": "k", "entry": "scale_b", "params": ["in buffer<f32>", "i64", "u8"],
         "block": [32, 1, 1], "grid": [1, 1, 1], "shared_mem": {"mul": ["n", 1024]},
         "args": [{"param": 0}, {"i64": -3}, {"u8": 200}]}
      ]}
    }
  },
  "programs": {
    "p": {"calls": [
      {"op": "scale", "args": [{"buf": "x", "offset": 16}, {"buf": "y"}, {"var": "n"}, {"f32": -2.0}]},
      {"op": "scale", "args": [{"buf": "x"}, {"buf": "y"}, {"expr": {"mul": ["n", 2]}}, {"f32": 0.5}]}
    ]}
  }
})";

TEST(Lower, SlotsLiteralsOffsetsAndVarMask) {
  auto parsed = manifest::parse_manifest(kMini);
  ASSERT_TRUE(parsed) << testing::all_messages(parsed.errors);
  const auto& m = *parsed.value;
  auto plan = rt::plan_memory(m, 0, 0);
  ASSERT_TRUE(plan);
  auto alloc = fake(*plan.value);
  testing::FakeEncoder enc;
  auto low = rt::lower(m, alloc, enc);
  ASSERT_TRUE(low) << testing::all_messages(low.errors);
  const auto& p = low.value->programs.at("p");
  ASSERT_EQ(p.launches.size(), 4u);
  ASSERT_EQ(low.value->functions.size(), 2u);  // scale_a and scale_b, shared by both calls
  EXPECT_EQ(low.value->functions[1].param_sizes, (std::vector<uint32_t>{8, 8, 1}));
  EXPECT_EQ(low.value->shared_mem_max[1], 64u * 1024);

  const uint64_t x = alloc.buffers.at("x").address;
  const auto& a0 = p.launches[0];
  EXPECT_EQ(a0.args[0].value.constant, x + 16);        // call offset applied
  EXPECT_EQ(a0.args[1].value.constant, alloc.buffers.at("y").address);
  EXPECT_TRUE(a0.args[2].value.dynamic);               // {"var": "n"}
  EXPECT_EQ(a0.args[3].value.constant, 0xC0000000u);   // -2.0f
  EXPECT_EQ(a0.args[2].size, 4u);

  const auto& b0 = p.launches[1];
  EXPECT_EQ(b0.args[1].value.constant, 0xFFFFFFFFFFFFFFFDu);  // i64 -3
  EXPECT_EQ(b0.args[2].value.constant, 200u);
  EXPECT_EQ(b0.args[2].size, 1u);

  const uint64_t dense[2] = {40, 1};  // n = 40
  uint64_t v = 0;
  ASSERT_TRUE(p.launches[2].args[2].value.eval(dense, &v));
  EXPECT_EQ(v, 80u);
  ASSERT_TRUE(p.launches[0].grid[0].eval(dense, &v));
  EXPECT_EQ(v, 1u);
  ASSERT_TRUE(b0.shared_mem.eval(dense, &v));
  EXPECT_EQ(v, 40u * 1024);

  const auto n = *low.value->vars.find("n");
  const auto unused = *low.value->vars.find("unused");
  EXPECT_TRUE(p.reads[n]);
  EXPECT_FALSE(p.reads[unused]);
}

TEST(Lower, OffsetPastTheEndIsAnError) {
  auto parsed = manifest::parse_manifest(kMini);
  ASSERT_TRUE(parsed);
  auto m = *parsed.value;
  std::get<manifest::BufArg>(m.programs.at("p").calls[0].args[0]).offset = 1u << 20;
  auto plan = rt::plan_memory(m, 0, 0);
  ASSERT_TRUE(plan);
  testing::FakeEncoder enc;
  auto low = rt::lower(m, fake(*plan.value), enc);
  ASSERT_FALSE(low);
  EXPECT_EQ(low.errors[0].path, "/programs/p/calls/0/args/0");
  EXPECT_EQ(low.errors[0].message, "offset 1048576 is past the end of `x` (1024 bytes)");
}


// Bound calls rewrite exactly the places lowering recorded: pointer args into buffers (with
// the call offset), pack pointer fields and tensormap addresses; never states or scratch.
TEST(Lower, RelocationsNameBuffersWhereTheirAddressesLand) {
  const auto file = testing::source_path("kernels/test/manifests/pack_echo.json");
  auto parsed = manifest::parse_manifest(testing::read_text(file));
  ASSERT_TRUE(parsed) << testing::all_messages(parsed.errors);
  const auto& m = *parsed.value;
  auto plan = rt::plan_memory(m, 4096, 0);
  ASSERT_TRUE(plan);
  testing::FakeEncoder enc;
  auto low = rt::lower(m, fake(*plan.value), enc);
  ASSERT_TRUE(low) << testing::all_messages(low.errors);
  const auto& names = low.value->bindable;
  auto index = [&](const std::string& n) {
    return static_cast<int32_t>(std::find(names.begin(), names.end(), n) - names.begin());
  };
  size_t pointer_args = 0, fields = 0, maps = 0;
  for (const auto& [name, program] : low.value->programs) {
    for (const auto& launch : program.launches) {
      for (const auto& a : launch.args) {
        if (a.is_pack || a.buffer < 0) continue;
        ++pointer_args;
        ASSERT_LT(static_cast<size_t>(a.buffer), names.size());
      }
      for (const auto& pack : launch.packs) {
        for (const auto& r : pack.relocations) {
          ASSERT_LT(static_cast<size_t>(r.buffer), names.size());
          if (r.tensormap) {
            ++maps;
            EXPECT_EQ(r.width, 128u);
            EXPECT_EQ(r.at % 64, 0u);
          } else {
            ++fields;
            if (r.buffer == index("x")) {
              EXPECT_EQ(r.offset, 16u) << "the call's offset of 16 bytes";
            }
          }
        }
      }
    }
  }
  EXPECT_GT(pointer_args, 0u);
  EXPECT_GT(fields, 0u);
  EXPECT_EQ(maps, 1u);  // the one tensormap over `x`
}


// The GEMM built-ins lower to launches without a function; their arity, param kinds and
// bounds at the vars' maxima are checked here, each problem at the launch.
TEST(Lower, GemmBuiltInsLowerAndCheckTheirArgs) {
  auto parsed = manifest::parse_manifest(testing::kGemmManifest);
  ASSERT_TRUE(parsed) << testing::all_messages(parsed.errors);
  auto m = *parsed.value;
  EXPECT_TRUE(rt::check_supported(m).empty());
  EXPECT_TRUE(rt::uses_gemm(m));
  auto lower_it = [](const manifest::Manifest& mm) {
    auto plan = rt::plan_memory(mm, 0, 0);
    EXPECT_TRUE(plan);
    testing::FakeEncoder enc;
    return rt::lower(mm, fake(*plan.value), enc);
  };
  auto low = lower_it(m);
  ASSERT_TRUE(low) << testing::all_messages(low.errors);
  const auto& g = low.value->programs.at("gemm").launches.at(0);
  ASSERT_TRUE(g.gemm);
  EXPECT_EQ(*g.gemm, rt::GemmKind::Bf16);
  EXPECT_TRUE(low.value->functions.empty());
  EXPECT_EQ(*low.value->programs.at("gemm_f32").launches.at(0).gemm, rt::GemmKind::Bf16F32);

  // C's row stride past its buffer: 64 rows of 200 bf16 do not fit 64 x 104.
  auto wide = m;
  std::get<manifest::LitI32>(wide.programs.at("gemm").calls[0].args[6]).v = 200;
  auto bad = lower_it(wide);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.errors[0].path, "/ops/proj/impl/launches/0/args/2");
  EXPECT_NE(bad.errors[0].message.find("`c` spans"), std::string::npos) << bad.errors[0].message;

  // A stride below k.
  auto narrow = m;
  std::get<manifest::LitI32>(narrow.programs.at("gemm").calls[0].args[7]).v = 64;
  bad = lower_it(narrow);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.errors[0].message.find("A's row stride 64 is below k = 128"), std::string::npos);

  // An f32 output for the bf16 built-in.
  auto typed = m;
  typed.ops.at("proj").params[2] = typed.ops.at("proj_f32").params[2];
  typed.programs.at("gemm").calls[0].args[2] = manifest::BufArg{"cf", std::nullopt};
  bad = lower_it(typed);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.errors[0].message.find("`c` must be an out buffer<bf16>"), std::string::npos)
      << bad.errors[0].message;

  // Too few args.
  auto short_op = m;
  short_op.ops.at("proj").params.resize(5);
  short_op.programs.at("gemm").calls[0].args.resize(5);
  bad = lower_it(short_op);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.errors[0].message.find("(6 to 8 args), got 5"), std::string::npos) << bad.errors[0].message;
}

}  // namespace
}  // namespace kernrt
