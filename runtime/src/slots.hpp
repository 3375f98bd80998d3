// Slots: what a lowered launch argument or pack field is once names are gone.
//
// Owns: the dense var order (manifest order, i.e. sorted names), expressions compiled
// against it (var names become indices), and `Value` = a load-time constant or a
// per-run expression. Evaluation is checked u64 arithmetic and never allocates, so it
// is safe on the replay path. Does not check var ranges (exec does, per run) nor
// expression well-formedness (the verifier proved it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

// Var name <-> dense index, plus the declared maxima.
struct VarTable {
  std::vector<std::string> names;  // dense order
  std::vector<uint64_t> max;
  std::map<std::string, uint32_t> index;

  static VarTable from(const manifest::Manifest& m);
  std::optional<uint32_t> find(const std::string& name) const;
  std::vector<uint64_t> at_max() const { return max; }
};

// Fills dense[i] for every var: the caller's value when the program reads it (it must be
// given and inside [1, max]), else 1 whatever was passed. Names the caller passes that
// the manifest does not declare are ignored. Caller errors at /vars/<name>:
// "var `x` not provided: program `p` reads it", "var `x` = 9 is outside declared [1, 8]".
std::optional<Error> dense_vars(const VarTable& table, const std::vector<bool>& reads,
                                const std::string& program,
                                const std::map<std::string, uint64_t>& vars, uint64_t* dense);

// A compiled expression: postfix nodes over dense var indices.
class CompiledExpr {
 public:
  // nullopt with `error` when a var is not declared.
  static std::optional<CompiledExpr> compile(const manifest::Expr& e, const VarTable& vars,
                                             std::string* error);
  static CompiledExpr constant(uint64_t v);

  // False on overflow or division by zero (cannot happen for values within the
  // declared maxima of a verified manifest, whose expressions are monotone).
  bool eval(const uint64_t* dense, uint64_t* out) const;
  bool is_constant() const;
  // Marks every var index this expression reads.
  void mark_reads(std::vector<bool>* reads) const;

 private:
  struct Node {
    enum class Op : uint8_t { Const, Var, CeilDiv, Mul } op = Op::Const;
    uint64_t value = 0;  // Const: the value; Var: the dense index; CeilDiv/Mul: constant c
  };
  std::vector<Node> nodes_;  // postfix; evaluated with a fixed-depth stack
};

// A scalar as a launch sees it: fixed at load, or evaluated per run.
struct Value {
  bool dynamic = false;
  uint64_t constant = 0;
  CompiledExpr expr;

  static Value fixed(uint64_t v) { Value x; x.constant = v; return x; }
  static Value of(CompiledExpr e);
  bool eval(const uint64_t* dense, uint64_t* out) const {
    if (!dynamic) { *out = constant; return true; }
    return expr.eval(dense, out);
  }
};

// Bits of a literal as the kernel reads them: i32 as u32 bits, f32 as its IEEE bits,
// i64 / u8 as-is, zero-extended to 64 bits.
uint64_t literal_bits(const manifest::LitI32& v);
uint64_t literal_bits(const manifest::LitI64& v);
uint64_t literal_bits(const manifest::LitF32& v);
uint64_t literal_bits(const manifest::LitU8& v);

}  // namespace kernrt::rt

namespace kernrt::rt {

// A device region: an allocation, or a view into one after a call's byte offset.
struct Region {
  uint64_t address = 0;
  uint64_t bytes = 0;  // bytes from `address` to the end of the allocation
};

// One interface param of one call after lowering: a pointer (buffer/state + offset) or
// a scalar (literal or var/expr). `what` names it for messages ("`kv` + 262144").
struct Slot {
  bool pointer = false;
  Region region;  // pointer only
  Value value;    // pointer: fixed(address); scalar: literal bits or expression
  std::string what;
  // Pointer into a buffer or state: its index in LoweredManifest::bindable and the byte
  // offset, so a call may bind the caller's memory in its place (Relocation).
  int32_t buffer = -1;
  uint64_t offset = 0;
};

// Where a buffer's address was written into a launch's parameters, so that a call that
// binds the caller's memory to that buffer can rewrite it: a pointer slot (pack = false,
// `at` is the launch arg index), a pack field (`at`/`width` in the pack image) or a
// tensormap's global address (tensormap = true, the 128-byte descriptor at `at`).
struct Relocation {
  uint32_t at = 0;
  uint32_t width = 8;
  int32_t buffer = -1;
  uint64_t offset = 0;
  bool tensormap = false;
};

}  // namespace kernrt::rt
