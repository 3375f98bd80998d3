// Runtime::Impl: the loaded state behind kernrt::Runtime (private to libkernrt).
//
// Owns every driver object of one runtime (primary context reference, compute stream,
// modules, device allocations, pinned staging, graph execs) and releases them in its
// destructor, in reverse order, after draining the stream. load.cpp builds it, exec.cpp
// runs it, runtime.cpp exposes it. Does not validate anything the pure layers
// (memory, lower, pack, tensormap) already checked.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "blas.hpp"
#include "driver.hpp"
#include "graph_cache.hpp"
#include "kernrt/runtime.hpp"
#include "lower.hpp"
#include "memory.hpp"
#include "nccl.hpp"
#include "ranks.hpp"
#include "vmm.hpp"

namespace kernrt {

struct Runtime::Impl {
  // Kernel parameter storage of one launch, reused by every run (no allocation per run):
  // scalars as little-endian u64 slots, pack images, and the void* array the driver reads.
  struct LaunchArgs {
    std::vector<uint64_t> scalars;
    std::vector<std::vector<uint8_t>> images;
    std::vector<void*> params;
  };
  struct Program {
    std::string name;
    const rt::ProgramPlan* plan = nullptr;
    std::vector<LaunchArgs> args;  // one per launch
  };

  const rt::DriverApi* api = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  bool ctx_retained = false;
  CUstream stream = nullptr;

  manifest::Manifest manifest;
  rt::MemoryPlan plan;
  rt::Allocations alloc;
  std::vector<CUdeviceptr> device_allocations;
  std::map<std::string, void*> staging;  // input buffer -> pinned host memory
  // manifest module name -> its loaded images (one for a cubin; one per fatbin container
  // of a host .so that loads on this device), in file order
  std::map<std::string, std::vector<CUmodule>> modules;
  std::map<std::string, std::string> module_files;  // manifest module name -> file read
  std::vector<CUmodule> loaded;             // unique loads (identical bytes load once)
  rt::LoweredManifest lowered;
  std::vector<CUfunction> functions;        // per lowered.functions
  std::vector<Program> programs;            // sorted by name
  std::vector<uint64_t> dense;              // dense vars of the current run
  std::unique_ptr<rt::GraphCache> graphs;
  std::unique_ptr<rt::Blas> blas;  // opened when the manifest uses a GEMM built-in
  // Opened when the manifest uses a collective; one communicator per group its NCCL
  // launches name, this process at its rank. The comms are destroyed before `nccl`, both
  // before the context is released.
  std::unique_ptr<rt::Nccl> nccl;
  std::map<std::string, std::unique_ptr<rt::Nccl::Comm>> comms;
  rt::Ranks ranks;  // this process's index per topology group
  // Virtual-memory allocations: the exported buffers and peered states of this rank, then
  // the mappings of the other ranks' (peers.cpp); released after the stream drained.
  std::vector<rt::VmmAllocation> vmm;

  // Ordering with a caller's stream: work enqueued on `stream` (host copies, runs) since
  // it was last handed to `handed_to` makes a foreign stream wait on `compute_done`; work
  // enqueued on a foreign stream is guarded by `foreign_done`, which `stream` waits for
  // before its next operation. Neither happens while the foreign stream is capturing.
  CUevent compute_done = nullptr;
  CUevent foreign_done = nullptr;
  bool compute_dirty = false;
  CUstream handed_to = nullptr;
  bool foreign_pending = false;
  CUstream foreign_stream = nullptr;
  // Per buffer (sorted order): the caller's address bound for the current call, or 0.
  std::vector<uint64_t> bound;

  ~Impl();

  std::optional<Error> bind();  // makes the context current on this thread
  // Errors for failed driver calls. The const char* forms build no string on success, so
  // the run/replay path does not allocate.
  std::optional<Error> check(CUresult rc, const char* what) {
    if (rc == CUDA_SUCCESS) return std::nullopt;
    return rt::driver_error(*api, rc, what);
  }
  std::optional<Error> check(CUresult rc, const std::string& what, const std::string& path);
  std::optional<Error> sync(const char* what);
  // Makes `stream` wait for the last foreign stream's work (no host wait).
  std::optional<Error> join_foreign();

  // Validates vars and fills `dense` for program `index`.
  std::optional<Error> prepare(const std::string& program, const std::map<std::string, uint64_t>& vars,
                               uint32_t* index);
  // Enqueues every launch of the program on `s` with the current dense vars; with
  // `relocate`, addresses of buffers bound in `bound` replace the runtime's own.
  std::optional<Error> enqueue(uint32_t index, CUstream s, bool relocate = false);
  // Enqueues the cached graph for (program, dense) on `s`, capturing it on `stream` on a miss.
  std::optional<Error> enqueue_graph(uint32_t index, CUstream s);
  // Rewrites the buffer addresses of one launch's parameters for the bound buffers.
  std::optional<Error> relocate_launch(const rt::LaunchPlan& launch, LaunchArgs& la);
  // GEMM and NCCL launches: their arguments evaluated (and relocated for a bound call).
  std::optional<Error> builtin_args(const rt::LaunchPlan& launch, LaunchArgs& la,
                                    const uint64_t* dv, bool relocate);
  // Orders foreign stream `s` after pending work (or refuses what capture cannot hold),
  // runs `launch_on(s)`, then guards its work with `foreign_done`. `s` == `stream` runs
  // directly. Defined below: exec.cpp and runtime.cpp use it.
  template <class F>
  std::optional<Error> on_stream(CUstream s, bool graph, F&& launch_on);
};

template <class F>
inline std::optional<Error> Runtime::Impl::on_stream(CUstream s, bool graph, F&& launch_on) {
  if (s == stream) {
    if (auto e = join_foreign()) return e;
    auto e = launch_on(s);
    compute_dirty = true;
    handed_to = nullptr;
    return e;
  }
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (auto e = check(api->cuStreamIsCapturing(s, &capture), "cuStreamIsCapturing")) return e;
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    if (graph) {
      return Error{ErrorKind::Caller, "",
                   "the stream is being captured: enqueue without graph=1 (the launches "
                   "become part of the caller's graph); a runtime graph cannot be nested"};
    }
    // The capture cannot wait for the compute stream's pending copies or runs; work earlier
    // enqueued on a caller's stream is that caller's to order (on the capturing stream itself
    // stream order does it).
    if (compute_dirty) {
      return Error{ErrorKind::Caller, "",
                   "the runtime has work in flight on its own stream (a host write or a run): "
                   "call kernrt_synchronize before capturing"};
    }
    return launch_on(s);
  }
  if (compute_dirty && handed_to != s) {
    if (auto e = check(api->cuEventRecord(compute_done, stream), "cuEventRecord")) return e;
    if (auto e = check(api->cuStreamWaitEvent(s, compute_done, 0), "cuStreamWaitEvent")) return e;
    handed_to = s;
  }
  if (foreign_pending && foreign_stream != s) {
    if (auto e = check(api->cuStreamWaitEvent(s, foreign_done, 0), "cuStreamWaitEvent")) return e;
  }
  auto failed = launch_on(s);
  if (auto e = check(api->cuEventRecord(foreign_done, s), "cuEventRecord")) return failed ? failed : e;
  foreign_pending = true;
  foreign_stream = s;
  return failed;
}

}  // namespace kernrt
