// resolve_ranks: where this process sits in a topology, checked before any driver call.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "ranks.hpp"

namespace kernrt::rt {
namespace {

manifest::Manifest with_groups(std::map<std::string, uint64_t> groups) {
  manifest::Manifest m;
  m.topology = manifest::Topology{std::move(groups)};
  return m;
}

TEST(Ranks, EveryGroupGetsItsIndexAndOneRankGroupsDefaultToZero) {
  auto r = resolve_ranks(with_groups({{"tp", 2}, {"solo", 1}}), {{"tp", 1}}, "/tmp/job");
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(*r.value, (Ranks{{"tp", 1}, {"solo", 0}}));
  // A one-rank topology needs neither ranks nor a rendezvous.
  auto one = resolve_ranks(with_groups({{"ep", 1}}), {}, "");
  ASSERT_TRUE(one);
  EXPECT_EQ(*one.value, (Ranks{{"ep", 0}}));
}

TEST(Ranks, AMultiRankGroupWithoutAnIndexOrARendezvousIsRefusedAtItsPointer) {
  auto r = resolve_ranks(with_groups({{"tp", 4}, {"ep", 4}}), {}, "");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 3u) << testing::all_messages(r.errors);
  EXPECT_EQ(r.errors[0].path, "/topology/groups/ep");
  EXPECT_NE(r.errors[0].message.find("topology group `ep` has 4 ranks and this process was given no index"),
            std::string::npos)
      << r.errors[0].message;
  EXPECT_NE(r.errors[0].message.find("program_io --rank ep=I"), std::string::npos);
  EXPECT_EQ(r.errors[1].path, "/topology/groups/tp");
  EXPECT_EQ(r.errors[2].path, "/topology");
  EXPECT_NE(r.errors[2].message.find("needs a rendezvous directory"), std::string::npos);
  for (const auto& e : r.errors) EXPECT_EQ(e.kind, ErrorKind::Caller);
}

TEST(Ranks, OutOfRangeAndUnknownGroupsAndRanksWithoutTopologyAreRefused) {
  auto out = resolve_ranks(with_groups({{"tp", 2}}), {{"tp", 2}}, "/tmp/job");
  ASSERT_FALSE(out);
  EXPECT_EQ(out.errors[0].path, "/topology/groups/tp");
  EXPECT_NE(out.errors[0].message.find("rank 2 is outside topology group `tp` of 2 rank(s)"), std::string::npos);

  auto unknown = resolve_ranks(with_groups({{"tp", 2}}), {{"tp", 0}, {"ep", 1}}, "/tmp/job");
  ASSERT_FALSE(unknown);
  ASSERT_EQ(unknown.errors.size(), 1u);
  EXPECT_NE(unknown.errors[0].message.find("a rank was given for group `ep`, which the topology does not "
                                           "declare (it has `tp`)"),
            std::string::npos)
      << unknown.errors[0].message;

  manifest::Manifest plain;
  auto none = resolve_ranks(plain, {{"tp", 0}}, "");
  ASSERT_FALSE(none);
  EXPECT_NE(none.errors[0].message.find("the manifest declares no topology"), std::string::npos);
  EXPECT_TRUE(resolve_ranks(plain, {}, ""));
}

TEST(Ranks, OneRankGroupsAndMultiRank) {
  const auto m = with_groups({{"tp", 2}, {"solo", 1}});
  EXPECT_EQ(one_rank_groups(m), (Ranks{{"solo", 0}}));
  EXPECT_TRUE(multi_rank(m));
  EXPECT_FALSE(multi_rank(with_groups({{"solo", 1}})));
  EXPECT_FALSE(multi_rank(manifest::Manifest{}));
}

}  // namespace
}  // namespace kernrt::rt
