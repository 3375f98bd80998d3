// The NCCL built-ins on the CPU: the loader's refusal names the library when it is
// absent, NVLink multicast is switched off unless the user chose, the installed library
// (where there is one) has every entry point; lowering of the collectives (one-rank
// group: rank arg 0, bounds at the var maxima) and the load refusals that need no GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fixtures.hpp"
#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"
#include "lower.hpp"
#include "memory.hpp"
#include "nccl.hpp"
#include "nccl_manifest.hpp"

namespace kernrt {
namespace {

TEST(Nccl, AbsentLibraryIsAClearErrorNamingIt) {
  auto n = rt::Nccl::open({"/nonexistent/kernrt-test/libnccl.so.2"});
  ASSERT_FALSE(n);
  ASSERT_EQ(n.errors.size(), 1u);
  EXPECT_EQ(n.errors[0].kind, ErrorKind::Driver);
  const std::string& msg = n.errors[0].message;
  EXPECT_NE(msg.find("the NCCL collectives (extern:nccl_*) need libnccl.so.2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/kernrt-test/libnccl.so.2 ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("KERNRT_NCCL"), std::string::npos) << msg;
}

TEST(Nccl, NvlinkMulticastIsOffUnlessTheUserSetIt) {
  const char* before = std::getenv("NCCL_NVLS_ENABLE");
  const std::string saved = before ? before : "";
  unsetenv("NCCL_NVLS_ENABLE");
  rt::keep_nvlink_multicast_off();
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  setenv("NCCL_NVLS_ENABLE", "7", 1);
  rt::keep_nvlink_multicast_off();
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "7");
  // The absent-library path sets it too (before any NCCL call could read it).
  unsetenv("NCCL_NVLS_ENABLE");
  (void)rt::Nccl::open({"/nonexistent/kernrt-test/libnccl.so.2"});
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  if (before) setenv("NCCL_NVLS_ENABLE", saved.c_str(), 1);
  else setenv("NCCL_NVLS_ENABLE", "0", 1);
}

TEST(Nccl, InstalledLibraryHasEveryEntryPoint) {
  auto n = rt::Nccl::open();
  if (!n) GTEST_SKIP() << "no NCCL here: " << n.errors[0].message;
  EXPECT_NE((*n.value)->library().find("libnccl.so.2"), std::string::npos);
}

rt::Allocations fake(const rt::MemoryPlan& plan) {
  return testing::fake_allocations(plan, 0x100000000, 4096);
}

Result<rt::LoweredManifest> lower_it(const manifest::Manifest& m, const rt::Ranks* ranks = nullptr) {
  auto plan = rt::plan_memory(m, 0, 0);
  EXPECT_TRUE(plan) << testing::all_messages(plan.errors);
  testing::FakeEncoder enc;
  return rt::lower(m, fake(*plan.value), enc, ranks);
}

// The NCCL test manifest with group `tp` of two ranks.
manifest::Manifest two_rank_manifest() {
  auto parsed = manifest::parse_manifest(testing::kNcclManifest);
  EXPECT_TRUE(parsed);
  auto m = *parsed.value;
  m.topology->groups.at("tp") = 2;
  return m;
}

TEST(LowerNccl, OneRankCollectivesLowerWithRankZero) {
  auto parsed = manifest::verify_json(testing::kNcclManifest);
  ASSERT_TRUE(parsed) << testing::all_messages(parsed.errors);
  const auto& m = parsed.value->manifest();
  EXPECT_TRUE(rt::check_supported(m).empty()) << testing::all_messages(rt::check_supported(m));
  EXPECT_FALSE(rt::uses_gemm(m));
  EXPECT_EQ(rt::nccl_groups(m), std::set<std::string>{"tp"});
  auto low = lower_it(m);
  ASSERT_TRUE(low) << testing::all_messages(low.errors);
  EXPECT_TRUE(low.value->functions.empty());
  const auto& ar = low.value->programs.at("all_reduce");
  ASSERT_EQ(ar.launches.size(), 1u);
  const auto& l = ar.launches[0];
  ASSERT_TRUE(l.nccl);
  EXPECT_FALSE(l.gemm);
  EXPECT_EQ(l.nccl->coll, manifest::Collective::AllReduce);
  EXPECT_EQ(l.nccl->elem, manifest::DType::bf16);
  EXPECT_EQ(l.nccl->group, "tp");
  ASSERT_EQ(l.args.size(), 4u);
  uint64_t rank = 99;
  ASSERT_TRUE(l.args[3].value.eval(low.value->vars.max.data(), &rank));
  EXPECT_EQ(rank, 0u);
  EXPECT_TRUE(l.args[2].value.dynamic);  // the count is the var n
  const size_t n = low.value->vars.index.at("n");
  EXPECT_TRUE(ar.reads.at(n));
  EXPECT_EQ(low.value->programs.at("all_gather").launches.at(0).nccl->coll,
            manifest::Collective::AllGather);
  EXPECT_EQ(low.value->programs.at("reduce_scatter").launches.at(0).nccl->elem, manifest::DType::i32);
}

TEST(LowerNccl, ABufferShorterThanTheCollectiveIsRefusedNamingTheArg) {
  auto parsed = manifest::parse_manifest(testing::kNcclManifest);
  ASSERT_TRUE(parsed);
  auto m = *parsed.value;
  m.buffers.at("y").shape[0] = manifest::Expr::constant(512);
  auto low = lower_it(m);
  ASSERT_FALSE(low);
  ASSERT_EQ(low.errors.size(), 1u) << testing::all_messages(low.errors);
  EXPECT_EQ(low.errors[0].path, "/ops/ar/impl/launches/0/args/1");
  EXPECT_NE(low.errors[0].message.find("the receive buffer has 1024 bytes left but `allreduce` of "
                                       "1024 elements per rank over 1 rank(s) needs 2048"),
            std::string::npos)
      << low.errors[0].message;
}

TEST(LoadNccl, AMultiRankGroupWithoutItsRankIsRefusedBeforeAnyDriverCall) {
  const auto m = two_rank_manifest();
  EXPECT_TRUE(rt::check_supported(m).empty());
  auto v = manifest::verify(m);
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  auto r = Runtime::load(*v.value, LoadOptions{});
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 2u) << testing::all_messages(r.errors);
  EXPECT_EQ(r.errors[0].path, "/topology/groups/tp");
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Caller);
  EXPECT_NE(r.errors[0].message.find("topology group `tp` has 2 ranks"), std::string::npos) << r.errors[0].message;
  EXPECT_EQ(r.errors[1].path, "/topology");
  // and the lowering alone (no ranks given) still refuses the rank arg
  auto low = lower_it(m);
  ASSERT_FALSE(low);
  EXPECT_NE(low.errors[0].message.find("rank arg `tp`: this process has no index in the group"), std::string::npos)
      << low.errors[0].message;
}

TEST(LoadNccl, RankArgsLowerToThisProcesssIndex) {
  auto m = two_rank_manifest();
  // all_reduce alone: the gather and scatter of 256 elements need twice the room at 2 ranks.
  m.programs.erase("all_gather");
  m.programs.erase("reduce_scatter");
  const rt::Ranks ranks{{"tp", 1}};
  auto low = lower_it(m, &ranks);
  ASSERT_TRUE(low) << testing::all_messages(low.errors);
  const auto& l = low.value->programs.at("all_reduce").launches.at(0);
  uint64_t rank = 99;
  ASSERT_TRUE(l.args[3].value.eval(low.value->vars.max.data(), &rank));
  EXPECT_EQ(rank, 1u);
}

TEST(LoadNccl, AOneRankTopologyWithCollectivesPassesEveryRefusal) {
  std::string why;
  if (device_available(&why)) GTEST_SKIP() << "a device is present: GpuNccl loads it";
  auto v = manifest::verify_json(testing::kNcclManifest);
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  auto r = Runtime::load(*v.value, LoadOptions{});
  ASSERT_FALSE(r);
  // Past the one-rank checks, what stops it here is only the missing driver.
  ASSERT_EQ(r.errors.size(), 1u) << testing::all_messages(r.errors);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Driver);
  EXPECT_NE(r.errors[0].message.find("no CUDA driver/device"), std::string::npos) << r.errors[0].message;
}

}  // namespace
}  // namespace kernrt
