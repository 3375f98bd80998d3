// The hand-written baseline of the runtime-overhead benchmark: the CUDA driver used
// directly, with no kernrt code in the path.
//
// Owns: its own driver table (dlopen("libcuda.so.1") + cuGetProcAddress at CUDA 12.0, so
// the binary starts without a GPU), and RawTiny, which loads the tiny cubin itself and
// offers the three baselines: a plain cuLaunchKernel loop, a CUDA graph captured from
// 100 such launches, and raw cuModuleLoadData of a set of cubins. Deliberately does not
// check kernel results beyond what the benchmark needs (the counter it increments).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kernrt::bench {

struct RawCuda {
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  PFN_cuStreamSynchronize_v2000 cuStreamSynchronize = nullptr;
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH = nullptr;
  PFN_cuMemsetD8_v3020 cuMemsetD8 = nullptr;
  PFN_cuModuleLoadData_v2000 cuModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuLaunchKernel_v4000 cuLaunchKernel = nullptr;
  PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture = nullptr;
  PFN_cuStreamEndCapture_v10000 cuStreamEndCapture = nullptr;
  PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags = nullptr;
  PFN_cuGraphLaunch_v10000 cuGraphLaunch = nullptr;
  PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy = nullptr;
  PFN_cuGraphDestroy_v10000 cuGraphDestroy = nullptr;
  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventRecord_v2000 cuEventRecord = nullptr;
  PFN_cuEventElapsedTime_v2000 cuEventElapsedTime = nullptr;
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;

  // Opens the driver and cuInit(0); false with `why` set when there is none.
  bool open(std::string* why);
  // Throws std::runtime_error("`what` failed: CUDA_ERROR_X") unless rc is CUDA_SUCCESS.
  void check(CUresult rc, const char* what) const;
};

// The tiny kernel driven by hand on its own stream of the primary context of `gpu`.
class RawTiny {
 public:
  RawTiny(const RawCuda& cu, int gpu, const std::vector<char>& cubin, const char* entry);
  ~RawTiny();
  RawTiny(const RawTiny&) = delete;
  RawTiny& operator=(const RawTiny&) = delete;

  std::string device_name() const;
  // Host wall time of `launches` cuLaunchKernel calls plus one stream synchronize, in us.
  double eager_host_us(int launches);
  // Captures `launches` launches into one graph (replacing any previous one).
  void capture(int launches);
  // Per-replay device time (CUDA events around each cuGraphLaunch), `iters` replays.
  std::vector<double> replay_us(int iters);
  uint32_t counter() const;

 private:
  const RawCuda& cu_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  CUdeviceptr counter_ = 0;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// Median of `v` (copied and sorted).
double median(std::vector<double> v);

}  // namespace kernrt::bench
