// Internal to the verifier: the state one verification pass carries between the rule
// files (verify_decls.cpp rules 1-9, verify_ops.cpp rules 10-18 with verify_tensormaps.cpp
// for rule 17, verify_programs.cpp rules 19-24) and the few helpers they share (pointer
// building, expression checks, shape sizing, topology group lookup).
//
// Messages follow kern's wording without kern's context prefix (``op `o` launch #0:``):
// the RFC 6901 pointer of each error already names the element. The context does not
// decide what a rule means; it only records what the rules found and used.
//
// Cost on hostile input: every name that goes into a pointer or a message goes through
// ptr() / tick(), which shorten it to kShownNameBytes, so building a path never copies a
// 1 MiB op name; fail() keeps the first max_errors errors and counts the rest. A pointer
// whose name was shortened is for reading, not for resolving.
#pragma once

#include <cstdint>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/expr.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest::rules {

// Device limits the launch rule checks (rule 13), at the var bounds.
constexpr uint64_t kMaxGridX = (uint64_t{1} << 31) - 1;
constexpr uint64_t kMaxGridYZ = 65535;
constexpr uint64_t kMaxBlockThreads = 1024;
constexpr uint32_t kMaxBlockZ = 64;
constexpr uint64_t kMaxDynSharedMem = 232448;  // 227 KiB opt-in on sm90 / sm100
constexpr uint64_t kMaxClusterBlocks = 16;     // non-portable cluster maximum on sm90+
// cuTensorMapEncodeTiled: every globalDim <= 2^32, every globalStride < 2^40 bytes.
constexpr uint64_t kMaxTmaDim = uint64_t{1} << 32;
constexpr uint64_t kMaxTmaStride = uint64_t{1} << 40;

// The largest footprint of the tensormaps over one interface param of an op, checked
// against the bound buffer at every call of the op (rule 21). One per param, so a call
// costs O(1) per argument however many descriptors an op declares. Spanning descriptors
// (outermost dim 0) record their inner footprint and outermost stride: the runtime
// computes their extent from the buffer at load, which the verifier can do for buffers.
struct TensorMapUse {
  uint64_t footprint = 0;
  std::string path;  // the pack field's pointer
  bool any = false;
};
struct TensorMapBounds {
  TensorMapUse full;      // non-spanning: last element's end
  TensorMapUse inner;     // spanning: footprint without the outermost dim
  uint64_t min_stride = 0;  // spanning: the smallest outermost stride (largest extent)
  std::string stride_path;
  // The base alignment TMA needs (16 bytes; 32 for packed u4) and a descriptor needing
  // it: allocations are 256-byte aligned, so a call offset decides the base's alignment.
  uint32_t align = 0;
  std::string align_path;
};

struct VerifyContext {
  // What is being verified. In fragment mode there are no buffers, states, programs or
  // topology; `topology` is then null and rank groups are not checked.
  const std::map<std::string, Var>* vars = nullptr;
  const std::optional<Topology>* topology = nullptr;
  const std::map<std::string, Module>* modules = nullptr;
  const std::map<std::string, Op>* ops = nullptr;

  std::map<std::string, uint64_t> env_max;  // every var at its max
  std::map<std::string, uint64_t> env_min;  // every var at 1
  VarLookup at_max;
  VarLookup at_min;

  Errors errors;
  std::set<std::string> used_vars;
  std::set<std::string> used_groups;
  std::set<std::string> used_modules;
  std::map<std::string, uint64_t> buffer_sizes;  // bytes at var maxima (rule 5)
  // Per op, per interface param index: the tensormaps over that param (rule 21).
  std::map<std::string, std::vector<TensorMapBounds>> op_tensormaps;

  std::size_t max_errors = SIZE_MAX;
  uint64_t omitted = 0;  // violations past max_errors

  VerifyContext(const std::map<std::string, Var>& declared_vars,
                const std::optional<Topology>* topo);
  // at_max / at_min point into env_max / env_min: the context stays where it was built.
  VerifyContext(const VerifyContext&) = delete;
  VerifyContext& operator=(const VerifyContext&) = delete;

  void fail(const std::string& path, std::string message);

  // The size of a topology group, marking it used; reports an unknown group or a missing
  // topology at `path`. Always nullopt (and silent) in fragment mode.
  std::optional<uint64_t> group(const std::string& name, const std::string& path);

  // Reports unknown vars and zero constant operands; marks vars used. True when clean.
  bool check_expr(const Expr& e, const std::string& path);

  // Evaluates at the var maxima / minima; nullopt (no error) when it cannot.
  std::optional<uint64_t> eval_max(const Expr& e) const;
  std::optional<uint64_t> eval_min(const Expr& e) const;

  // Evaluates an expression that check_expr accepted at the var maxima; an overflow is
  // reported at `path` as "`what`: <expression> overflows u64 at var upper bounds (v = max,
  // ...)" and gives nullopt.
  std::optional<uint64_t> eval_max_checked(const Expr& e, const std::string& path,
                                           const std::string& what);
  // " (tokens = 64, seqs = 8)": the maxima of the vars an expression names, for messages.
  std::string vars_at_max_text(const Expr& e) const;

  // Byte size of a shape at the var maxima (rule 5), reporting empty shapes, zero or
  // unknown extents and overflow under `path` (the shape's pointer).
  std::optional<uint64_t> shaped_size(DType dtype, const std::vector<Expr>& shape,
                                      const std::string& path);
};

// "/a" + "b" -> "/a/b", escaping per RFC 6901; a token longer than kShownNameBytes is
// shortened (see the header comment).
inline std::string ptr(const std::string& base, const std::string& token) {
  if (token.size() <= kShownNameBytes) return json_pointer_append(base, token);
  return json_pointer_append(base, shortened(token));
}
inline std::string ptr(const std::string& base, uint64_t index) {
  return json_pointer_append(base, index);
}
inline bool writes(Direction d) { return d == Direction::out || d == Direction::inout; }
inline bool reads(Direction d) { return d == Direction::in || d == Direction::inout; }
inline std::string tick(const std::string& name) { return "`" + shortened(name) + "`"; }

// Whether `v` fits a scalar param of kind `k` (i32, i64, u8); f32 never takes a var.
bool scalar_fits(ParamType::Kind k, uint64_t v);
const char* scalar_name(ParamType::Kind k);

// The largest value a var/expr pack field of `width` bytes (1-8) holds: like the scalar
// params, 1 byte is unsigned (u8, 255) and wider fields are signed (i32 2^31-1, i64
// 2^63-1); "u8", "i32", "i64" or "i16"/"i24"/... names the range.
uint64_t field_max(uint32_t width);
std::string field_range(uint32_t width);

// Rules 1-9 over a whole manifest (rule 9 alone is check_modules).
void check_decls(VerifyContext& c, const Manifest& m);
void check_modules(VerifyContext& c);
// Rules 10-18 over c.ops.
void check_ops(VerifyContext& c);
// Rule 17 for one tensormap field at `tp` (every violation), and recording its footprint,
// spanning bounds and base alignment for rule 21 (`fp` = the field's pointer).
void check_tensormap(VerifyContext& c, const TensorMap& t, const std::string& tp);
void record_footprint(VerifyContext& c, const std::string& oname, const Op& op,
                      const TensorMap& t, const std::string& fp, const std::string& tp);
// Rules 19-24.
void check_programs(VerifyContext& c, const Manifest& m);
// The "module `m` is never launched" part of rule 24 (fragments check it too).
void check_unused_modules(VerifyContext& c);

}  // namespace kernrt::manifest::rules
