// This process's place in a topology manifest (kern-schema §3.1 step 1): one process is one
// rank, with an index in every topology group. Pure: no driver, no files.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

using Ranks = std::map<std::string, uint64_t>;  // topology group -> this process's index

// Every group of `m` with this process's index: `given` entries, one-rank groups at 0 when
// not given. Caller errors, each at /topology/groups/<g> (or at the root for ranks given to
// a manifest without a topology): a group of more than one rank without an index, an index
// outside its group, an index for a group the manifest does not declare, and a multi-rank
// group without a rendezvous directory (LoadOptions::rendezvous).
Result<Ranks> resolve_ranks(const manifest::Manifest& m, const Ranks& given, const std::string& rendezvous);

// The ranks of a manifest loaded without any: every group must have one rank (for lowering
// on its own, as the tests do); a multi-rank group is left out, so its rank args refuse.
Ranks one_rank_groups(const manifest::Manifest& m);

// Whether some group of `m` has more than one rank.
bool multi_rank(const manifest::Manifest& m);

}  // namespace kernrt::rt
