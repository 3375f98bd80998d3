// The typed model of a kern schema-v4 manifest (reference/kern-schema.md §1).
//
// This is the contract between the parser, the verifier, the writer and the runtime.
// It holds exactly what the wire format says, names included, in sorted maps (so
// iteration order is the canonical order and output is deterministic). Optional
// wire fields that have a default are std::optional so the writer can leave out what the
// author left out and a round trip is stable. Nothing here is checked: a Manifest may
// violate every verifier rule; only `Verified` (verify.hpp) is known to be good.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kernrt::manifest {

// ---- dtypes -------------------------------------------------------------------------

enum class DType { bf16, f16, f32, i32, u32, i64, u64, fp8e4m3, u8 };
// TMA element types form their own set (§1.8); u4 counts nibbles.
enum class TmaDType { u8, u16, u32, i32, u64, i64, f16, bf16, f32, u4 };

uint32_t dtype_size(DType t);             // bytes per element
bool dtype_is_float(DType t);             // bf16, f16, f32, fp8e4m3
const char* to_string(DType t);
std::optional<DType> parse_dtype(const std::string& s);
uint32_t tma_dtype_bits(TmaDType t);      // 4 for u4, else 8 * size
const char* to_string(TmaDType t);
std::optional<TmaDType> parse_tma_dtype(const std::string& s);

// ---- expressions (§1.15) ------------------------------------------------------------

// constant | var | {"ceil_div": [E, c]} | {"mul": [E, c]}. `c` is a constant > 0 on the
// wire; the verifier checks c > 0, the evaluator uses checked u64 arithmetic.
struct Expr {
  enum class Kind { Const, Var, CeilDiv, Mul };
  Kind kind = Kind::Const;
  uint64_t value = 0;               // Const: the value; CeilDiv/Mul: the constant operand
  std::string var;                  // Var: the name
  std::shared_ptr<const Expr> lhs;  // CeilDiv/Mul: the expression operand

  static Expr constant(uint64_t v);
  static Expr variable(std::string name);
  static Expr ceil_div(Expr e, uint64_t c);
  static Expr mul(Expr e, uint64_t c);
};
bool operator==(const Expr& a, const Expr& b);

// ---- vars, states, topology -----------------------------------------------------------

struct Var {
  uint64_t max = 0;
};

struct State {
  uint64_t bytes_per_token = 0;
  uint64_t bytes = 0;
  uint64_t bytes_per_seq = 0;
};

struct Topology {
  std::map<std::string, uint64_t> groups;
};

// ---- buffers ----------------------------------------------------------------------------

enum class BufferKind { input, output, weight, workspace, carry, peer };
const char* to_string(BufferKind k);

enum class Fill {
  // inputs
  token, position, slot, seq_len, cu_seqlens, span_at, blocks,
  // outputs
  tokens, count, error,
};
const char* to_string(Fill f);
bool fill_is_input(Fill f);

// A domain bound: an integer (may be negative), a float, or an expression.
struct Bound {
  enum class Kind { Int, Float, Expr };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0.0;
  manifest::Expr expr;
};

struct Domain {
  std::optional<Bound> min;
  std::optional<Bound> max;
  std::optional<std::string> index_into;
  std::optional<uint64_t> stride;
  std::optional<bool> monotone;
};

struct Buffer {
  DType dtype = DType::u8;
  std::vector<Expr> shape;  // Const or Var only
  BufferKind kind = BufferKind::workspace;
  std::optional<Fill> fill;
  std::optional<Domain> domain;
  std::optional<bool> export_;  // wire key "export"
  std::optional<std::string> of;
  std::optional<std::string> group;
};

// ---- modules ------------------------------------------------------------------------------

struct Module {
  std::string source;  // a label: a file name or hf:<org>/<repo>/<path>[@rev]
  std::string sha256;  // the identity, 64 hex chars
};

// ---- param types (§1.9) -------------------------------------------------------------------

enum class Direction { in, out, inout };

struct ParamType {
  enum class Kind { I32, I64, F32, U8, Bytes, Buffer, State };
  Kind kind = Kind::I32;
  Direction dir = Direction::in;  // Buffer / State only
  DType dtype = DType::u8;        // Buffer only
  uint32_t bytes = 0;             // Bytes only: the n of bytes<n>

