// The hand-written baseline of the runtime-overhead benchmark: the CUDA driver used
// directly, with no kernrt code in the path.
//
// Owns: RawCuda, the driver's entry points from the runtime's process-wide table
// (runtime/src/driver.hpp: function pointers only, so nothing of kernrt runs between a
// baseline call and the driver, and the binary still starts without a GPU), and RawTiny,
// which loads the tiny cubin itself and offers the three baselines: a plain cuLaunchKernel
// loop, a CUDA graph captured from 100 such launches, and raw cuModuleLoadData of a set of
// cubins. Deliberately does not check kernel results beyond what the benchmark needs (the
// counter it increments).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver.hpp"

namespace kernrt::bench {

struct RawCuda {
  const rt::DriverApi* api = nullptr;

  // Opens the driver (cuInit(0) included); false with `why` set when there is none.
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
