// Input contents against a buffer's declared `domain` (reference/kern-schema.md §1.5), as
// write_input checks them before anything is copied: every written element inside
// [min, max] (bounds evaluated at the vars' maxima), an `index_into` element a row of its
// target in [0, rows / stride - 1] (rows: a buffer's first extent at var maxima; a paged
// state's token capacity; a per-sequence or fixed state's bytes, counted in lines of
// `stride` bytes), and a `monotone` buffer non-decreasing. A Caller error at the buffer's
// pointer names the first element that fails, its value and the bound.
// Deliberately does not check: elements past the written prefix, or that the manifest's
// domain itself is consistent (the verifier's rule 6 did that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"
#include "memory.hpp"

namespace kernrt::rt {

// `data` holds `bytes` (a whole number of elements) of buffer `name` of manifest `m`, whose
// states were sized by `plan`, starting at element `first` of the buffer (messages count
// from there; `monotone` is checked within the elements given).
std::optional<Error> check_domain(const manifest::Manifest& m, const MemoryPlan& plan,
                                  const std::string& name, const void* data, size_t bytes,
                                  uint64_t first = 0);

}  // namespace kernrt::rt
