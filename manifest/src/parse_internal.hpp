// Internal: the typed parsers shared by parse.cpp, parse_ops.cpp, parse_programs.cpp and
// normalize.cpp. Each takes a Node (value + pointer + constants) and throws ParseFailure
// on the first problem. They check the wire format only, never a verifier rule.
#pragma once

#include <string>
#include <vector>

#include "json_reader.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest::detail {

// §1.15: u64 | var name | {"ceil_div": [E, c]} | {"mul": [E, c]}.
Expr parse_expr(const Node& n);
// A shape extent: u64 or var name (a name of a constant becomes its number).
Expr parse_extent(const Node& n);
std::vector<Expr> parse_shape(const Node& n);
DType parse_dtype_at(const Node& n);
std::vector<ParamType> parse_params(const Node& n);

Op parse_op(const Node& n);
Program parse_program(const Node& n);
Call parse_call(const Node& n);

// Whole documents; `root` must already be read strictly (read_json).
Manifest parse_manifest_json(const Json& root);
Fragment parse_fragment_json(const Json& root);

// The one form key of an untagged union object, or a "no form matches" error that
// names the keys found and the forms expected.
std::string pick_form(const Node& n, std::initializer_list<const char*> forms, const char* what,
                      const char* expected);

}  // namespace kernrt::manifest::detail
