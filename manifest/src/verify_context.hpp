// Internal to the verifier: the state one verification pass carries between the rule
// files (verify_decls.cpp rules 1-9, verify_ops.cpp rules 10-18, verify_programs.cpp
// rules 19-24) and the few helpers they share (pointer building, expression checks,
// shape sizing, topology group lookup).
//
// Messages follow kern's wording without kern's context prefix (``op `o` launch #0:``):
// the RFC 6901 pointer of each error already names the element. The context does not
// decide what a rule means; it only records what the rules found and used.
#pragma once

#include <cstdint>
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

// One tensormap pack field whose footprint is known: checked against the bound buffer
// at every call of its op (rule 21).
struct TensorMapUse {
  uint32_t param = 0;
  uint64_t footprint = 0;
  std::string path;  // the pack field's pointer
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
  std::map<std::string, std::vector<std::vector<TensorMapUse>>> op_tensormaps;

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

  // Byte size of a shape at the var maxima (rule 5), reporting empty shapes, zero or
  // unknown extents and overflow under `path` (the shape's pointer).
  std::optional<uint64_t> shaped_size(DType dtype, const std::vector<Expr>& shape,
                                      const std::string& path);
};

// "/a" + "b" -> "/a/b", escaping per RFC 6901.
inline std::string ptr(const std::string& base, const std::string& token) {
  return json_pointer_append(base, token);
}
inline std::string ptr(const std::string& base, uint64_t index) {
  return json_pointer_append(base, index);
}
inline bool writes(Direction d) { return d == Direction::out || d == Direction::inout; }
inline bool reads(Direction d) { return d == Direction::in || d == Direction::inout; }
inline std::string tick(const std::string& name) { return "`" + name + "`"; }

// Whether `v` fits a scalar param of kind `k` (i32, i64, u8); f32 never takes a var.
bool scalar_fits(ParamType::Kind k, uint64_t v);
const char* scalar_name(ParamType::Kind k);

// Rules 1-9 over a whole manifest (rule 9 alone is check_modules).
void check_decls(VerifyContext& c, const Manifest& m);
void check_modules(VerifyContext& c);
// Rules 10-18 over c.ops.
void check_ops(VerifyContext& c);
// Rules 19-24.
void check_programs(VerifyContext& c, const Manifest& m);
// The "module `m` is never launched" part of rule 24 (fragments check it too).
void check_unused_modules(VerifyContext& c);

}  // namespace kernrt::manifest::rules
