// The hand-written CUDA baseline (raw_cuda.hpp).
#include "raw_cuda.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace kernrt::bench {

bool RawCuda::open(std::string* why) {
  auto d = rt::driver();
  if (!d) {
    *why = d.errors.front().message;
    return false;
  }
  api = *d.value;
  return true;
}

void RawCuda::check(CUresult rc, const char* what) const {
  if (rc == CUDA_SUCCESS) return;
  const char* name = "CUDA_ERROR_UNKNOWN";
  api->cuGetErrorName(rc, &name);
  throw std::runtime_error(std::string("`") + what + "` failed: " + name);
}

RawTiny::RawTiny(const RawCuda& cu, int gpu, const std::vector<char>& cubin, const char* entry)
    : cu_(cu) {
  cu.check(cu.api->cuDeviceGet(&dev_, gpu), "cuDeviceGet");
  cu.check(cu.api->cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  cu.check(cu.api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu.check(cu.api->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu.check(cu.api->cuModuleLoadData(&module_, cubin.data()), "cuModuleLoadData");
  cu.check(cu.api->cuModuleGetFunction(&fn_, module_, entry), "cuModuleGetFunction");
  cu.check(cu.api->cuMemAlloc(&counter_, 4), "cuMemAlloc");
  cu.check(cu.api->cuMemsetD8Async(counter_, 0, 4, stream_), "cuMemsetD8Async");
  cu.check(cu.api->cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

RawTiny::~RawTiny() {
  cu_.api->cuCtxSetCurrent(ctx_);
  if (stream_) cu_.api->cuStreamSynchronize(stream_);
  if (exec_) cu_.api->cuGraphExecDestroy(exec_);
  if (graph_) cu_.api->cuGraphDestroy(graph_);
  if (counter_) cu_.api->cuMemFree(counter_);
  if (module_) cu_.api->cuModuleUnload(module_);
  if (stream_) cu_.api->cuStreamDestroy(stream_);
  if (ctx_) cu_.api->cuDevicePrimaryCtxRelease(dev_);
}

std::string RawTiny::device_name() const {
  char name[256] = {};
  cu_.check(cu_.api->cuDeviceGetName(name, sizeof(name), dev_), "cuDeviceGetName");
  return name;
}

double RawTiny::eager_host_us(int launches) {
  cu_.check(cu_.api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  void* args[] = {&counter_};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    cu_.check(cu_.api->cuLaunchKernel(fn_, 1, 1, 1, 32, 1, 1, 0, stream_, args, nullptr),
              "cuLaunchKernel");
  }
  cu_.check(cu_.api->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

void RawTiny::capture(int launches) {
  cu_.check(cu_.api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  if (exec_) cu_.api->cuGraphExecDestroy(exec_);
  if (graph_) cu_.api->cuGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  void* args[] = {&counter_};
  cu_.check(cu_.api->cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture");
  for (int i = 0; i < launches; ++i) {
    cu_.check(cu_.api->cuLaunchKernel(fn_, 1, 1, 1, 32, 1, 1, 0, stream_, args, nullptr),
              "cuLaunchKernel");
  }
  cu_.check(cu_.api->cuStreamEndCapture(stream_, &graph_), "cuStreamEndCapture");
  cu_.check(cu_.api->cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
}

std::vector<double> RawTiny::replay_us(int iters) {
  cu_.check(cu_.api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu_.check(cu_.api->cuGraphLaunch(exec_, stream_), "cuGraphLaunch");  // warm-up
  std::vector<CUevent> ev(2 * static_cast<size_t>(iters));
  for (auto& e : ev) cu_.check(cu_.api->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < iters; ++i) {
    cu_.check(cu_.api->cuEventRecord(ev[2 * i], stream_), "cuEventRecord");
    cu_.check(cu_.api->cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
    cu_.check(cu_.api->cuEventRecord(ev[2 * i + 1], stream_), "cuEventRecord");
  }
  cu_.check(cu_.api->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    cu_.check(cu_.api->cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cuEventElapsedTime");
    us.push_back(static_cast<double>(ms) * 1000.0);
  }
  for (auto& e : ev) cu_.api->cuEventDestroy(e);
  return us;
}

uint32_t RawTiny::counter() const {
  cu_.check(cu_.api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu_.check(cu_.api->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  uint32_t v = 0;
  cu_.check(cu_.api->cuMemcpyDtoHAsync(&v, counter_, 4, stream_), "cuMemcpyDtoHAsync");
  cu_.check(cu_.api->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace kernrt::bench
