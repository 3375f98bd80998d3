// VMM allocations (see vmm.hpp): create or import, reserve, map, grant access; each step's
// failure undoes the steps before it, so a refused export leaves nothing allocated.
#include "vmm.hpp"

#include <unistd.h>

#include <algorithm>

namespace kernrt::rt {
namespace {

CUmemAllocationProp device_prop(CUdevice device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

// Reserves a range for `a.handle` of `a.bytes`, maps it and grants this device read-write.
std::optional<Error> map_rw(const DriverApi& api, CUdevice device, VmmAllocation* a,
                            const std::string& path) {
  if (auto e = check(api, api.cuMemAddressReserve(&a->address, a->bytes, 0, 0, 0), "cuMemAddressReserve", path)) {
    a->address = 0;
    return e;
  }
  if (auto e = check(api, api.cuMemMap(a->address, a->bytes, 0, a->handle, 0), "cuMemMap", path)) return e;
  a->mapped = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return check(api, api.cuMemSetAccess(a->address, a->bytes, &access, 1), "cuMemSetAccess", path);
}

}  // namespace

Result<VmmAllocation> vmm_create(const DriverApi& api, CUdevice device, uint64_t bytes,
                                 const std::string& path) {
  using R = Result<VmmAllocation>;
  const CUmemAllocationProp prop = device_prop(device);
  size_t gran = 0;
  if (auto e = check(api, api.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                     "cuMemGetAllocationGranularity", path)) {
    return R::fail(*e);
  }
  VmmAllocation a;
  a.bytes = (std::max<uint64_t>(bytes, 1) + gran - 1) / gran * gran;
  if (auto e = check(api, api.cuMemCreate(&a.handle, a.bytes, &prop, 0), "cuMemCreate (exportable)", path)) {
    return R::fail(*e);
  }
  if (auto e = map_rw(api, device, &a, path)) {
    vmm_release(api, &a);
    return R::fail(*e);
  }
  return R::ok(a);
}

Result<int> vmm_export_fd(const DriverApi& api, const VmmAllocation& a, const std::string& path) {
  int fd = -1;
  if (auto e = check(api, api.cuMemExportToShareableHandle(&fd, a.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     "cuMemExportToShareableHandle (POSIX fd)", path)) {
    return Result<int>::fail(*e);
  }
  return Result<int>::ok(fd);
}

Result<VmmAllocation> vmm_import_fd(const DriverApi& api, CUdevice device, int fd, uint64_t bytes,
                                    const std::string& path) {
  using R = Result<VmmAllocation>;
  VmmAllocation a;
  a.bytes = bytes;
  const CUresult rc = api.cuMemImportFromShareableHandle(
      &a.handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);  // the handle holds the memory now (or the import failed)
  if (auto e = check(api, rc, "cuMemImportFromShareableHandle (POSIX fd)", path)) return R::fail(*e);
  if (auto e = map_rw(api, device, &a, path)) {
    vmm_release(api, &a);
    return R::fail(*e);
  }
  return R::ok(a);
}

void vmm_release(const DriverApi& api, VmmAllocation* a) {
  if (a->mapped) api.cuMemUnmap(a->address, a->bytes);
  if (a->address) api.cuMemAddressFree(a->address, a->bytes);
  if (a->handle) api.cuMemRelease(a->handle);
  *a = VmmAllocation{};
}

}  // namespace kernrt::rt
