// The rendezvous directory without a GPU: files published once and waited for with a
// deadline, an earlier job's files refused, and descriptors handed between three ranks
// (threads here; processes in GpuPeers) over real unix sockets, checked by writing through
// the received descriptors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "fixtures.hpp"
#include "rendezvous.hpp"

namespace kernrt::rt {
namespace {

TEST(Rendezvous, PublishedFilesAreReadOnceTheyExistAndNeverReplaced) {
  testing::TempDir dir;
  Rendezvous rv(dir.path(), 5);
  auto later = std::async(std::launch::async, [&] { return rv.wait("nccl.tp", "rank 0 of group `tp`"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_FALSE(rv.publish("nccl.tp", std::string("\0id\0", 4)));
  auto got = later.get();
  ASSERT_TRUE(got) << got.errors[0].message;
  EXPECT_EQ(*got.value, std::string("\0id\0", 4));
  auto again = rv.publish("nccl.tp", "other");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, ErrorKind::Io);
  EXPECT_NE(again->message.find("an earlier job's files; give every job a fresh directory"), std::string::npos)
      << again->message;
  EXPECT_EQ(*rv.wait("nccl.tp", "x").value, std::string("\0id\0", 4));  // unchanged
}

TEST(Rendezvous, AWaitGivesUpNamingWhoDidNotPublish) {
  testing::TempDir dir;
  Rendezvous rv(dir.path(), 0.05);
  auto got = rv.wait("manifest.tp.1", "rank 1 of group `tp`");
  ASSERT_FALSE(got);
  EXPECT_NE(got.errors[0].message.find("rank 1 of group `tp` did not publish"), std::string::npos)
      << got.errors[0].message;
  EXPECT_NE(got.errors[0].message.find("manifest.tp.1"), std::string::npos);
}

TEST(Rendezvous, AMissingDirectoryIsNamed) {
  Rendezvous rv("/nonexistent/kernrt-rendezvous", 1);
  auto e = rv.publish("x", "y");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("does `/nonexistent/kernrt-rendezvous` exist"), std::string::npos) << e->message;
}

TEST(Rendezvous, ThreeRanksExchangeDescriptorsThatStillWork) {
  testing::TempDir dir;
  constexpr uint64_t kRanks = 3;
  int pipes[kRanks][2];
  for (auto& p : pipes) ASSERT_EQ(pipe(p), 0);
  std::vector<std::future<Result<std::vector<Rendezvous::Shared>>>> runs;
  for (uint64_t r = 0; r < kRanks; ++r) {
    runs.push_back(std::async(std::launch::async, [&, r] {
      Rendezvous rv(dir.path(), 10);
      return rv.exchange_fds("tp.slab", r, kRanks, pipes[r][1], 1000 + r);
    }));
  }
  for (uint64_t r = 0; r < kRanks; ++r) {
    auto got = runs[r].get();
    ASSERT_TRUE(got) << got.errors[0].message;
    ASSERT_EQ(got.value->size(), kRanks);
    for (uint64_t s = 0; s < kRanks; ++s) {
      const auto& sh = (*got.value)[s];
      EXPECT_EQ(sh.bytes, 1000 + s);
      if (s == r) {
        EXPECT_EQ(sh.fd, pipes[r][1]);  // its own, as given
        continue;
      }
      // The received descriptor is rank s's pipe: a byte written through it arrives there.
      const char c = static_cast<char>('a' + r);
      ASSERT_EQ(write(sh.fd, &c, 1), 1);
      close(sh.fd);
    }
  }
  for (uint64_t s = 0; s < kRanks; ++s) {
    close(pipes[s][1]);
    std::string seen;
    char c;
    while (read(pipes[s][0], &c, 1) == 1) seen += c;
    close(pipes[s][0]);
    EXPECT_EQ(seen.size(), kRanks - 1) << "rank " << s << " got " << seen;
  }
  // The sockets are gone: the directory can be listed empty.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Rendezvous, AnExchangeWithAnAbsentRankTimesOutNamingIt) {
  testing::TempDir dir;
  Rendezvous rv(dir.path(), 0.2);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  auto got = rv.exchange_fds("tp.slab", 0, 2, p[1], 8);
  close(p[0]);
  close(p[1]);
  ASSERT_FALSE(got);
  EXPECT_NE(got.errors[0].message.find("did not hear from rank(s) 1"), std::string::npos) << got.errors[0].message;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Rendezvous, ASocketPathTooLongForUnixSocketsIsRefused) {
  testing::TempDir dir;
  const std::string deep = dir.path() + "/" + std::string(100, 'd');
  std::filesystem::create_directory(deep);
  Rendezvous rv(deep, 1);
  auto got = rv.exchange_fds("tp.slab", 0, 2, 0, 8);
  ASSERT_FALSE(got);
  EXPECT_NE(got.errors[0].message.find("use a shorter rendezvous directory"), std::string::npos)
      << got.errors[0].message;
}

}  // namespace
}  // namespace kernrt::rt
