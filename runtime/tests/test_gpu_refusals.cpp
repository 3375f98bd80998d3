// Each refusal gives its clear error and launches nothing. A changed cubin byte, a missing
// cubin and a topology manifest are refused by Runtime::load before the driver is opened,
// so suite Refusal runs on any machine where the test kernels were built. A wrong input
// size, an input outside its domain and a var above its max need a loaded runtime (suite
// GpuRefusal); there "nothing launched" (or "nothing copied") is shown by an output that
// keeps the previous run's bytes although the input changed.
#include <unistd.h>

#include <filesystem>

#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

namespace fs = std::filesystem;

class Refusal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!artifacts_built()) GTEST_SKIP() << "test kernels not built";
    dir_ = fs::temp_directory_path() / ("kernrt-refusal-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Copies the runnable cubins except `skip` into the temp dir.
  void copy_cubins(const std::string& skip = "") {
    for (const auto& e : fs::directory_iterator(KERNRT_CUBIN_DIR)) {
      if (e.path().filename() != skip) fs::copy_file(e.path(), dir_ / e.path().filename());
    }
  }
  fs::path dir_;
};

void expect_module_refused(const Result<std::unique_ptr<Runtime>>& r) {
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u) << messages(r.errors);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Artifact);
  EXPECT_EQ(r.errors[0].path, "/modules/test_scratch");
  EXPECT_NE(r.errors[0].message.find("module `test_scratch`"), std::string::npos)
      << r.errors[0].message;
  EXPECT_NE(r.errors[0].message.find("is not among the artifacts"), std::string::npos)
      << r.errors[0].message;
}

TEST_F(Refusal, ChangedCubinByte) {
  copy_cubins();
  const fs::path cubin = dir_ / "test_scratch.sm90a.cubin";
  std::string bytes = read_text(cubin.string());
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
  std::ofstream(cubin, std::ios::binary | std::ios::trunc) << bytes;
  expect_module_refused(load("scratch_pair", dir_.string()));
}

TEST_F(Refusal, MissingCubin) {
  copy_cubins("test_scratch.sm90a.cubin");
  expect_module_refused(load("scratch_pair", dir_.string()));
}

TEST_F(Refusal, TopologyManifest) {
  auto r = load("topology");
  ASSERT_FALSE(r);
  bool found = false;
  for (const auto& e : r.errors) {
    if (e.path == "/topology/groups/tp" &&
        e.message.find("topology group `tp` has 2 ranks and this process was given no index") !=
            std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << messages(r.errors);
}

class GpuRefusal : public GpuTest {};

TEST_F(GpuRefusal, WrongInputSizeAndVarAboveMaxLaunchNothing) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const auto x = random_floats(4096, 21);
  write(rt, "x", x);
  KERNRT_ASSERT_OK(rt.run("main", {{"n", 4096}}));
  const auto before = read(rt, "y");

  // One element too many, and a size that is not a whole number of f32 elements.
  std::vector<uint8_t> big(4097 * 4, 1), ragged(6, 1);
  for (const auto* data : {&big, &ragged}) {
    auto e = rt.write_input("x", data->data(), data->size());
    ASSERT_TRUE(e) << data->size() << " bytes accepted";
    EXPECT_EQ(e->kind, ErrorKind::Caller);
    EXPECT_NE(e->message.find("`x`"), std::string::npos) << e->message;
    EXPECT_NE(e->message.find(std::to_string(data->size())), std::string::npos) << e->message;
  }

  write(rt, "x", random_floats(4096, 22));  // a valid new input, so a launch would show
  auto e = rt.run("main", {{"n", 4097}});
  ASSERT_TRUE(e) << "n = 4097 accepted";
  EXPECT_EQ(e->kind, ErrorKind::Caller);
  EXPECT_NE(e->message.find("`n`"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("outside declared [1, 4096]"), std::string::npos) << e->message;
  e = rt.run("main", {{"n", 4097}}, true);
  ASSERT_TRUE(e) << "n = 4097 accepted in graph mode";
  e = rt.run("main", {});
  ASSERT_TRUE(e) << "missing n accepted";
  EXPECT_NE(e->message.find("var `n` not provided"), std::string::npos) << e->message;
  EXPECT_EQ(read(rt, "y"), before) << "a refused run launched";
  EXPECT_EQ(rt.graph_cache_size(), 0u) << "a refused run captured a graph";
}

// scratch_pair's `x` declares the domain [-1000, 1000]: an element outside it is refused
// before anything is copied, so a run afterwards still sees the previous input.
TEST_F(GpuRefusal, InputOutsideItsDomainCopiesNothing) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  write(rt, "x", random_floats(4096, 23));
  KERNRT_ASSERT_OK(rt.run("main", {{"n", 4096}}));
  const auto before = read(rt, "y");

  auto bad = random_floats(4096, 24);
  bad[77] = 5000.0f;
  auto e = rt.write_input("x", bad.data(), bad.size() * sizeof(float));
  ASSERT_TRUE(e) << "an element outside the domain was accepted";
  EXPECT_EQ(e->kind, ErrorKind::Caller);
  EXPECT_EQ(e->path, "/buffers/x");
  EXPECT_EQ(e->message, "input `x` element 77 = 5000 is above the domain max 1000");
  KERNRT_ASSERT_OK(rt.run("main", {{"n", 4096}}));
  EXPECT_EQ(read(rt, "y"), before) << "the refused input reached the device";
}

}  // namespace
}  // namespace kernrt::gputest
