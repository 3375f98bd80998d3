// Tensormap encoding: manifest `tensormap` + bound pointer -> cuTensorMapEncodeTiled args.
//
// Owns the pure translation (reference/kern-schema.md §1.13, §3.2): dtype, swizzle, L2
// promotion and OOB-fill enums, interleave NONE, element strides 1, the spanning outer
// extent `(bytes_left - inner_footprint) / strides[last] + 1`, the 16-byte base
// alignment check and the footprint-fits check. The encoder is an interface so tests
// inject a fake that records the arguments; the real one calls the driver.
// Does not check what the verifier proved (box limits, stride multiples of 16, rank 1-5,
// inner dim bytes multiple of 16, swizzle span).
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

struct DriverApi;

// Exactly the arguments of one cuTensorMapEncodeTiled call.
struct TensorMapSpec {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  uint32_t rank = 0;
  uint64_t address = 0;
  std::array<uint64_t, 5> dims{};         // globalDim, innermost first
  std::array<uint64_t, 4> strides{};      // globalStrides (bytes) of dims 1..rank-1
  std::array<uint32_t, 5> box{};          // boxDim
  std::array<uint32_t, 5> element_strides{};
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
};

using TensorMapBlob = std::array<uint8_t, 128>;

// Bytes from the base to the end of the last element of dims[0..count).
// Saturates at UINT64_MAX on overflow.
uint64_t tensormap_footprint(const manifest::TensorMap& tm, size_t count);

// Where a descriptor is bound: `path` is the pack field's pointer (errors carry it),
// `what` names the call and the bound buffer for messages ("`kv` + 262144 in call
// /programs/decode/calls/0").
struct TensorMapSite {
  std::string path;
  std::string what;
};

// Builds the spec for a descriptor whose param is bound to `address` with `bytes_left`
// bytes after it. Errors are kind Manifest (the manifest's binding is at fault) at
// `site.path`: unaligned base, footprint past the allocation, spanning extent that does
// not fit or exceeds 2^32.
Result<TensorMapSpec> tensormap_spec(const manifest::TensorMap& tm, uint64_t address,
                                     uint64_t bytes_left, const TensorMapSite& site);

class TensorMapEncoder {
 public:
  virtual ~TensorMapEncoder() = default;
  virtual Result<TensorMapBlob> encode(const TensorMapSpec& spec, const std::string& path) = 0;
};

// Calls cuTensorMapEncodeTiled; a driver refusal is a Driver error at `path`.
class DriverTensorMapEncoder : public TensorMapEncoder {
 public:
  explicit DriverTensorMapEncoder(const DriverApi& api) : api_(api) {}
  Result<TensorMapBlob> encode(const TensorMapSpec& spec, const std::string& path) override;

 private:
  const DriverApi& api_;
};

}  // namespace kernrt::rt
