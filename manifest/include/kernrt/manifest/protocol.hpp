// The serving protocol (§2.3): a pure second pass over a verified manifest that derives
// the axes, fills, tables and forwards from `fill` / `batch` / `once` declarations.
// A manifest that does not fit is still valid; the CLI reports the misfit, exit 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/verify.hpp"

namespace kernrt::manifest {

struct AxisVar {
  std::string name;
  uint64_t max = 0;
};

struct FillInfo {
  std::string buffer;
  Fill role = Fill::token;
  DType dtype = DType::i32;
  std::string axis;  // var name, or "" for a constant shape
  uint64_t width = 1;
};

struct Forward {
  std::string program;
  uint64_t groups = 0;
  std::string rows;        // var name when rows is a var, else ""
  uint64_t rows_const = 0; // constant rows
  std::optional<std::string> span;
  std::optional<std::string> tokens;  // the `tokens` output it writes, if any
};

struct Protocol {
  AxisVar rows;
  AxisVar groups;
  std::optional<AxisVar> tray;
  std::optional<AxisVar> span;
  std::vector<FillInfo> fills;
  std::vector<std::string> page_tables;
  std::vector<std::string> line_tables;
  std::vector<Forward> forwards;
  std::vector<std::string> once;
};

// Misfits are returned as errors with kind Manifest (messages as kern words them, e.g.
// "no input has fill `slot`"): the first `max_errors`, the rest counted in
// Result::omitted. Names in messages and pointers are shortened (kShownNameBytes), and
// the cost is linear in buffers + calls + programs.
Result<Protocol> check_protocol(const Verified& v, size_t max_errors = 100);

}  // namespace kernrt::manifest