  bool is_pointer() const { return kind == Kind::Buffer || kind == Kind::State; }
  bool is_scalar() const;
  uint32_t size_bytes() const;  // ABI slot size: pointer 8, bytes<n> n, i64 8, u8 1, else 4
  std::string to_string() const;  // canonical spelling, e.g. "in buffer<bf16>", "bytes<1280>"
};
bool operator==(const ParamType& a, const ParamType& b);
// Parses a param type string; on failure returns nullopt and sets `error` to kern's
// message ("invalid param type `s`", "unknown dtype `x` in param type `s`", ...).
std::optional<ParamType> parse_param_type(const std::string& s, std::string* error);

// ---- tensormaps and packs (§1.12, §1.13) --------------------------------------------------

struct TensorMap {
  uint32_t param = 0;  // interface param index
  TmaDType dtype = TmaDType::u8;
  std::vector<uint64_t> dims;     // innermost first; dims.back() == 0 spans the allocation
  std::vector<uint64_t> strides;  // bytes, for dims[1..]
  std::vector<uint32_t> box;
  std::optional<uint32_t> swizzle;       // 0, 32, 64, 128
  std::optional<uint32_t> l2_promotion;  // 0, 64, 128, 256
  std::optional<bool> oob_nan;
};

// Literal scalars, used by launch args, pack fields and call args.
struct LitI32 { int32_t v = 0; };
struct LitI64 { int64_t v = 0; };
struct LitF32 { double v = 0.0; };  // kept as parsed; converted to f32 bits at lowering
struct LitU8 { uint8_t v = 0; };

struct ParamRef { uint32_t index = 0; };
struct ScratchRef { std::string name; };
struct VarRef { std::string name; };
struct RankRef { std::string group; };

struct PackField {
  uint32_t at = 0;
  std::optional<uint32_t> width;
  using Source = std::variant<ParamRef, ScratchRef, LitI32, LitI64, LitF32, LitU8, VarRef,
                              Expr, RankRef, TensorMap>;
  Source source;
};

struct Pack {
  uint32_t size = 0;
  std::vector<PackField> fields;
};

// ---- ops (§1.10, §1.11) ---------------------------------------------------------------------

using LaunchArg =
    std::variant<ParamRef, ScratchRef, LitI32, LitI64, LitF32, LitU8, RankRef, Pack>;

struct Launch {
  bool is_extern = false;           // entry starts with "extern:" and there is no module
  std::optional<std::string> module;
  std::string entry;
  std::optional<std::vector<ParamType>> params;  // default: the op's params
  // Kernel launches only (absent for externs):
  std::array<uint32_t, 3> block{};
  std::array<Expr, 3> grid{};
  std::optional<Expr> shared_mem;
  std::optional<std::array<uint32_t, 3>> cluster;
  std::optional<bool> pdl;
  std::optional<std::vector<LaunchArg>> args;  // default: forward params in order
};

struct Scratch {
  DType dtype = DType::u8;
  std::vector<Expr> shape;
};

struct Impl {
  std::optional<std::map<std::string, Scratch>> scratch;
  std::vector<Launch> launches;
};

struct Op {
  std::vector<ParamType> params;
  Impl impl;
};

// ---- programs (§1.14) ------------------------------------------------------------------------

struct BufArg { std::string name; std::optional<uint64_t> offset; };
struct StateArg { std::string name; std::optional<uint64_t> offset; };

using CallArg =
    std::variant<BufArg, StateArg, VarRef, Expr, LitI32, LitI64, LitF32, LitU8, RankRef>;

struct Call {
  std::optional<std::string> label;
  std::string op;
  std::vector<CallArg> args;
};

struct Batch {
  uint64_t groups = 0;
  Expr rows;  // Const (exact rows per group) or Var
  std::optional<std::string> span;
};

struct Program {
  std::optional<Batch> batch;
  std::optional<bool> once;
  std::vector<Call> calls;
};

// ---- the manifest -----------------------------------------------------------------------------

struct Manifest {
  uint64_t schema_version = 0;  // the verifier requires 4
  std::string model;
  std::optional<Topology> topology;
  std::map<std::string, Var> vars;
  std::map<std::string, State> states;
  std::map<std::string, Buffer> buffers;
  std::map<std::string, Module> modules;
  std::map<std::string, Op> ops;
  std::map<std::string, Program> programs;
};

// A merge fragment: `modules` + `ops` only (the seed's decode-ops.json).
struct Fragment {
  std::map<std::string, Module> modules;
  std::map<std::string, Op> ops;
};

}  // namespace kernrt::manifest
