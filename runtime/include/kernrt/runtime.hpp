// kernrt::Runtime: the C++ API of libkernrt (reference/kern-schema.md §3).
//
// Owns one loaded manifest on one GPU: the driver entry points, the loaded modules, every
// allocation (buffers, states, op scratch, pinned staging), the lowered programs and the
// graph cache. Names disappear at load; `run` only evaluates dense vars and launches.
// Contract: no exception crosses this API; every failure is a kernrt::Error with a kind
// that says who must act. What is not checked here: the verifier's rules (a `Verified`
// already passed them), the contents of inputs against their `domain`, and `fill` roles
// (the runtime never reads them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/verify.hpp"

namespace kernrt {

// Default token capacity of `bytes_per_token` states when LoadOptions::token_capacity is 0.
// Rounded down to the largest `index_into` stride (the page unit).
inline constexpr uint64_t kDefaultTokenCapacity = 65536;
inline constexpr size_t kDefaultGraphCacheCapacity = 64;

struct LoadOptions {
  std::vector<std::string> cubin_dirs;  // every *.cubin here is hashed; the hash is the identity
  std::string cache_dir;                // "" = $KERNRT_CACHE_DIR, else ~/.cache/kernrt
  int gpu = 0;                          // CUDA device ordinal
  uint64_t token_capacity = 0;          // 0 = kDefaultTokenCapacity
  uint64_t seq_slots = 0;               // 0 = seqs.max + 2 (slot 0 never leased, one pad slot)
  std::vector<std::string> weight_files;  // safetensors files; weights bound by buffer name
  size_t graph_cache_capacity = kDefaultGraphCacheCapacity;  // LRU bound, >= 1
  // A topology manifest runs one process per rank. `ranks`: this process's index in each
  // group of more than one rank (one-rank groups are 0). `rendezvous`: a directory every
  // rank of the job reaches, fresh per job, where the ranks compare the manifest's hash,
  // pass NCCL's unique ids and hand over their exported allocations (unix sockets, so the
  // ranks share a host); each wait there gives up after `rendezvous_timeout_s`.
  std::map<std::string, uint64_t> ranks;
  std::string rendezvous;
  double rendezvous_timeout_s = 120.0;
};

// Device time per iteration, from CUDA events around each iteration.
struct TimingStats {
  double median_us = 0.0;
  double min_us = 0.0;
  double mean_us = 0.0;
  int iters = 0;
};

// A CUDA stream as the caller holds it (a CUstream / cudaStream_t); nullptr means the
// runtime's own compute stream.
using Stream = void*;

// The caller's device memory standing in for a whole buffer or state during one call.
struct Binding {
  std::string buffer;    // a buffer's name, or a state's
  uint64_t address = 0;  // device address in this runtime's context, 16-byte aligned
  uint64_t bytes = 0;    // at least the buffer's allocation (its size at var maxima)
};

// A buffer as allocated: its declared dtype and kind, its shape at the vars' maxima.
struct BufferInfo {
  manifest::DType dtype = manifest::DType::u8;
  manifest::BufferKind kind = manifest::BufferKind::workspace;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
  uint64_t address = 0;
};

// True when libcuda.so.1 opens, cuInit succeeds and at least one device exists.
// Otherwise false, with `why` (if non-null) set to the reason. For GTEST_SKIP.
bool device_available(std::string* why);

// The part of a load that needs neither a GPU nor any file: this process's ranks in a
// topology manifest (LoadOptions::ranks, rendezvous), each problem at its pointer. load
// runs it first; a tool can run it before looking for a device.
Errors check_ranks(const manifest::Manifest& m, const LoadOptions& options);

class Runtime {
 public:
  // Opens the driver, resolves modules by hash, allocates everything at var maxima,
  // encodes tensormaps, lowers every program and binds weights, then runs every `once`
  // program one time, eagerly, with each var at its max (its failure fails the load).
  // One process is one rank (LoadOptions::ranks): the ranks of every multi-rank group meet
  // in the rendezvous directory, compare the manifest's hash, join one NCCL communicator per
  // group the collectives name (libnccl.so.2 opened at load; NCCL_NVLS_ENABLE=0 unless set),
  // and fill the peer buffers with every member's address of the exported objects (the
  // virtual-memory API, POSIX descriptors: ranks on one host). Externs other than the GEMM
  // and NCCL built-ins, and missing or out-of-range ranks, are refused at their JSON pointer
  // before the driver is touched.
  static Result<std::unique_ptr<Runtime>> load(const manifest::Verified& verified,
                                               const LoadOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Copies `bytes` into the pinned staging of an `input` buffer and enqueues the
  // host-to-device copy on the compute stream. A shorter write fills a prefix. Caller
  // error (nothing copied) for an unknown or non-input buffer, more bytes than the
  // allocation, a size that is not a whole number of elements, or an element outside the
  // buffer's `domain` (bounds at the vars' maxima, `index_into` rows, `monotone`).
  std::optional<Error> write_input(const std::string& buffer, const void* data, size_t bytes);
  // The same at a byte offset (a whole number of elements): offset + bytes must fit. The
  // domain is checked on the elements written (monotone within them).
  std::optional<Error> write_input_at(const std::string& buffer, uint64_t offset,
                                      const void* data, size_t bytes);
  // Device-to-device copy of `bytes` from `src` into an input buffer at `offset`, ordered on
  // `stream` (no host wait). The data never reaches the host, so its domain is not checked:
  // the caller vouches for it, as for any write through buffer_address.
  std::optional<Error> write_input_device(const std::string& buffer, uint64_t offset,
                                          uint64_t src, size_t bytes, Stream stream);

  // Harness surface: writes a prefix of any buffer or state (weights, carries, states),
  // synchronously. Same size checks as write_input.
  std::optional<Error> write_buffer(const std::string& buffer, const void* data, size_t bytes);
  std::optional<Error> write_state(const std::string& state, const void* data, size_t bytes);
  // The same at a byte offset into the state: offset + bytes must fit in its allocation.
  std::optional<Error> write_state_at(const std::string& state, uint64_t offset, const void* data,
                                      size_t bytes);

  // Enqueues a program on `stream` and returns without waiting (vars and graph as for
  // run). Ordered after this runtime's pending copies and runs, and before its next ones;
  // while `stream` is being captured only the launches are issued (graph must be false).
  std::optional<Error> enqueue(const std::string& program,
                               const std::map<std::string, uint64_t>& vars, bool graph,
                               Stream stream);
  // Eager enqueue with the caller's memory bound to buffers or states for this call only:
  // every pointer, pack field and tensormap that names a bound one gets the caller's address.
  // Caller error (nothing launched) for an unknown or twice-bound buffer, an unaligned
  // address, fewer bytes than the allocation, or memory that is not one device allocation.
  std::optional<Error> enqueue_bound(const std::string& program,
                                     const std::map<std::string, uint64_t>& vars,
                                     const std::vector<Binding>& bindings, Stream stream);
  // Waits for everything enqueued on the compute stream and the last caller stream.
  std::optional<Error> synchronize();

  // Runs a program to completion (enqueue + synchronize). Every var the program reads must
  // be given and inside [1, max]; vars it does not read are taken as 1. graph = true
  // captures one CUDA graph per (program, dense vars) on first use (bounded LRU) and
  // replays it; eager and graph runs produce bit-identical outputs.
  std::optional<Error> run(const std::string& program,
                           const std::map<std::string, uint64_t>& vars, bool graph = false);

  // Whole allocation (at var maxima) of an `output` buffer / of any buffer / of a state.
  std::optional<Error> read_output(const std::string& buffer, std::vector<uint8_t>* out);
  // `bytes` of an output buffer from byte `offset` into dst (offset + bytes must fit).
  std::optional<Error> read_output_at(const std::string& buffer, uint64_t offset, void* dst,
                                      size_t bytes);
  std::optional<Error> read_buffer(const std::string& buffer, std::vector<uint8_t>* out);
  std::optional<Error> read_state(const std::string& state, std::vector<uint8_t>* out);

  // Runs the program once (warm-up, capturing in graph mode), then `iters` more times,
  // each timed with CUDA events on the compute stream.
  Result<TimingStats> time(const std::string& program,
                           const std::map<std::string, uint64_t>& vars, bool graph, int iters);

  // Sizes as allocated (0 for an unknown name).
  size_t buffer_bytes(const std::string& buffer) const;
  size_t state_bytes(const std::string& state) const;
  // Device address of a buffer or state (0 for an unknown name), for tests and harnesses.
  uint64_t buffer_address(const std::string& buffer) const;
  uint64_t state_address(const std::string& state) const;

  std::vector<std::string> programs() const;   // sorted
  std::vector<std::string> buffers() const;    // sorted
  std::vector<std::string> states() const;     // sorted
  std::optional<BufferInfo> buffer_info(const std::string& buffer) const;  // nullopt if unknown
  // Manifest module name -> the file its verified bytes were read from (a cubin dir's
  // *.cubin / *.so, or `<cache>/blobs/<sha256>`), for reports such as program_io's.
  std::map<std::string, std::string> module_files() const;
  size_t launch_count(const std::string& program) const;  // lowered launches, 0 if unknown
  size_t graph_cache_size() const;             // graphs currently cached

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernrt
