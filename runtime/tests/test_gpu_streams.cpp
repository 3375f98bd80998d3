// The engine's surface on a GPU: programs enqueued on a caller's stream (eager and as
// replayed graphs) give the bytes `run` gives; inputs written in place through the device
// addresses and by device-to-device copies; bound calls that run on the caller's memory,
// leave the runtime's own buffers alone, rewrite tensormaps, refuse bad bindings before
// launching anything, and are captured into a caller's graph. Host references: the
// scratch_pair kernels compute y[i] = 2 x[n-1-i] + x[i] exactly in f32.
#include <algorithm>
#include <cstring>

#include "driver.hpp"
#include "test_gpu_fixtures.hpp"

namespace kernrt::gputest {
namespace {

std::vector<float> scratch_pair_reference(const std::vector<float>& x, size_t n) {
  std::vector<float> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = 2.0f * x[n - 1 - i] + x[i];
  return y;
}

// Device memory and a stream of the caller's own, in the runtime's (primary) context.
class GpuStreams : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    api_ = *rt::driver().value;
  }
  void TearDown() override {
    if (api_ == nullptr) return;
    for (CUdeviceptr p : allocations_) api_->cuMemFree(p);
    if (stream_) api_->cuStreamDestroy(stream_);
  }
  CUstream stream() {
    if (!stream_) {
      EXPECT_EQ(api_->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    }
    return stream_;
  }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(api_->cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    allocations_.push_back(p);
    return p;
  }
  template <class T>
  void upload(CUdeviceptr dst, const std::vector<T>& v) {
    ASSERT_EQ(api_->cuMemcpyHtoDAsync(dst, v.data(), v.size() * sizeof(T), stream()), CUDA_SUCCESS);
  }
  std::vector<float> download(CUdeviceptr src, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(api_->cuMemcpyDtoHAsync(v.data(), src, n * sizeof(float), stream()), CUDA_SUCCESS);
    EXPECT_EQ(api_->cuStreamSynchronize(stream()), CUDA_SUCCESS);
    return v;
  }
  const rt::DriverApi* api_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

TEST_F(GpuStreams, EnqueueOnACallerStreamMatchesRunEagerAndAsGraph) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const std::map<std::string, uint64_t> vars = {{"n", 3000}};
  write(rt, "x", random_floats(4096, 11));
  KERNRT_ASSERT_OK(rt.run("main", vars));
  const auto reference = read(rt, "y");
  for (bool graph : {false, true}) {
    poison(rt, "y");
    for (int i = 0; i < 50; ++i) KERNRT_ASSERT_OK(rt.enqueue("main", vars, graph, stream()));
    // read_buffer orders itself after the caller's stream; y holds n = 3000 results.
    auto got = read(rt, "y");
    ASSERT_TRUE(std::equal(reference.begin(), reference.begin() + 3000 * 4, got.begin()))
        << (graph ? "graph replays" : "eager");
  }
  EXPECT_EQ(rt.graph_cache_size(), 1u);
  // A new input written through the runtime is seen by the next replay on the caller's stream.
  const auto x2 = random_floats(4096, 12);
  write(rt, "x", x2);
  KERNRT_ASSERT_OK(rt.enqueue("main", vars, true, stream()));
  KERNRT_ASSERT_OK(rt.synchronize());
  EXPECT_EQ(as<float>(read(rt, "y")).at(0), scratch_pair_reference(x2, 3000).at(0));
}

TEST_F(GpuStreams, InPlaceWritesThroughDeviceAddressesAndDeviceCopies) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const size_t n = 4096;
  const auto x = random_floats(n, 13);
  upload(rt.buffer_address("x"), x);  // the engine's own copy, on its own stream
  KERNRT_ASSERT_OK(rt.enqueue("main", {{"n", n}}, true, stream()));
  EXPECT_EQ(download(rt.buffer_address("y"), n), scratch_pair_reference(x, n));

  const auto x2 = random_floats(n, 14);
  const CUdeviceptr src = alloc(n * sizeof(float));
  upload(src, x2);
  KERNRT_ASSERT_OK(rt.write_input_device("x", 0, src, n * sizeof(float), stream()));
  KERNRT_ASSERT_OK(rt.enqueue("main", {{"n", n}}, true, stream()));
  EXPECT_EQ(download(rt.buffer_address("y"), n), scratch_pair_reference(x2, n));
  // Device writes keep the element and size rules of host writes.
  auto e = rt.write_input_device("x", 2, src, 8, stream());
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("not on an element"), std::string::npos) << e->message;
  e = rt.write_input_device("y", 0, src, 8, stream());
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("not `input`"), std::string::npos) << e->message;
}

