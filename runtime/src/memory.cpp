// Memory plan sizes (see memory.hpp).
#include "memory.hpp"

#include <algorithm>

#include "kernrt/manifest/expr.hpp"
#include "kernrt/runtime.hpp"

namespace kernrt::rt {

uint64_t MemoryPlan::device_bytes() const {
  uint64_t total = 0;
  for (const auto& [n, b] : buffers) total += b;
  for (const auto& [n, b] : states) total += b;
  for (const auto& [op, s] : scratch) {
    for (const auto& [n, b] : s) total += b;
  }
  return total;
}

namespace {

uint64_t extent_at_max(const manifest::Expr& e, const std::map<std::string, uint64_t>& max) {
  std::string why;
  auto v = manifest::evaluate(e, manifest::lookup_in(max), &why);
  return v.value_or(0);
}

}  // namespace

Result<MemoryPlan> plan_memory(const manifest::Manifest& m, uint64_t token_capacity,
                               uint64_t seq_slots) {
  MemoryPlan plan;
  Errors errors;
  const auto max = manifest::vars_at_max(m);
  const auto lookup = manifest::lookup_in(max);

  // Page unit and line-table width, from domains that index into states.
  uint64_t page = 1;
  uint64_t widest_line_table = 0;
  bool have_line_table = false;
  for (const auto& [name, b] : m.buffers) {
    if (!b.domain || !b.domain->index_into) continue;
    auto st = m.states.find(*b.domain->index_into);
    if (st == m.states.end()) continue;
    if (st->second.bytes_per_token != 0) {
      page = std::max<uint64_t>(page, b.domain->stride.value_or(1));
    } else if (st->second.bytes_per_seq != 0 && b.shape.size() >= 2) {
      have_line_table = true;
      widest_line_table = std::max(widest_line_table, extent_at_max(b.shape[1], max));
    }
  }
  plan.page_tokens = page;

  const bool explicit_tokens = token_capacity != 0;
  uint64_t tokens = explicit_tokens ? token_capacity : kDefaultTokenCapacity;
  tokens = tokens / page * page;
  if (tokens == 0) {
    if (explicit_tokens) {
      return Result<MemoryPlan>::fail(Error{ErrorKind::Caller, "",
          "token capacity " + std::to_string(token_capacity) + " is below one page of " +
          std::to_string(page) + " tokens"});
    }
    tokens = page;
  }
  plan.token_capacity = tokens;

  if (seq_slots != 0) {
    plan.seq_slots = seq_slots;
  } else {
    uint64_t seqs = 1;
    if (have_line_table) {
      seqs = std::max<uint64_t>(widest_line_table, 1);
    } else if (auto it = m.vars.find("seqs"); it != m.vars.end()) {
      seqs = it->second.max;
    }
    plan.seq_slots = seqs + 2;  // slot 0 is never leased; one more pads a batched caller
  }

  for (const auto& [name, b] : m.buffers) {
    std::string why;
    auto bytes = manifest::byte_size(b.shape, b.dtype, lookup, &why);
    if (!bytes) {
      errors.push_back(Error{ErrorKind::Manifest, json_pointer_append("/buffers", name),
                             "size at var maxima: " + why});
      continue;
    }
    plan.buffers[name] = *bytes;
    if (b.kind == manifest::BufferKind::input) plan.staging[name] = *bytes;
  }

  for (const auto& [name, s] : m.states) {
    uint64_t bytes = 0;
    bool overflow = false;
    if (s.bytes != 0) {
      bytes = s.bytes;
    } else if (s.bytes_per_token != 0) {
      overflow = __builtin_mul_overflow(s.bytes_per_token, plan.token_capacity, &bytes);
    } else {
      overflow = __builtin_mul_overflow(s.bytes_per_seq, plan.seq_slots, &bytes);
    }
    if (overflow) {
      errors.push_back(Error{ErrorKind::Manifest, json_pointer_append("/states", name),
                             "state size overflows u64"});
      continue;
    }
    plan.states[name] = bytes;
  }

  for (const auto& [op_name, op] : m.ops) {
    if (!op.impl.scratch) continue;
    for (const auto& [name, sc] : *op.impl.scratch) {
      std::string why;
      auto bytes = manifest::byte_size(sc.shape, sc.dtype, lookup, &why);
      if (!bytes) {
        errors.push_back(Error{ErrorKind::Manifest,
            json_pointer_append(json_pointer_append(
                json_pointer_append(json_pointer_append("/ops", op_name), "impl"), "scratch"), name),
            "size at var maxima: " + why});
        continue;
      }
      plan.scratch[op_name][name] = *bytes;
    }
  }
  if (!errors.empty()) return Result<MemoryPlan>::fail(std::move(errors));
  return Result<MemoryPlan>::ok(std::move(plan));
}

std::optional<Error> check_write(const std::string& what, const std::string& name,
                                 const std::string& path, uint64_t capacity, uint32_t elem,
                                 size_t bytes, const void* data, uint64_t offset) {
  if (offset > capacity) {
    return Error{ErrorKind::Caller, path, "offset " + std::to_string(offset) +
                                              " is past the end of " + what + " `" + name + "` (" +
                                              std::to_string(capacity) + " bytes)"};
  }
  if (elem > 1 && offset % elem != 0) {
    return Error{ErrorKind::Caller, path, "offset " + std::to_string(offset) + " into " + what +
                                              " `" + name + "` is not on an element (" +
                                              std::to_string(elem) + " bytes each)"};
  }
  capacity -= offset;
  if (bytes > capacity) {
    return Error{ErrorKind::Caller, path, what + " `" + name + "` takes at most " +
                                              std::to_string(capacity) + " bytes, got " +
                                              std::to_string(bytes)};
  }
  if (elem > 1 && bytes % elem != 0) {
    return Error{ErrorKind::Caller, path, what + " `" + name + "` has " + std::to_string(elem) +
                                              "-byte elements: " + std::to_string(bytes) +
                                              " bytes is not a whole number of elements"};
  }
  if (bytes > 0 && data == nullptr) {
    return Error{ErrorKind::Caller, path, "null data for `" + name + "`"};
  }
  return std::nullopt;
}

}  // namespace kernrt::rt
