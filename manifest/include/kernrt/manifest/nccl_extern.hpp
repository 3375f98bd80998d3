// The NCCL collectives as runtime built-ins (kern schema v5, reference/kern-schema.md
// §1.10 and §1.17; the names as kern's runtime parses them in crates/kern-runtime/src/nccl.rs):
//
//   extern:nccl_<coll>_<elem>   coll: allreduce | allgather | reducescatter
//                               elem: f32 | bf16 | i32 | u8
//
// wired `[send, recv, count, {"rank": "<group>"}]`: the rank arg names the topology group
// whose communicator runs the collective. `count` is in elements per rank: an all-reduce
// sends and receives `count`; an all-gather sends `count` and receives world x count
// (rank r's block at r x count); a reduce-scatter sends world x count and receives `count`
// (block r of the sum). The reduction is a sum.
//
// Owns: the closed set of names, their parse, the element sizes and the per-collective
// element counts, and the launch-shape rule the verifier applies to an `extern:nccl_*`
// launch (arity, param kinds and dtypes, the rank arg). Pure: no NCCL, no driver.
// Does not check: bounds (the runtime does, with the allocations) or whether this build
// can run the group (the runtime's load refuses what it cannot).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/types.hpp"

namespace kernrt::manifest {

enum class Collective { AllReduce, AllGather, ReduceScatter };

struct NcclExtern {
  Collective coll = Collective::AllReduce;
  DType elem = DType::f32;  // f32, bf16, i32 or u8
};

// True when `entry` is in the NCCL namespace (`extern:nccl_` prefix), valid or not.
bool is_nccl_entry(const std::string& entry);

// `extern:nccl_<coll>_<elem>` parsed; nullopt for any other entry (including a misspelt
// name in the NCCL namespace).
std::optional<NcclExtern> nccl_extern(const std::string& entry);

const char* collective_name(Collective c);  // "allreduce", "allgather", "reducescatter"

// "extern:nccl_{allreduce,allgather,reducescatter}_{f32,bf16,i32,u8}", for messages.
const char* nccl_extern_names();

// Elements the send and receive buffers need for `count` per rank in a group of `world`.
// false when the product overflows u64.
bool nccl_elems(Collective c, uint64_t count, uint64_t world, uint64_t* send, uint64_t* recv);

// Launch arg positions.
enum NcclArg : uint32_t { kNcclSend = 0, kNcclRecv, kNcclCount, kNcclRank, kNcclArity };

struct NcclProblem {
  // Where under the launch: "entry", "params" (the launch's params, or the op's when the
  // launch has none), "args", or "" (the launch itself); `index` >= 0 names an element.
  std::string field;
  int index = -1;
  std::string message;
};

// Every problem of an `extern:nccl_*` launch whose params are `params` and whose wiring is
// `args` (nullptr when defaulted): an unknown name, arity other than 4, send not an
// `in buffer<elem>`, recv not an `out`/`inout buffer<elem>`, count not i32/i64, the 4th
// arg not `{"rank": g}` on an i32/i64 param. Empty when the launch is a valid collective.
std::vector<NcclProblem> check_nccl_launch(const std::string& entry,
                                           const std::vector<ParamType>& params,
                                           const std::vector<LaunchArg>* args);

}  // namespace kernrt::manifest
