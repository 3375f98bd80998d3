// Export and peer buffers across processes: two ranks of one job (two processes of
// kernrt_peer_rank, both on GPU 0, since this is what one GPU allows) meet in a fresh
// rendezvous directory, map each other's exported slab and read it through the peer
// buffer, eagerly and as a graph; ranks that loaded different manifests refuse before
// allocating; a directory left by an earlier job is refused. NCCL itself refuses two
// ranks on one device, so multi-rank collectives need the two-GPU machine.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fixtures.hpp"
#include "test_gpu_fixtures.hpp"

extern char** environ;

namespace kernrt::gputest {
namespace {

struct Child {
  pid_t pid = -1;
  std::string log;
};

Child spawn_rank(const std::string& manifest, const std::string& dir, int rank, const std::string& log) {
  Child c;
  c.log = log;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const std::string r = std::to_string(rank);
  std::vector<std::string> args{KERNRT_PEER_RANK_EXE, manifest, KERNRT_CUBIN_DIR, dir, r};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&c.pid, KERNRT_PEER_RANK_EXE, &fa, nullptr, argv.data(), environ) != 0) c.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return c;
}

// The exit status, or -1 after killing a child that ran past 90 s.
int wait_exit(const Child& c) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (;;) {
    int st = 0;
    if (waitpid(c.pid, &st, WNOHANG) == c.pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class GpuPeers : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!device_available(&why)) GTEST_SKIP() << why;
    if (!artifacts_built()) GTEST_SKIP() << "test kernels not built";
  }
  testing::TempDir tmp_;
};

TEST_F(GpuPeers, TwoRanksReadEachOthersExportThroughThePeerBufferEagerAndAsGraph) {
  const std::string dir = tmp_.file("job");
  std::filesystem::create_directory(dir);
  Child a = spawn_rank(test_manifest("peers"), dir, 0, tmp_.file("rank0.log"));
  Child b = spawn_rank(test_manifest("peers"), dir, 1, tmp_.file("rank1.log"));
  ASSERT_GT(a.pid, 0);
  ASSERT_GT(b.pid, 0);
  const int ea = wait_exit(a), eb = wait_exit(b);
  EXPECT_EQ(ea, 0) << read_text(a.log);
  EXPECT_EQ(eb, 0) << read_text(b.log);
  EXPECT_NE(read_text(a.log).find("gathered both slabs"), std::string::npos) << read_text(a.log);

  // The same directory again: this rank's files of the finished job are there.
  Child again = spawn_rank(test_manifest("peers"), dir, 0, tmp_.file("again.log"));
  EXPECT_EQ(wait_exit(again), 3);
  EXPECT_NE(read_text(again.log).find("an earlier job's files; give every job a fresh directory"),
            std::string::npos)
      << read_text(again.log);
}

TEST_F(GpuPeers, RanksThatLoadedDifferentManifestsRefuse) {
  std::string other = read_text(test_manifest("peers"));
  const std::string from = "\"model\": \"kernrt-test-peers\"";
  ASSERT_NE(other.find(from), std::string::npos);
  other.replace(other.find(from), from.size(), "\"model\": \"kernrt-test-peers-b\"");
  testing::write_bytes(tmp_.file("other.json"), other);
  const std::string dir = tmp_.file("job");
  std::filesystem::create_directory(dir);
  Child a = spawn_rank(test_manifest("peers"), dir, 0, tmp_.file("rank0.log"));
  Child b = spawn_rank(tmp_.file("other.json"), dir, 1, tmp_.file("rank1.log"));
  EXPECT_EQ(wait_exit(a), 3);
  EXPECT_EQ(wait_exit(b), 3);
  for (const Child* c : {&a, &b}) {
    const std::string log = read_text(c->log);
    EXPECT_NE(log.find("loaded another manifest"), std::string::npos) << log;
    EXPECT_NE(log.find("/topology/groups/tp"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace kernrt::gputest
