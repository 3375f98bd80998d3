// NCCL opened at run time for the collective built-ins (extern:nccl_*), like the driver
// and cuBLASLt: nothing links libnccl, so every binary starts (and says why it cannot run
// a collective) where NCCL is absent.
//
// Owns: finding and opening libnccl.so.2 ($KERNRT_NCCL, then the soname, then
// $CUDA_HOME/lib{,64} and /usr/local/cuda/lib{,64}), the entry points the collectives need,
// the process environment NCCL reads at its first call (NCCL_NVLS_ENABLE=0: NVLink
// multicast stays off, it can take a shared host's GPUs out of service; the user's value
// wins when set), one communicator per topology group of this rank (Comm, destroyed with
// the runtime), and one collective enqueued on a stream (capturable: NCCL 2.9+ records
// its kernels into a CUDA graph being captured on that stream).
// No NCCL header: the few types are declared here from nccl.h's ABI (NCCL 2.x, stable
// since 2.0; ncclBfloat16 = 9 since 2.10): ncclResult_t and the enums are C ints,
// ncclUniqueId is 128 bytes passed by value, ncclComm_t an opaque pointer.
// Does not check: the buffers' bounds (lowering proved them at load) or that every rank
// calls the same collectives in the same order (the manifest's SPMD contract).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/nccl_extern.hpp"

namespace kernrt::rt {

struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
static_assert(sizeof(NcclUniqueId) == 128, "ncclUniqueId is passed by value: 128 bytes");

class Nccl {
 public:
  // Opens the first of `candidates` that loads (default_candidates() when empty) and
  // resolves every entry point. Error{Driver} naming libnccl.so.2 and each place tried.
  static Result<std::unique_ptr<Nccl>> open(const std::vector<std::string>& candidates = {});
  static std::vector<std::string> default_candidates();
  ~Nccl();
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  // This rank's end of one group's communicator. Destroyed before the Nccl that made it.
  class Comm {
   public:
    ~Comm();
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;
    uint64_t world() const { return world_; }

   private:
    friend class Nccl;
    Comm() = default;
    const Nccl* nccl_ = nullptr;
    void* comm_ = nullptr;
    uint64_t world_ = 0;
  };

  Result<NcclUniqueId> unique_id() const;
  // ncclCommInitRank: blocks until all `world` ranks joined with `id` (unless inside
  // group_start/group_end). `where` names the group for messages.
  Result<std::unique_ptr<Comm>> init_rank(uint64_t world, const NcclUniqueId& id, uint64_t rank,
                                          const std::string& where) const;
  std::optional<Error> group_start() const;
  std::optional<Error> group_end() const;

  // Enqueues one collective (sum for the reductions) on `stream`; `count` is per rank.
  std::optional<Error> collective(const Comm& comm, manifest::Collective coll, manifest::DType elem,
                                  uint64_t send, uint64_t recv, uint64_t count, CUstream stream,
                                  const std::string& where) const;

  const std::string& library() const { return library_; }

  struct Api;

 private:
  Nccl() = default;
  std::optional<Error> failed(int rc, const std::string& what, const std::string& where) const;
  std::unique_ptr<Api> api_;
  std::string library_;
};

// Sets NCCL_NVLS_ENABLE=0 unless the variable is already set (any value). Called by
// Nccl::open before NCCL is loaded; exposed for the test.
void keep_nvlink_multicast_off();

}  // namespace kernrt::rt
