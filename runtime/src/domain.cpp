// write_input's domain check (domain.hpp). Integer elements compare exactly (as 128-bit
// integers, so u64 and i64 share one path); float elements compare as doubles, and a NaN
// fails every bound.
#include "domain.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kernrt/manifest/expr.hpp"

namespace kernrt::rt {
namespace {

// Wide enough for every i64 and u64 element and bound; `__extension__` because the type
// is a GCC/Clang extension that -Wpedantic names.
__extension__ typedef __int128 Int;

std::string int_text(Int v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  while (v != 0) {
    const int d = static_cast<int>(v % 10);
    digits.insert(digits.begin(), static_cast<char>('0' + (d < 0 ? -d : d)));
    v /= 10;
  }
  return negative ? "-" + digits : digits;
}

std::string float_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man != 0 ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  }
  return (h & 0x8000) != 0 ? -v : v;
}

// E4M3 (fn): bias 7, no infinities, S.1111.111 is NaN.
float fp8e4m3_to_float(uint8_t b) {
  const int exp = (b >> 3) & 0xf;
  const int man = b & 0x7;
  float v;
  if (exp == 15 && man == 7) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -9);
  } else {
    v = std::ldexp(static_cast<float>(man | 0x8), exp - 10);
  }
  return (b & 0x80) != 0 ? -v : v;
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Int int_at(manifest::DType t, const uint8_t* p) {
  switch (t) {
    case manifest::DType::i32: return load<int32_t>(p);
    case manifest::DType::u32: return load<uint32_t>(p);
    case manifest::DType::i64: return load<int64_t>(p);
    case manifest::DType::u64: return load<uint64_t>(p);
    case manifest::DType::u8: return *p;
    default: return 0;
  }
}

double float_at(manifest::DType t, const uint8_t* p) {
  switch (t) {
    case manifest::DType::f32: return load<float>(p);
    case manifest::DType::bf16: {
      const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case manifest::DType::f16: return half_to_float(load<uint16_t>(p));
    case manifest::DType::fp8e4m3: return fp8e4m3_to_float(*p);
    default: return 0.0;
  }
}

// A bound as an integer and as a double; expressions evaluate at the vars' maxima.
struct Limit {
  Int i = 0;
  double f = 0.0;
  bool is_float = false;
};

std::optional<Limit> limit_of(const manifest::Bound& b, const manifest::VarLookup& lookup,
                              std::string* why) {
  switch (b.kind) {
    case manifest::Bound::Kind::Int: return Limit{b.i, static_cast<double>(b.i), false};
    case manifest::Bound::Kind::Float: return Limit{0, b.f, true};
    case manifest::Bound::Kind::Expr: {
      auto v = manifest::evaluate(b.expr, lookup, why);
      if (!v) return std::nullopt;
      return Limit{static_cast<Int>(*v), static_cast<double>(*v), false};
    }
  }
  return std::nullopt;
}

// Rows an `index_into` element may name: [0, rows / stride - 1]; nullopt if unknown.
std::optional<uint64_t> target_rows(const manifest::Manifest& m, const MemoryPlan& plan,
                                    const std::string& target,
                                    const std::map<std::string, uint64_t>& max) {
  if (auto b = m.buffers.find(target); b != m.buffers.end() && !b->second.shape.empty()) {
    std::string why;
    return manifest::evaluate(b->second.shape[0], manifest::lookup_in(max), &why);
  }
  auto s = m.states.find(target);
  if (s == m.states.end()) return std::nullopt;
  if (s->second.bytes_per_token != 0) return plan.token_capacity;
  auto bytes = plan.states.find(target);
  if (bytes == plan.states.end()) return std::nullopt;
  return bytes->second;  // per-sequence and fixed states: lines of `stride` bytes
}

}  // namespace

std::optional<Error> check_domain(const manifest::Manifest& m, const MemoryPlan& plan,
                                  const std::string& name, const void* data, size_t bytes,
                                  uint64_t first) {
  auto it = m.buffers.find(name);
  if (it == m.buffers.end() || !it->second.domain || bytes == 0) return std::nullopt;
  const manifest::Buffer& b = it->second;
  const manifest::Domain& d = *b.domain;
  const std::string path = json_pointer_append("/buffers", name);
  auto fail = [&](const std::string& message) {
    return Error{ErrorKind::Caller, path, "input `" + name + "` " + message};
  };

  const auto max_vars = manifest::vars_at_max(m);
  const auto lookup = manifest::lookup_in(max_vars);
  std::string why;
  std::optional<Limit> lo, hi;
  if (d.min && !(lo = limit_of(*d.min, lookup, &why))) return fail("domain min: " + why);
  if (d.max && !(hi = limit_of(*d.max, lookup, &why))) return fail("domain max: " + why);
  std::optional<Int> last_row;
  if (d.index_into) {
    auto rows = target_rows(m, plan, *d.index_into, max_vars);
    if (!rows) return fail("indexes `" + *d.index_into + "`, whose size is unknown");
    last_row = static_cast<Int>(*rows / d.stride.value_or(1)) - 1;
  }
  const bool monotone = d.monotone.value_or(false);
  const bool is_float = manifest::dtype_is_float(b.dtype);
  const size_t elem = manifest::dtype_size(b.dtype);
  const auto* p = static_cast<const uint8_t*>(data);

  // Messages are built only for the element that fails.
  auto element = [&](size_t i, const std::string& value, const std::string& problem) {
    return fail("element " + std::to_string(first + i) + " = " + value + " " + problem);
  };
  for (size_t i = 0, n = bytes / elem; i < n; ++i) {
    if (is_float) {
      const double v = float_at(b.dtype, p + i * elem);
      if (lo && !(v >= lo->f)) {
        return element(i, float_text(v), "is below the domain min " + float_text(lo->f));
      }
      if (hi && !(v <= hi->f)) {
        return element(i, float_text(v), "is above the domain max " + float_text(hi->f));
      }
      if (monotone && i > 0 && v < float_at(b.dtype, p + (i - 1) * elem)) {
        return element(i, float_text(v), "is below element " + std::to_string(first + i - 1) +
                                             ", but the domain is monotone");
      }
      continue;
    }
    const Int v = int_at(b.dtype, p + i * elem);
    if (lo && (lo->is_float ? static_cast<double>(v) < lo->f : v < lo->i)) {
      return element(i, int_text(v), "is below the domain min " +
                                         (lo->is_float ? float_text(lo->f) : int_text(lo->i)));
    }
    if (hi && (hi->is_float ? static_cast<double>(v) > hi->f : v > hi->i)) {
      return element(i, int_text(v), "is above the domain max " +
                                         (hi->is_float ? float_text(hi->f) : int_text(hi->i)));
    }
    if (last_row && (v < 0 || v > *last_row)) {
      return element(i, int_text(v), "indexes `" + *d.index_into + "` outside [0, " +
                                         int_text(*last_row) + "]");
    }
    if (monotone && i > 0 && v < int_at(b.dtype, p + (i - 1) * elem)) {
      return element(i, int_text(v), "is below element " + std::to_string(first + i - 1) +
                                         ", but the domain is monotone");
    }
  }
  return std::nullopt;
}

}  // namespace kernrt::rt
