// The meeting place of one multi-rank job on one host: a directory every rank's process can
// reach (LoadOptions::rendezvous), through which the ranks of a topology group agree on the
// manifest, pass NCCL's unique id, and hand each other the file descriptors of their
// exported allocations.
//
// Owns: small named files published atomically (written under a private name, then
// renamed, so a reader never sees half a file) and waited for with a deadline, and the
// descriptor exchange of one exported object among a group's ranks over unix-domain
// sockets (SCM_RIGHTS: a descriptor cannot travel through a file). Pure POSIX, no CUDA.
// Contract: one job per directory. A rank that finds its own file already there refuses
// (a stale file from an earlier job would otherwise be read as this job's), so give each
// job a fresh directory. Does not check: that the ranks of a job are on the same host
// (a POSIX descriptor is only meaningful there; the platform's fabric handles would be
// the cross-host route), or who else can write the directory (its permissions are the
// caller's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"

namespace kernrt::rt {

class Rendezvous {
 public:
  Rendezvous(std::string dir, double timeout_s) : dir_(std::move(dir)), timeout_s_(timeout_s) {}

  const std::string& dir() const { return dir_; }

  // Writes `bytes` as file `name` in the directory; Error{Io} when it cannot, or when the
  // file already exists (an earlier job's: a fresh directory is needed).
  std::optional<Error> publish(const std::string& name, const std::string& bytes) const;
  // The bytes of file `name` once it exists; Error{Io} naming the file and `who` (the rank
  // expected to publish it) after the deadline.
  Result<std::string> wait(const std::string& name, const std::string& who) const;

  // One exported object of a group: this rank serves `fd` (and its size) to every other
  // member and receives theirs. Result: one {fd, bytes} per rank of the group, this rank's
  // own entry = {fd, bytes} as given (not duplicated); received descriptors belong to the
  // caller. `tag` names the object in socket names and messages (e.g. "tp.slab").
  struct Shared {
    int fd = -1;
    uint64_t bytes = 0;
  };
  Result<std::vector<Shared>> exchange_fds(const std::string& tag, uint64_t rank,
                                           uint64_t size, int fd, uint64_t bytes) const;

 private:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
  double timeout_s_;
};

}  // namespace kernrt::rt
