// The memory plan: how many bytes each allocation gets (pure; no driver).
//
// Owns the sizing rules of reference/kern-schema.md §3.1: buffers and op scratch at var
// maxima (scratch once per op, shared by every call of it); states by kind:
// `bytes` as declared, `bytes_per_token` x token capacity, `bytes_per_seq` x slots;
// pinned staging of the same size for every `input` buffer.
// Token capacity: LoadOptions::token_capacity or kDefaultTokenCapacity (65536), rounded
// down to the page unit = the largest `index_into` stride onto a per-token state.
// Slots: LoadOptions::seq_slots or seqs.max + 2, where seqs.max is the widest column axis
// (shape[1] at maxima) of any line table (a buffer whose domain indexes a per-sequence
// state); without line tables the max of a var named `seqs`, else 1.
// Does not allocate, and does not check the device has room (cuMemAlloc reports that).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

struct MemoryPlan {
  uint64_t token_capacity = 0;
  uint64_t page_tokens = 1;  // the page unit capacity was rounded to
  uint64_t seq_slots = 0;
  std::map<std::string, uint64_t> buffers;  // every buffer, bytes
  std::map<std::string, uint64_t> states;   // every state, bytes
  std::map<std::string, std::map<std::string, uint64_t>> scratch;  // op -> scratch -> bytes
  std::map<std::string, uint64_t> staging;  // input buffers: pinned host bytes

  uint64_t device_bytes() const;  // buffers + states + scratch
};

// Caller errors for an explicit token capacity below one page or zero slots;
// Manifest errors for sizes that overflow u64.
Result<MemoryPlan> plan_memory(const manifest::Manifest& m, uint64_t token_capacity,
                               uint64_t seq_slots);

// Size rules of a write of `bytes` at byte `offset` into `what` `name` (allocation
// `capacity`, elements of `elem` bytes): Caller errors at `path` for an offset past the end
// or not on an element, more bytes than are left ("input `q` takes at most 24576 bytes, got
// 24578"), a partial element, or null data.
std::optional<Error> check_write(const std::string& what, const std::string& name,
                                 const std::string& path, uint64_t capacity, uint32_t elem,
                                 size_t bytes, const void* data, uint64_t offset = 0);

}  // namespace kernrt::rt
