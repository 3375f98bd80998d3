// Pack images (reference/kern-schema.md §1.12, §3.3): a `bytes<n>` launch param built
// from fields.
//
// Owns: turning a manifest pack into a PackPlan at load (pointers, literals and encoded
// tensormaps written once into a base image; var/expr fields kept as compiled values),
// and writing the image per run (copy the base, then the low `width` bytes of each
// dynamic value, little-endian). Bytes no field covers stay zero. Writing never
// allocates. Does not check field overlap (the verifier did); does re-check that every
// field lies inside the image, so a bad plan can never write out of bounds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"
#include "ranks.hpp"
#include "slots.hpp"
#include "tensormap.hpp"

namespace kernrt::rt {

struct PackPlan {
  struct Dynamic {
    uint32_t at = 0;
    uint32_t width = 4;
    Value value;
  };
  uint32_t size = 0;
  std::vector<uint8_t> base;      // size bytes: constants and descriptors, zeros elsewhere
  std::vector<Dynamic> dynamic;   // recomputed per run
  std::vector<TensorMapSpec> maps;  // what was encoded (kept for diagnostics and tests)
  std::vector<Relocation> relocations;  // buffer addresses in the image (bound calls)

  // Writes the image for this run into `image` (size bytes). False if an expression
  // fails to evaluate (overflow), which a verified manifest within its maxima cannot do.
  bool write(const uint64_t* dense, uint8_t* image) const;
  void mark_reads(std::vector<bool>* reads) const;
};

// What a pack's fields can refer to, for one launch of one call.
struct PackContext {
  const std::vector<Slot>* interface = nullptr;  // the call's lowered interface params
  const std::vector<manifest::ParamType>* interface_types = nullptr;
  const std::map<std::string, Region>* scratch = nullptr;  // the op's scratch
  const VarTable* vars = nullptr;
  TensorMapEncoder* encoder = nullptr;
  const Ranks* ranks = nullptr;  // this process's index per topology group, for rank fields
  std::string path;  // pointer to the pack object, e.g. /ops/o/impl/launches/0/args/0/pack
  std::string call;  // the call, e.g. /programs/decode/calls/0, for messages
};

// Every field's problem, each at /.../pack/fields/<i>.
Result<PackPlan> build_pack_plan(const manifest::Pack& pack, const PackContext& ctx);

// Little-endian store of the low `width` (1-8) bytes of `value`.
void store_le(uint8_t* dst, uint64_t value, uint32_t width);

}  // namespace kernrt::rt