TEST_F(GpuStreams, BoundCallRunsOnCallerMemoryAndLeavesOwnBuffersAlone) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const size_t n = 4096, bytes = n * sizeof(float);
  write(rt, "x", random_floats(n, 15));
  poison(rt, "y");
  const auto poisoned = read(rt, "y");
  const auto x = random_floats(n, 16);
  const CUdeviceptr cx = alloc(bytes), cy = alloc(bytes);
  upload(cx, x);
  KERNRT_ASSERT_OK(rt.enqueue_bound("main", {{"n", n}}, {{"x", cx, bytes}, {"y", cy, bytes}}, stream()));
  EXPECT_EQ(download(cy, n), scratch_pair_reference(x, n));
  EXPECT_EQ(read(rt, "y"), poisoned) << "the runtime's own y must not be written by a bound call";
  // States bind the same way: double_state writes blob = 2 pool over the first n floats.
  const size_t pool_bytes = rt.state_bytes("pool"), blob_bytes = rt.state_bytes("blob");
  const CUdeviceptr cpool = alloc(pool_bytes), cblob = alloc(blob_bytes);
  const auto p = random_floats(pool_bytes / 4, 23);
  upload(cpool, p);
  KERNRT_ASSERT_OK(rt.enqueue_bound("main", {{"n", n}},
                                    {{"x", cx, bytes}, {"y", cy, bytes}, {"pool", cpool, pool_bytes},
                                     {"blob", cblob, blob_bytes}}, stream()));
  const auto blob = download(cblob, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(blob[i], 2.0f * p[i]) << "blob[" << i << "]";
  // The binding lasts one call: the next run uses the runtime's buffers again.
  KERNRT_ASSERT_OK(rt.run("main", {{"n", n}}));
  EXPECT_NE(read(rt, "y"), poisoned);
}

TEST_F(GpuStreams, BoundCallRewritesTensormapAddresses) {
  KERNRT_LOAD_OR_FAIL(rt, "tma_copy");
  const auto own = random_floats(32 * 80, 17);
  const auto mine = random_floats(32 * 80, 18);
  write(rt, "src2", own);
  write(rt, "src3", random_floats(4 * 16 * 64, 19));
  const size_t bytes = mine.size() * sizeof(float);
  const CUdeviceptr src = alloc(bytes);
  upload(src, mine);
  poison(rt, "dst2");
  KERNRT_ASSERT_OK(rt.enqueue_bound("main", {}, {{"src2", src, bytes}}, stream()));
  KERNRT_ASSERT_OK(rt.synchronize());
  const auto dst2 = as<float>(read(rt, "dst2"));
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 64; ++c) {
      ASSERT_EQ(dst2[r * 64 + c], mine[r * 80 + c]) << "dst2[" << r << "][" << c << "]";
    }
  }
}

TEST_F(GpuStreams, BadBindingsAreRefusedBeforeAnyLaunch) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const size_t n = 4096, bytes = n * sizeof(float);
  write(rt, "x", random_floats(n, 20));
  poison(rt, "y");
  const auto poisoned = read(rt, "y");
  const CUdeviceptr cy = alloc(bytes);
  std::vector<float> host(n);
  struct Bad {
    std::vector<Binding> bindings;
    const char* why;
  };
  const std::vector<Bad> cases = {
      {{{"nope", cy, bytes}}, "unknown buffer or state `nope`"},
      {{{"y", cy + 4, bytes - 4}}, "not a 16-byte aligned"},
      {{{"y", cy, bytes - 16}}, "it takes 16384 bytes"},
      {{{"y", cy, bytes}, {"y", cy, bytes}}, "bound twice"},
      {{{"y", reinterpret_cast<uint64_t>(host.data()) & ~uint64_t{15}, bytes}}, "not inside one device allocation"},
  };
  for (const auto& c : cases) {
    auto e = rt.enqueue_bound("main", {{"n", n}}, c.bindings, stream());
    ASSERT_TRUE(e) << c.why;
    EXPECT_EQ(e->kind, ErrorKind::Caller);
    EXPECT_NE(e->message.find(c.why), std::string::npos) << e->message;
  }
  KERNRT_ASSERT_OK(rt.synchronize());
  EXPECT_EQ(read(rt, "y"), poisoned) << "a refused call launched something";
}

TEST_F(GpuStreams, BoundCallsAreCapturedIntoTheCallersGraph) {
  KERNRT_LOAD_OR_FAIL(rt, "scratch_pair");
  const size_t n = 4096, bytes = n * sizeof(float);
  const CUdeviceptr cx = alloc(bytes), cy = alloc(bytes);
  KERNRT_ASSERT_OK(rt.synchronize());
  ASSERT_EQ(api_->cuStreamBeginCapture(stream(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  auto refused = rt.enqueue("main", {{"n", n}}, true, stream());
  auto bound = rt.enqueue_bound("main", {{"n", n}}, {{"x", cx, bytes}, {"y", cy, bytes}}, stream());
  CUgraph graph = nullptr;
  ASSERT_EQ(api_->cuStreamEndCapture(stream(), &graph), CUDA_SUCCESS);
  ASSERT_TRUE(refused) << "a runtime graph cannot be nested in a capture";
  EXPECT_NE(refused->message.find("being captured"), std::string::npos) << refused->message;
  KERNRT_ASSERT_OK(bound);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(api_->cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  api_->cuGraphDestroy(graph);
  for (uint32_t seed : {21u, 22u}) {  // each replay reads the caller's current x
    const auto x = random_floats(n, seed);
    upload(cx, x);
    ASSERT_EQ(api_->cuGraphLaunch(exec, stream()), CUDA_SUCCESS);
    EXPECT_EQ(download(cy, n), scratch_pair_reference(x, n)) << "replay with seed " << seed;
  }
  api_->cuGraphExecDestroy(exec);
}

}  // namespace
}  // namespace kernrt::gputest
