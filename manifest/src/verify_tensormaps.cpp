// Verifier rule 17 (reference/kern-schema.md §2.2, §1.13): the structure of one tensormap
// pack field (dims, strides, box, alignment, swizzle, L2 promotion, the TMA encoder's limits
// that the manifest alone proves), and what rule 21 checks per call: the descriptor's
// footprint (checked u64: a footprint that wraps is refused here, never skipped), the
// inner footprint and outermost stride of a spanning descriptor, and the base alignment
// TMA needs. Deliberately not checked: the address itself (the runtime encodes at load).
#include <string>

#include "verify_context.hpp"

namespace kernrt::manifest::rules {

void check_tensormap(VerifyContext& c, const TensorMap& t, const std::string& tp) {
  const size_t n = t.dims.size();
  if (n < 1 || n > 5) {
    c.fail(ptr(tp, "dims"), "dims has " + std::to_string(n) + " entries, expected 1 to 5");
    return;
  }
  if (t.strides.size() != n - 1) {
    c.fail(ptr(tp, "strides"), "strides has " + std::to_string(t.strides.size()) +
                                   " entries, expected dims - 1 = " + std::to_string(n - 1));
  }
  if (t.box.size() != n) {
    c.fail(ptr(tp, "box"), "box has " + std::to_string(t.box.size()) + " entries, expected " +
                               std::to_string(n));
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    if (t.dims[i] == 0) {
      c.fail(ptr(ptr(tp, "dims"), i), "dims[" + std::to_string(i) +
                                          "] is 0; only the outermost dim may span the buffer");
      break;
    }
  }
  if (n == 1 && t.dims[0] == 0) c.fail(ptr(ptr(tp, "dims"), 0), "dims[0] is 0");
  for (size_t i = 0; i < t.box.size(); ++i) {
    if (t.box[i] < 1 || t.box[i] > 256) {
      c.fail(ptr(ptr(tp, "box"), i), "box[" + std::to_string(i) + "] = " +
                                         std::to_string(t.box[i]) + ", must be 1..=256");
      break;
    }
  }
  for (size_t i = 0; i < t.strides.size(); ++i) {
    if (t.strides[i] == 0 || t.strides[i] % 16 != 0) {
      c.fail(ptr(ptr(tp, "strides"), i), "strides[" + std::to_string(i) + "] = " +
                                             std::to_string(t.strides[i]) +
                                             " is not a positive multiple of 16");
      break;
    }
  }
  // cuTensorMapEncodeTiled refuses at load what these prove now: every global dim at most
  // 2^32, every stride below 2^40 bytes; packed u4 needs dims[0] % 128 and strides % 32.
  for (size_t i = 0; i < n; ++i) {
    if (t.dims[i] > kMaxTmaDim) {
      c.fail(ptr(ptr(tp, "dims"), i), "dims[" + std::to_string(i) + "] = " +
                                          std::to_string(t.dims[i]) +
                                          " exceeds the TMA limit of 2^32 elements");
      break;
    }
  }
  for (size_t i = 0; i < t.strides.size(); ++i) {
    if (t.strides[i] >= kMaxTmaStride) {
      c.fail(ptr(ptr(tp, "strides"), i), "strides[" + std::to_string(i) + "] = " +
                                             std::to_string(t.strides[i]) +
                                             " bytes is not below the TMA limit of 2^40");
      break;
    }
  }
  if (t.dtype == TmaDType::u4) {
    if (t.dims[0] % 128 != 0) {
      c.fail(ptr(ptr(tp, "dims"), 0), "dims[0] = " + std::to_string(t.dims[0]) +
                                          " nibbles: a u4 descriptor needs a multiple of 128");
    }
    for (size_t i = 0; i < t.strides.size(); ++i) {
      if (t.strides[i] % 32 != 0) {
        c.fail(ptr(ptr(tp, "strides"), i), "strides[" + std::to_string(i) + "] = " +
                                               std::to_string(t.strides[i]) +
                                               ": a u4 descriptor needs a multiple of 32");
        break;
      }
    }
  }
  const uint64_t bits = tma_dtype_bits(t.dtype);
  // bits divides 128 for every TMA dtype, so dims[0]*bits is a multiple of 128 exactly
  // when dims[0] is a multiple of 128/bits (no overflow for huge dims).
  if (t.dims[0] % (128 / bits) != 0) {
    c.fail(ptr(ptr(tp, "dims"), 0), "dims[0] = " + std::to_string(t.dims[0]) +
                                        " elements is not a multiple of 16 bytes");
  }
  const uint32_t swizzle = t.swizzle.value_or(0);
  if (!t.box.empty()) {
    const uint64_t inner = uint64_t{t.box[0]} * bits / 8;
    if (inner % 16 != 0) {
      c.fail(ptr(ptr(tp, "box"), 0), "box[0] = " + std::to_string(t.box[0]) +
                                         " elements spans " + std::to_string(inner) +
                                         " bytes, not a multiple of 16");
    }
    if (swizzle != 0 && inner > swizzle) {
      c.fail(ptr(ptr(tp, "box"), 0), "box[0] spans " + std::to_string(inner) +
                                         " bytes, more than the " + std::to_string(swizzle) +
                                         " byte swizzle span");
    }
  }
  if (swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128) {
    c.fail(ptr(tp, "swizzle"), "swizzle " + std::to_string(swizzle) +
                                   " is not one of 0, 32, 64, 128");
  }
  const uint32_t l2 = t.l2_promotion.value_or(0);
  if (l2 != 0 && l2 != 64 && l2 != 128 && l2 != 256) {
    c.fail(ptr(tp, "l2_promotion"), "l2_promotion " + std::to_string(l2) +
                                        " is not one of 0, 64, 128, 256");
  }
}

namespace {

// Bytes a descriptor can address from its base over its first `count` dims (§1.13:
// ceil(dims[0] * bits / 8) + sum over d >= 1 of (dims[d] - 1) * strides[d - 1]); nullopt
// when that overflows u64. The caller has checked the shape (dims, strides) is well-formed.
std::optional<uint64_t> footprint(const TensorMap& t, size_t count) {
  uint64_t bits = 0;
  if (__builtin_mul_overflow(t.dims[0], uint64_t{tma_dtype_bits(t.dtype)}, &bits)) {
    return std::nullopt;
  }
  uint64_t bytes = bits / 8 + (bits % 8 != 0);
  for (size_t d = 1; d < count; ++d) {
    uint64_t span = 0;
    if (__builtin_mul_overflow(t.dims[d] - 1, t.strides[d - 1], &span) ||
        __builtin_add_overflow(bytes, span, &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

std::string u64_list(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

void record_footprint(VerifyContext& c, const std::string& oname, const Op& op,
                      const TensorMap& t, const std::string& fp, const std::string& tp) {
  {
    auto& per_param = c.op_tensormaps[oname];
    per_param.resize(op.params.size());
    TensorMapBounds& b = per_param[t.param];
    const uint32_t need = t.dtype == TmaDType::u4 ? 32 : 16;
    if (need > b.align) {
      b.align = need;
      b.align_path = fp;
    }
  }
  const size_t n = t.dims.size();
  if (n < 1 || n > 5 || t.strides.size() + 1 != n) return;  // shape already reported
  for (size_t i = 0; i + 1 < n; ++i) {
    if (t.dims[i] == 0) return;  // only the outermost may span: reported by rule 17
  }
  const bool spanning = n > 1 && t.dims.back() == 0;
  if (n == 1 && t.dims[0] == 0) return;
  auto bytes = footprint(t, spanning ? n - 1 : n);
  if (!bytes) {
    c.fail(tp, std::string(spanning ? "inner footprint" : "footprint") +
                   " overflows u64: ceil(dims[0] * " + std::to_string(tma_dtype_bits(t.dtype)) +
                   " bits / 8) + sum of (dims[d] - 1) * strides[d - 1] with dims " +
                   u64_list(t.dims) + " and strides " + u64_list(t.strides));
    return;
  }
  auto& per_param = c.op_tensormaps[oname];
  per_param.resize(op.params.size());
  TensorMapBounds& b = per_param[t.param];
  TensorMapUse& use = spanning ? b.inner : b.full;
  if (!use.any || *bytes > use.footprint) use = TensorMapUse{*bytes, fp, true};
  if (spanning && (b.min_stride == 0 || t.strides.back() < b.min_stride)) {
    b.min_stride = t.strides.back();
    b.stride_path = fp;
  }
}

}  // namespace kernrt::manifest::rules
