// The multi-rank steps of Runtime::load (kern-schema §3.1 steps 1 and 4, §3.7 "Peers"):
// the ranks of each group agree on the manifest before anything is allocated, NCCL's
// unique id travels from a group's rank 0 to the others, and each peer buffer is filled
// with the device addresses of its `of` object on every rank of its group, this rank's
// own at its own index, the others' mapped here from the descriptors they export.
//
// Owns the naming in the rendezvous directory: `manifest.<group>.<rank>` (the SHA-256 of
// the canonical manifest text), `nccl.<group>` (128 bytes), and the descriptor sockets
// `fd.<group>.<object>.<rank>`. Every rank walks groups and peer buffers in the same
// (sorted) order, so no rank waits on an exchange another has not reached. Does not check
// that a kernel reading a peer address is ordered after the peer's writes: that is the
// manifest's (kern's peer barriers), as it is on any machine.
#pragma once

#include <set>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"
#include "kernrt/runtime.hpp"
#include "nccl.hpp"
#include "ranks.hpp"
#include "rendezvous.hpp"

namespace kernrt::rt {

// What must be allocated through the virtual-memory API: `export` buffers, and every
// buffer or state that a peer buffer names in `of`.
struct VmmObjects {
  std::set<std::string> buffers;
  std::set<std::string> states;
};
VmmObjects vmm_objects(const manifest::Manifest& m);

// Publishes this rank's manifest hash in every multi-rank group and compares every other
// member's. Error{Caller, /topology/groups/<g>} naming the rank that loaded another one.
std::optional<Error> agree_on_manifest(const Rendezvous& rv, const manifest::Manifest& m, const Ranks& ranks);

// The unique id of `group`'s communicator: minted and published by its rank 0, read by the
// others (a one-rank group mints its own; `rv` may then be null).
Result<NcclUniqueId> nccl_group_id(const Rendezvous* rv, const Nccl& nccl, const std::string& group,
                                   uint64_t rank, uint64_t world);

// Fills every peer buffer of the loaded runtime (its `of` objects already allocated through
// vmm_create): exchanges descriptors with the group's other ranks through `rv` (null when
// every peer group has one rank), maps theirs once per (group, object), checks that every
// rank's allocation has this rank's size, and writes the u64 address arrays. The mappings
// join `im.vmm`, released with the runtime.
std::optional<Error> fill_peer_buffers(Runtime::Impl& im, const Rendezvous* rv);

}  // namespace kernrt::rt
