// Tensormap spec building and encoding (see tensormap.hpp).
//
// Hardware facts used: TMA global addresses must be 16-byte aligned, globalDim entries
// are at most 2^32, and a CUtensorMap is 128 bytes, 64-byte aligned (the blob is copied
// into an aligned CUtensorMap before and after the driver call).
#include "tensormap.hpp"

#include <cstring>
#include <sstream>

#include "driver.hpp"

namespace kernrt::rt {
namespace {

CUtensorMapDataType map_dtype(manifest::TmaDType t) {
  using T = manifest::TmaDType;
  switch (t) {
    case T::u8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case T::u16: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case T::u32: return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case T::i32: return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case T::u64: return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case T::i64: return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case T::f16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case T::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case T::f32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case T::u4: return CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

CUtensorMapSwizzle map_swizzle(uint32_t s) {
  switch (s) {
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

CUtensorMapL2promotion map_l2(uint32_t p) {
  switch (p) {
    case 64: return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    case 128: return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    case 256: return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    default: return CU_TENSOR_MAP_L2_PROMOTION_NONE;
  }
}

bool add_sat(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

}  // namespace

uint64_t tensormap_footprint(const manifest::TensorMap& tm, size_t count) {
  if (count == 0 || tm.dims.empty()) return 0;
  uint64_t bits = 0;
  if (__builtin_mul_overflow(tm.dims[0], manifest::tma_dtype_bits(tm.dtype), &bits)) {
    return UINT64_MAX;
  }
  uint64_t total = bits / 8 + (bits % 8 != 0 ? 1 : 0);
  for (size_t d = 1; d < count && d < tm.dims.size(); ++d) {
    if (tm.dims[d] == 0 || d - 1 >= tm.strides.size()) continue;
    uint64_t span = 0;
    if (__builtin_mul_overflow(tm.dims[d] - 1, tm.strides[d - 1], &span) ||
        !add_sat(total, span, &total)) {
      return UINT64_MAX;
    }
  }
  return total;
}

Result<TensorMapSpec> tensormap_spec(const manifest::TensorMap& tm, uint64_t address,
                                     uint64_t bytes_left, const TensorMapSite& site) {
  auto fail = [&](const std::string& message) {
    return Result<TensorMapSpec>::fail(Error{ErrorKind::Manifest, site.path, message});
  };
  const size_t rank = tm.dims.size();
  if (rank < 1 || rank > 5 || tm.box.size() != rank || tm.strides.size() + 1 != rank) {
    return fail("tensormap has " + std::to_string(rank) + " dims, " +
                std::to_string(tm.strides.size()) + " strides and " +
                std::to_string(tm.box.size()) + " box entries: expected 1-5 dims, one stride "
                "fewer and one box entry per dim");
  }
  if (address % 16 != 0) {
    return fail("tensormap base " + hex(address) + " (" + site.what +
                ") is not 16-byte aligned: TMA needs 16-byte aligned global addresses");
  }
  TensorMapSpec spec;
  spec.dtype = map_dtype(tm.dtype);
  spec.rank = static_cast<uint32_t>(rank);
  spec.address = address;
  for (size_t d = 0; d < rank; ++d) {
    spec.dims[d] = tm.dims[d];
    spec.box[d] = tm.box[d];
    spec.element_strides[d] = 1;
  }
  for (size_t d = 0; d + 1 < rank; ++d) spec.strides[d] = tm.strides[d];
  spec.swizzle = map_swizzle(tm.swizzle.value_or(0));
  spec.l2_promotion = map_l2(tm.l2_promotion.value_or(0));
  spec.oob_fill = tm.oob_nan.value_or(false) ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                             : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;

  const bool spanning = rank > 1 && tm.dims.back() == 0;
  if (spanning) {
    const uint64_t inner = tensormap_footprint(tm, rank - 1);
    if (inner > bytes_left) {
      return fail("tensormap inner footprint " + std::to_string(inner) + " bytes exceeds the " +
                  std::to_string(bytes_left) + " bytes left in " + site.what);
    }
    const uint64_t last_stride = tm.strides.back();
    if (last_stride == 0) return fail("tensormap outermost stride is 0");
    const uint64_t extent = (bytes_left - inner) / last_stride + 1;
    if (extent > (uint64_t{1} << 32)) {
      return fail("spanning tensormap extent " + std::to_string(extent) +
                  " exceeds the TMA limit of 2^32 (" + site.what + ")");
    }
    spec.dims[rank - 1] = extent;
  } else {
    const uint64_t footprint = tensormap_footprint(tm, rank);
    if (footprint > bytes_left) {
      return fail("tensormap footprint " + std::to_string(footprint) + " bytes exceeds the " +
                  std::to_string(bytes_left) + " bytes left in " + site.what);
    }
  }
  return Result<TensorMapSpec>::ok(spec);
}

Result<TensorMapBlob> DriverTensorMapEncoder::encode(const TensorMapSpec& spec,
                                                     const std::string& path) {
  CUtensorMap map;  // 64-byte aligned by its declaration in cuda.h
  std::memset(&map, 0, sizeof map);
  cuuint64_t dims[5] = {};
  cuuint64_t strides[4] = {};
  cuuint32_t box[5] = {};
  cuuint32_t elem[5] = {};
  for (uint32_t d = 0; d < spec.rank; ++d) {
    dims[d] = spec.dims[d];
    box[d] = spec.box[d];
    elem[d] = spec.element_strides[d];
    if (d + 1 < spec.rank) strides[d] = spec.strides[d];
  }
  CUresult rc = api_.cuTensorMapEncodeTiled(
      &map, spec.dtype, spec.rank, reinterpret_cast<void*>(spec.address), dims, strides, box,
      elem, spec.interleave, spec.swizzle, spec.l2_promotion, spec.oob_fill);
  if (rc != CUDA_SUCCESS) {
    return Result<TensorMapBlob>::fail(driver_error(api_, rc, "cuTensorMapEncodeTiled", path));
  }
  static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
  TensorMapBlob blob;
  std::memcpy(blob.data(), &map, blob.size());
  return Result<TensorMapBlob>::ok(blob);
}

}  // namespace kernrt::rt
