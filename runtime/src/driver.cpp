// Opening libcuda.so.1 and filling the entry-point table (see driver.hpp).
//
// cuGetProcAddress is itself looked up with dlsym as `cuGetProcAddress_v2` (CUDA 12.0+),
// then asked for every other entry point at an explicit version, so `cuMemAlloc` binds
// to the _v2 ABI the typedef describes. cuFuncGetParamInfo (12.4) is optional: an older
// driver leaves it null and the ABI check is skipped.
#include "driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace kernrt::rt {
namespace {

Error no_driver(const std::string& why) {
  return Error{ErrorKind::Driver, "", "no CUDA driver/device: " + why};
}

template <class Fn>
bool resolve(PFN_cuGetProcAddress_v12000 gpa, const char* name, int version, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult rc = gpa(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || fn == nullptr) {
    return false;
  }
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

}  // namespace

Result<DriverApi> open_driver(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Result<DriverApi>::fail(no_driver(std::string("cannot open `") + library +
                                             "`: " + (why ? why : "unknown dlopen error")));
  }
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
  if (gpa == nullptr) {
    return Result<DriverApi>::fail(no_driver(std::string("`") + library +
        "` has no `cuGetProcAddress_v2`: the driver is older than CUDA 12.0"));
  }
  DriverApi api;
  constexpr int kV = 12000;  // the ABI every typedef in DriverApi describes
  std::string missing;
  auto need = [&](const char* name, auto* out) {
    if (!resolve(gpa, name, kV, out)) missing += (missing.empty() ? "`" : ", `") + std::string(name) + "`";
  };
  need("cuInit", &api.cuInit);
  need("cuDriverGetVersion", &api.cuDriverGetVersion);
  need("cuDeviceGet", &api.cuDeviceGet);
  need("cuDeviceGetCount", &api.cuDeviceGetCount);
  need("cuDeviceGetAttribute", &api.cuDeviceGetAttribute);
  need("cuDeviceGetName", &api.cuDeviceGetName);
  need("cuDevicePrimaryCtxRetain", &api.cuDevicePrimaryCtxRetain);
  need("cuDevicePrimaryCtxRelease", &api.cuDevicePrimaryCtxRelease);
  need("cuCtxSetCurrent", &api.cuCtxSetCurrent);
  need("cuStreamCreate", &api.cuStreamCreate);
  need("cuStreamDestroy", &api.cuStreamDestroy);
  need("cuStreamSynchronize", &api.cuStreamSynchronize);
  need("cuStreamWaitEvent", &api.cuStreamWaitEvent);
  need("cuStreamIsCapturing", &api.cuStreamIsCapturing);
  need("cuMemAlloc", &api.cuMemAlloc);
  need("cuMemFree", &api.cuMemFree);
  need("cuMemAllocHost", &api.cuMemAllocHost);
  need("cuMemFreeHost", &api.cuMemFreeHost);
  need("cuMemcpyHtoDAsync", &api.cuMemcpyHtoDAsync);
  need("cuMemcpyDtoHAsync", &api.cuMemcpyDtoHAsync);
  need("cuMemcpyDtoDAsync", &api.cuMemcpyDtoDAsync);
  need("cuMemGetAddressRange", &api.cuMemGetAddressRange);
  need("cuMemsetD8Async", &api.cuMemsetD8Async);
  need("cuMemGetInfo", &api.cuMemGetInfo);
  need("cuMemCreate", &api.cuMemCreate);
  need("cuMemRelease", &api.cuMemRelease);
  need("cuMemAddressReserve", &api.cuMemAddressReserve);
  need("cuMemAddressFree", &api.cuMemAddressFree);
  need("cuMemMap", &api.cuMemMap);
  need("cuMemUnmap", &api.cuMemUnmap);
  need("cuMemSetAccess", &api.cuMemSetAccess);
  need("cuMemGetAllocationGranularity", &api.cuMemGetAllocationGranularity);
  need("cuMemExportToShareableHandle", &api.cuMemExportToShareableHandle);
  need("cuMemImportFromShareableHandle", &api.cuMemImportFromShareableHandle);
  need("cuModuleLoadData", &api.cuModuleLoadData);
  need("cuModuleUnload", &api.cuModuleUnload);
  need("cuModuleGetFunction", &api.cuModuleGetFunction);
  need("cuFuncSetAttribute", &api.cuFuncSetAttribute);
  need("cuLaunchKernelEx", &api.cuLaunchKernelEx);
  need("cuLaunchKernel", &api.cuLaunchKernel);
  need("cuTensorMapEncodeTiled", &api.cuTensorMapEncodeTiled);
  need("cuTensorMapReplaceAddress", &api.cuTensorMapReplaceAddress);
  need("cuStreamBeginCapture", &api.cuStreamBeginCapture);
  need("cuStreamEndCapture", &api.cuStreamEndCapture);
  need("cuGraphInstantiateWithFlags", &api.cuGraphInstantiateWithFlags);
  need("cuGraphLaunch", &api.cuGraphLaunch);
  need("cuGraphExecDestroy", &api.cuGraphExecDestroy);
  need("cuGraphDestroy", &api.cuGraphDestroy);
  need("cuEventCreate", &api.cuEventCreate);
  need("cuEventRecord", &api.cuEventRecord);
  need("cuEventSynchronize", &api.cuEventSynchronize);
  need("cuEventElapsedTime", &api.cuEventElapsedTime);
  need("cuEventDestroy", &api.cuEventDestroy);
  need("cuGetErrorString", &api.cuGetErrorString);
  need("cuGetErrorName", &api.cuGetErrorName);
  // Optional: added in CUDA 12.4.
  resolve(gpa, "cuFuncGetParamInfo", 12040, &api.cuFuncGetParamInfo);
  if (!missing.empty()) {
    return Result<DriverApi>::fail(no_driver("`" + std::string(library) +
                                             "` lacks entry points " + missing));
  }
  CUresult rc = api.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    return Result<DriverApi>::fail(no_driver(driver_error(api, rc, "cuInit").message));
  }
  int count = 0;
  rc = api.cuDeviceGetCount(&count);
  if (rc != CUDA_SUCCESS || count == 0) {
    return Result<DriverApi>::fail(no_driver("cuInit succeeded but no CUDA device is visible"));
  }
  return Result<DriverApi>::ok(api);
}

Result<const DriverApi*> driver() {
  static std::once_flag once;
  static Result<DriverApi> opened;
  std::call_once(once, [] { opened = open_driver("libcuda.so.1"); });
  if (!opened) return Result<const DriverApi*>::fail(opened.errors);
  return Result<const DriverApi*>::ok(&*opened.value);
}

Error driver_error(const DriverApi& api, CUresult rc, const std::string& what,
                   const std::string& path) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(rc, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(rc, &text);
  std::string message = "`" + what + "` failed: " +
                        (name ? std::string(name) : "CUresult " + std::to_string(rc));
  if (text) message += " (" + std::string(text) + ")";
  return Error{ErrorKind::Driver, path, message};
}

std::optional<Error> check(const DriverApi& api, CUresult rc, const std::string& what,
                           const std::string& path) {
  if (rc == CUDA_SUCCESS) return std::nullopt;
  return driver_error(api, rc, what, path);
}

}  // namespace kernrt::rt
