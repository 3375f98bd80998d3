// Small pure functions of the typed model: dtype tables, enum spellings, expression
// constructors, and the param type grammar of §1.9 with kern's error texts. Nothing
// here checks a verifier rule (e.g. `bytes<n>` in an interface is the verifier's).
#include "kernrt/manifest/types.hpp"

#include <cctype>

namespace kernrt::manifest {

namespace {

struct DTypeRow {
  DType t;
  const char* name;
  uint32_t size;
  bool is_float;
};
constexpr DTypeRow kDTypes[] = {
    {DType::bf16, "bf16", 2, true},   {DType::f16, "f16", 2, true},
    {DType::f32, "f32", 4, true},     {DType::i32, "i32", 4, false},
    {DType::u32, "u32", 4, false},    {DType::i64, "i64", 8, false},
    {DType::u64, "u64", 8, false},    {DType::fp8e4m3, "fp8e4m3", 1, true},
    {DType::u8, "u8", 1, false},
};

struct TmaRow {
  TmaDType t;
  const char* name;
  uint32_t bits;
};
constexpr TmaRow kTmaDTypes[] = {
    {TmaDType::u8, "u8", 8},     {TmaDType::u16, "u16", 16},   {TmaDType::u32, "u32", 32},
    {TmaDType::i32, "i32", 32},  {TmaDType::u64, "u64", 64},   {TmaDType::i64, "i64", 64},
    {TmaDType::f16, "f16", 16},  {TmaDType::bf16, "bf16", 16}, {TmaDType::f32, "f32", 32},
    {TmaDType::u4, "u4", 4},
};

std::string trim(const std::string& s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool strip(const std::string& s, const char* prefix, const char* suffix, std::string* inner) {
  std::string p(prefix);
  std::string q(suffix);
  if (s.size() < p.size() + q.size()) return false;
  if (s.compare(0, p.size(), p) != 0) return false;
  if (s.compare(s.size() - q.size(), q.size(), q) != 0) return false;
  *inner = s.substr(p.size(), s.size() - p.size() - q.size());
  return true;
}

}  // namespace

uint32_t dtype_size(DType t) {
  for (const auto& r : kDTypes) {
    if (r.t == t) return r.size;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  for (const auto& r : kDTypes) {
    if (r.t == t) return r.is_float;
  }
  return false;
}

const char* to_string(DType t) {
  for (const auto& r : kDTypes) {
    if (r.t == t) return r.name;
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& s) {
  for (const auto& r : kDTypes) {
    if (s == r.name) return r.t;
  }
  return std::nullopt;
}

uint32_t tma_dtype_bits(TmaDType t) {
  for (const auto& r : kTmaDTypes) {
    if (r.t == t) return r.bits;
  }
  return 0;
}

const char* to_string(TmaDType t) {
  for (const auto& r : kTmaDTypes) {
    if (r.t == t) return r.name;
  }
  return "?";
}

std::optional<TmaDType> parse_tma_dtype(const std::string& s) {
  for (const auto& r : kTmaDTypes) {
    if (s == r.name) return r.t;
  }
  return std::nullopt;
}

Expr Expr::constant(uint64_t v) {
  Expr e;
  e.kind = Kind::Const;
  e.value = v;
  return e;
}

Expr Expr::variable(std::string name) {
  Expr e;
  e.kind = Kind::Var;
  e.var = std::move(name);
  return e;
}

Expr Expr::ceil_div(Expr inner, uint64_t c) {
  Expr e;
  e.kind = Kind::CeilDiv;
  e.value = c;
  e.lhs = std::make_shared<const Expr>(std::move(inner));
  return e;
}

Expr Expr::mul(Expr inner, uint64_t c) {
  Expr e;
  e.kind = Kind::Mul;
  e.value = c;
  e.lhs = std::make_shared<const Expr>(std::move(inner));
  return e;
}

bool operator==(const Expr& a, const Expr& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Expr::Kind::Const: return a.value == b.value;
    case Expr::Kind::Var: return a.var == b.var;
    case Expr::Kind::CeilDiv:
    case Expr::Kind::Mul:
      if (a.value != b.value) return false;
      if (!a.lhs || !b.lhs) return a.lhs == b.lhs;
      return *a.lhs == *b.lhs;
  }
  return false;
}

const char* to_string(BufferKind k) {
  switch (k) {
    case BufferKind::input: return "input";
    case BufferKind::output: return "output";
    case BufferKind::weight: return "weight";
    case BufferKind::workspace: return "workspace";
    case BufferKind::carry: return "carry";
    case BufferKind::peer: return "peer";
  }
  return "?";
}

const char* to_string(Fill f) {
  switch (f) {
    case Fill::token: return "token";
    case Fill::position: return "position";
    case Fill::slot: return "slot";
    case Fill::seq_len: return "seq_len";
    case Fill::cu_seqlens: return "cu_seqlens";
    case Fill::span_at: return "span_at";
    case Fill::blocks: return "blocks";
    case Fill::tokens: return "tokens";
    case Fill::count: return "count";
    case Fill::error: return "error";
  }
  return "?";
}

bool fill_is_input(Fill f) {
  switch (f) {
    case Fill::tokens:
    case Fill::count:
    case Fill::error: return false;
    default: return true;
  }
}

bool ParamType::is_scalar() const {
  return kind == Kind::I32 || kind == Kind::I64 || kind == Kind::F32 || kind == Kind::U8;
}

uint32_t ParamType::size_bytes() const {
  switch (kind) {
    case Kind::Buffer:
    case Kind::State:
    case Kind::I64: return 8;
    case Kind::Bytes: return bytes;
    case Kind::U8: return 1;
    case Kind::I32:
    case Kind::F32: return 4;
  }
  return 4;
}

namespace {
const char* dir_name(Direction d) {
  switch (d) {
    case Direction::in: return "in";
    case Direction::out: return "out";
    case Direction::inout: return "inout";
  }
  return "?";
}
}  // namespace

std::string ParamType::to_string() const {
  switch (kind) {
    case Kind::I32: return "i32";
    case Kind::I64: return "i64";
    case Kind::F32: return "f32";
    case Kind::U8: return "u8";
    case Kind::Bytes: return "bytes<" + std::to_string(bytes) + ">";
    case Kind::Buffer:
      return std::string(dir_name(dir)) + " buffer<" + manifest::to_string(dtype) + ">";
    case Kind::State: return std::string(dir_name(dir)) + " state";
  }
  return "?";
}

bool operator==(const ParamType& a, const ParamType& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case ParamType::Kind::Buffer: return a.dir == b.dir && a.dtype == b.dtype;
    case ParamType::Kind::State: return a.dir == b.dir;
    case ParamType::Kind::Bytes: return a.bytes == b.bytes;
    default: return true;
  }
}

std::optional<ParamType> parse_param_type(const std::string& raw, std::string* error) {
  std::string s = trim(raw);
  auto failed = [&](std::string msg) -> std::optional<ParamType> {
    if (error) *error = std::move(msg);
    return std::nullopt;
  };
  ParamType p;
  if (s == "i32" || s == "i64" || s == "f32" || s == "u8") {
    p.kind = s == "i32" ? ParamType::Kind::I32
             : s == "i64" ? ParamType::Kind::I64
             : s == "f32" ? ParamType::Kind::F32
                          : ParamType::Kind::U8;
    return p;
  }
  std::string inner;
  if (strip(s, "bytes<", ">", &inner)) {
    bool digits = !inner.empty() && inner.size() <= 10;
    for (char c : inner) digits = digits && c >= '0' && c <= '9';
    uint64_t n = digits ? std::stoull(inner) : 0;
    if (n == 0 || n > 0xFFFFFFFFull) return failed("invalid byte count in param type `" + s + "`");
    p.kind = ParamType::Kind::Bytes;
    p.bytes = static_cast<uint32_t>(n);
    return p;
  }
  std::size_t space = s.find(' ');
  if (space == std::string::npos) return failed("invalid param type `" + s + "`");
  std::string dir = s.substr(0, space);
  if (dir == "in") {
    p.dir = Direction::in;
  } else if (dir == "out") {
    p.dir = Direction::out;
  } else if (dir == "inout") {
    p.dir = Direction::inout;
  } else {
    return failed("invalid direction `" + dir + "` in param type `" + s + "`");
  }
  std::string rest = trim(s.substr(space + 1));
  if (rest == "state") {
    p.kind = ParamType::Kind::State;
    return p;
  }
  if (strip(rest, "buffer<", ">", &inner)) {
    std::optional<DType> dt = parse_dtype(inner);
    if (!dt) return failed("unknown dtype `" + inner + "` in param type `" + s + "`");
    p.kind = ParamType::Kind::Buffer;
    p.dtype = *dt;
    return p;
  }
  return failed("invalid param type `" + s + "`");
}

}  // namespace kernrt::manifest
