// The hand-written CUDA baseline (raw_cuda.hpp).
#include "raw_cuda.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace kernrt::bench {

bool RawCuda::open(std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = std::string("no CUDA driver/device: cannot open `libcuda.so.1`: ") + dlerror();
    return false;
  }
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!gpa) {
    *why = "no CUDA driver/device: `cuGetProcAddress_v2` missing (driver older than CUDA 12)";
    return false;
  }
  bool ok = true;
  auto get = [&](const char* name, auto* fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (gpa(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) {
      *why = std::string("no CUDA driver/device: driver lacks `") + name + "`";
      ok = false;
    }
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
  };
  get("cuInit", &cuInit);
  get("cuDeviceGet", &cuDeviceGet);
  get("cuDeviceGetName", &cuDeviceGetName);
  get("cuDevicePrimaryCtxRetain", &cuDevicePrimaryCtxRetain);
  get("cuDevicePrimaryCtxRelease", &cuDevicePrimaryCtxRelease);
  get("cuCtxSetCurrent", &cuCtxSetCurrent);
  get("cuStreamCreate", &cuStreamCreate);
  get("cuStreamDestroy", &cuStreamDestroy);
  get("cuStreamSynchronize", &cuStreamSynchronize);
  get("cuMemAlloc", &cuMemAlloc);
  get("cuMemFree", &cuMemFree);
  get("cuMemcpyDtoH", &cuMemcpyDtoH);
  get("cuMemsetD8", &cuMemsetD8);
  get("cuModuleLoadData", &cuModuleLoadData);
  get("cuModuleUnload", &cuModuleUnload);
  get("cuModuleGetFunction", &cuModuleGetFunction);
  get("cuLaunchKernel", &cuLaunchKernel);
  get("cuStreamBeginCapture", &cuStreamBeginCapture);
  get("cuStreamEndCapture", &cuStreamEndCapture);
  get("cuGraphInstantiateWithFlags", &cuGraphInstantiateWithFlags);
  get("cuGraphLaunch", &cuGraphLaunch);
  get("cuGraphExecDestroy", &cuGraphExecDestroy);
  get("cuGraphDestroy", &cuGraphDestroy);
  get("cuEventCreate", &cuEventCreate);
  get("cuEventRecord", &cuEventRecord);
  get("cuEventElapsedTime", &cuEventElapsedTime);
  get("cuEventDestroy", &cuEventDestroy);
  get("cuGetErrorName", &cuGetErrorName);
  if (!ok) return false;
  const CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = "CUDA_ERROR_UNKNOWN";
    cuGetErrorName(rc, &name);
    *why = std::string("no CUDA driver/device: cuInit failed: ") + name;
    return false;
  }
  return true;
}

void RawCuda::check(CUresult rc, const char* what) const {
  if (rc == CUDA_SUCCESS) return;
  const char* name = "CUDA_ERROR_UNKNOWN";
  cuGetErrorName(rc, &name);
  throw std::runtime_error(std::string("`") + what + "` failed: " + name);
}

RawTiny::RawTiny(const RawCuda& cu, int gpu, const std::vector<char>& cubin, const char* entry)
    : cu_(cu) {
  cu.check(cu.cuDeviceGet(&dev_, gpu), "cuDeviceGet");
  cu.check(cu.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  cu.check(cu.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu.check(cu.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu.check(cu.cuModuleLoadData(&module_, cubin.data()), "cuModuleLoadData");
  cu.check(cu.cuModuleGetFunction(&fn_, module_, entry), "cuModuleGetFunction");
  cu.check(cu.cuMemAlloc(&counter_, 4), "cuMemAlloc");
  cu.check(cu.cuMemsetD8(counter_, 0, 4), "cuMemsetD8");
}

RawTiny::~RawTiny() {
  cu_.cuCtxSetCurrent(ctx_);
  if (stream_) cu_.cuStreamSynchronize(stream_);
  if (exec_) cu_.cuGraphExecDestroy(exec_);
  if (graph_) cu_.cuGraphDestroy(graph_);
  if (counter_) cu_.cuMemFree(counter_);
  if (module_) cu_.cuModuleUnload(module_);
  if (stream_) cu_.cuStreamDestroy(stream_);
  if (ctx_) cu_.cuDevicePrimaryCtxRelease(dev_);
}

std::string RawTiny::device_name() const {
  char name[256] = {};
  cu_.check(cu_.cuDeviceGetName(name, sizeof(name), dev_), "cuDeviceGetName");
  return name;
}

double RawTiny::eager_host_us(int launches) {
  cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  void* args[] = {&counter_};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    cu_.check(cu_.cuLaunchKernel(fn_, 1, 1, 1, 32, 1, 1, 0, stream_, args, nullptr),
              "cuLaunchKernel");
  }
  cu_.check(cu_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

void RawTiny::capture(int launches) {
  cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  if (exec_) cu_.cuGraphExecDestroy(exec_);
  if (graph_) cu_.cuGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  void* args[] = {&counter_};
  cu_.check(cu_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            "cuStreamBeginCapture");
  for (int i = 0; i < launches; ++i) {
    cu_.check(cu_.cuLaunchKernel(fn_, 1, 1, 1, 32, 1, 1, 0, stream_, args, nullptr),
              "cuLaunchKernel");
  }
  cu_.check(cu_.cuStreamEndCapture(stream_, &graph_), "cuStreamEndCapture");
  cu_.check(cu_.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
}

std::vector<double> RawTiny::replay_us(int iters) {
  cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu_.check(cu_.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");  // warm-up
  std::vector<CUevent> ev(2 * static_cast<size_t>(iters));
  for (auto& e : ev) cu_.check(cu_.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < iters; ++i) {
    cu_.check(cu_.cuEventRecord(ev[2 * i], stream_), "cuEventRecord");
    cu_.check(cu_.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
    cu_.check(cu_.cuEventRecord(ev[2 * i + 1], stream_), "cuEventRecord");
  }
  cu_.check(cu_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    cu_.check(cu_.cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cuEventElapsedTime");
    us.push_back(static_cast<double>(ms) * 1000.0);
  }
  for (auto& e : ev) cu_.cuEventDestroy(e);
  return us;
}

uint32_t RawTiny::counter() const {
  cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  cu_.check(cu_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  uint32_t v = 0;
  cu_.check(cu_.cuMemcpyDtoH(&v, counter_, 4), "cuMemcpyDtoH");
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace kernrt::bench
