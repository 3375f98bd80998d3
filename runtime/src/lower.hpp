// Lowering: a verified manifest plus its allocations -> flat launch lists (§3.1 step 7).
//
// Owns: where names disappear. Every call's interface args become slots (pointer =
// base + offset with the bytes left, scalar = literal bits or a compiled var/expr), every
// launch becomes a LaunchPlan (function key, block, compiled grid and shared_mem,
// per-param args, pack plans with tensormaps encoded through the injected encoder), and
// every program records which dense vars it reads. Also the load-time refusals that
// have nothing to do with the driver: topology, exports, externs, peer buffers; rank args
// of one-rank groups become the constant 0 and NCCL launches get their bounds checked.
// Pure: no driver call (the encoder is an interface). Does not re-check verifier rules
// beyond what keeps memory safe (arg counts, offsets inside their allocation).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/nccl_extern.hpp"
#include "kernrt/manifest/types.hpp"
#include "gemm.hpp"
#include "pack.hpp"
#include "ranks.hpp"
#include "slots.hpp"
#include "tensormap.hpp"

namespace kernrt::rt {

struct Allocations {
  std::map<std::string, Region> buffers;
  std::map<std::string, Region> states;
  std::map<std::string, std::map<std::string, Region>> scratch;  // op -> scratch -> region
};

// One kernel as the driver must find it: module (by name; its sha is in the manifest),
// entry symbol, and the declared ABI (size_bytes of each launch param).
struct FunctionKey {
  std::string module;
  std::string entry;
  std::vector<uint32_t> param_sizes;
  bool operator<(const FunctionKey& o) const;
};

struct LaunchArgPlan {
  bool is_pack = false;
  uint32_t size = 8;  // ABI size; the kernel reads the low `size` bytes of a u64 slot
  Value value;        // pointer or scalar (not a pack)
  uint32_t pack = 0;  // index into LaunchPlan::packs (pack only)
  int32_t buffer = -1;  // a pointer into this buffer (sorted index), for bound calls
  uint64_t offset = 0;
};

// A collective built-in: which one, its element type and the group whose communicator
// runs it (the launch's rank arg).
struct NcclPlan {
  manifest::Collective coll = manifest::Collective::AllReduce;
  manifest::DType elem = manifest::DType::f32;
  std::string group;
};

struct LaunchPlan {
  std::string path;  // /ops/<op>/impl/launches/<l>
  std::string call;  // /programs/<p>/calls/<c>
  uint32_t function = 0;  // index into LoweredManifest::functions
  std::array<uint32_t, 3> block{};
  std::array<Value, 3> grid;
  Value shared_mem;
  std::optional<std::array<uint32_t, 3>> cluster;
  bool pdl = false;
  std::vector<LaunchArgPlan> args;
  std::vector<PackPlan> packs;
  std::optional<GemmKind> gemm;  // an `extern:` GEMM built-in: no function, no geometry
  std::optional<NcclPlan> nccl;  // an `extern:nccl_*` collective: args [send, recv, count, rank]
};

struct ProgramPlan {
  std::vector<LaunchPlan> launches;
  std::vector<bool> reads;  // per dense var: read by a grid, shared_mem, arg or pack field
};

struct LoweredManifest {
  VarTable vars;
  // What a call may bind the caller's memory to: every buffer (sorted), then every state
  // (sorted); Slot::buffer and relocations index this list.
  std::vector<std::string> bindable;
  size_t buffer_count = 0;  // bindable[0, buffer_count) are buffers, the rest states
  std::vector<FunctionKey> functions;
  std::vector<uint64_t> shared_mem_max;  // per function: bytes at var maxima, max over launches
  std::vector<std::string> function_paths;  // per function: the first launch that uses it
  std::vector<uint32_t> cluster_max;        // per function: largest cluster (blocks), 0 = none
  std::map<std::string, ProgramPlan> programs;
};

// What this runtime refuses before touching anything, each at its pointer: externs other
// than the GEMM and NCCL built-ins ("unsupported extern `x`"). Topologies are resolve_ranks'
// business (ranks.hpp).
Errors check_supported(const manifest::Manifest& m);

// Whether any launch of the manifest is a GEMM built-in (the runtime then opens cuBLASLt).
bool uses_gemm(const manifest::Manifest& m);

// The groups the manifest's NCCL launches name (each needs a communicator before a run).
std::set<std::string> nccl_groups(const manifest::Manifest& m);

// Every problem found, each at its JSON pointer.
// `ranks`: this process's index per topology group (nullptr: one_rank_groups(m)).
Result<LoweredManifest> lower(const manifest::Manifest& m, const Allocations& allocations,
                              TensorMapEncoder& encoder, const Ranks* ranks = nullptr);

}  // namespace kernrt::rt
