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

#include "driver.hpp"
#include "graph_cache.hpp"
#include "kernrt/runtime.hpp"
#include "lower.hpp"
#include "memory.hpp"

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

  // Validates vars and fills `dense` for program `index`.
  std::optional<Error> prepare(const std::string& program, const std::map<std::string, uint64_t>& vars,
                               uint32_t* index);
  // Enqueues every launch of the program on the stream with the current dense vars.
  std::optional<Error> enqueue(uint32_t index);
  // Enqueues the cached graph for (program, dense), capturing it on a miss.
  std::optional<Error> enqueue_graph(uint32_t index);
};

}  // namespace kernrt
