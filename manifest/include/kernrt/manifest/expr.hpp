// Evaluation of manifest expressions (§1.15) with checked u64 arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

// Returns the value, or nullopt with `error` set: "unknown var `v`", "division by zero",
// "overflows u64". `lookup` returns nullopt for an unknown var.
using VarLookup = std::function<std::optional<uint64_t>(const std::string&)>;
std::optional<uint64_t> evaluate(const Expr& e, const VarLookup& lookup, std::string* error);

// Var assignments at the declared bounds: every var at its max, or every var at 1.
std::map<std::string, uint64_t> vars_at_max(const Manifest& m);
std::map<std::string, uint64_t> vars_at_min(const Manifest& m);
VarLookup lookup_in(const std::map<std::string, uint64_t>& values);

// Every var name an expression mentions (for "var is never used" and dependency masks).
void collect_vars(const Expr& e, std::vector<std::string>* out);

// The vars whose values a run of `program` needs, as the runtime evaluates them per run:
// the call args `{"var"}` / `{"expr"}` and, in every op the program calls, each launch's
// grid, shared_mem and pack `var` / `expr` fields. Buffer shapes are not among them
// (they are sized at the vars' maxima). Empty for an unknown program.
std::set<std::string> vars_read_by(const Manifest& m, const std::string& program);

// The expression in its wire form, for messages: `{"mul": [{"ceil_div": ["tokens", 4]}, 64]}`.
// Var names are shortened (kShownNameBytes); a nesting deeper than about 300 bytes of
// operators is cut with "…", so the text stays under about 1 KiB.
std::string expr_text(const Expr& e);

// Product of extents times the element size; nullopt on overflow or unknown var.
std::optional<uint64_t> byte_size(const std::vector<Expr>& shape, DType dtype,
                                  const VarLookup& lookup, std::string* error);

}  // namespace kernrt::manifest
