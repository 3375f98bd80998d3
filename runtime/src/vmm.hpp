// Device memory through the CUDA virtual-memory API, for what other ranks map: a manifest's
// `export` buffers, the states a peer buffer points at, and this rank's mappings of the
// other ranks' allocations (kern-schema §3.1 step 4, §3.7 "Peers").
//
// Owns: one physical allocation (cuMemCreate, pinned on this device, shareable as a POSIX
// file descriptor within the host), its reserved address range, the mapping and the
// read-write access of this device; the same for an import from another process's
// descriptor. Sizes are rounded up to the allocation granularity. Release unmaps, frees
// the range and drops the handle; the runtime releases every allocation before its
// context. Does not: fabric handles (cross-host, IMEX) or multicast objects (never
// created: they can take a shared host's GPUs out of service).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <string>

#include "driver.hpp"
#include "kernrt/manifest/error.hpp"

namespace kernrt::rt {

struct VmmAllocation {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr address = 0;
  uint64_t bytes = 0;   // the mapped size (granularity-rounded)
  bool mapped = false;
};

// Granularity-rounded `bytes` (>= 1) of exportable memory on `device`, mapped read-write.
Result<VmmAllocation> vmm_create(const DriverApi& api, CUdevice device, uint64_t bytes,
                                 const std::string& path);
// A POSIX descriptor for `a`'s physical memory, owned by the caller.
Result<int> vmm_export_fd(const DriverApi& api, const VmmAllocation& a, const std::string& path);
// Another process's allocation from its descriptor (consumed: closed here), mapped
// read-write on `device`; `bytes` is the size its owner mapped.
Result<VmmAllocation> vmm_import_fd(const DriverApi& api, CUdevice device, int fd, uint64_t bytes,
                                    const std::string& path);
// Unmaps and frees; safe on a default-constructed or half-made allocation.
void vmm_release(const DriverApi& api, VmmAllocation* a);

}  // namespace kernrt::rt
