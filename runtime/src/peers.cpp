// Multi-rank load steps (see peers.hpp).
#include "peers.hpp"

#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include "kernrt/manifest/sha256.hpp"
#include "kernrt/manifest/writer.hpp"
#include "runtime_impl.hpp"
#include "vmm.hpp"

namespace kernrt::rt {

VmmObjects vmm_objects(const manifest::Manifest& m) {
  VmmObjects o;
  for (const auto& [name, b] : m.buffers) {
    if (b.export_.value_or(false)) o.buffers.insert(name);
  }
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != manifest::BufferKind::peer || !b.of) continue;
    if (m.states.count(*b.of)) o.states.insert(*b.of);
    else o.buffers.insert(*b.of);
  }
  return o;
}

std::optional<Error> agree_on_manifest(const Rendezvous& rv, const manifest::Manifest& m, const Ranks& ranks) {
  const std::string mine = sha256_hex(manifest::write_manifest(m));
  for (const auto& [group, size] : m.topology->groups) {
    if (size < 2) continue;
    if (auto e = rv.publish("manifest." + group + "." + std::to_string(ranks.at(group)), mine)) return e;
  }
  for (const auto& [group, size] : m.topology->groups) {
    if (size < 2) continue;
    for (uint64_t r = 0; r < size; ++r) {
      if (r == ranks.at(group)) continue;
      auto theirs = rv.wait("manifest." + group + "." + std::to_string(r),
                            "rank " + std::to_string(r) + " of group `" + group + "`");
      if (!theirs) return theirs.errors.front();
      if (*theirs.value != mine) {
        return Error{ErrorKind::Caller, json_pointer_append("/topology/groups", group),
                     "rank " + std::to_string(r) + " of group `" + group + "` loaded another manifest "
                     "(sha256 " + theirs.value->substr(0, 16) + "..., this rank's " + mine.substr(0, 16) +
                     "...): every rank must load the same one"};
      }
    }
  }
  return std::nullopt;
}

Result<NcclUniqueId> nccl_group_id(const Rendezvous* rv, const Nccl& nccl, const std::string& group,
                                   uint64_t rank, uint64_t world) {
  using R = Result<NcclUniqueId>;
  const std::string name = "nccl." + group;
  if (rank == 0) {
    auto id = nccl.unique_id();
    if (!id || world == 1) return id;
    if (auto e = rv->publish(name, std::string(id.value->internal, sizeof id.value->internal))) return R::fail(*e);
    return id;
  }
  auto bytes = rv->wait(name, "rank 0 of group `" + group + "`");
  if (!bytes) return R::fail(bytes.errors);
  NcclUniqueId id{};
  if (bytes.value->size() != sizeof id.internal) {
    return R::fail(Error{ErrorKind::Io, rv->dir() + "/" + name,
                         "`" + name + "` holds " + std::to_string(bytes.value->size()) +
                             " bytes, not an NCCL unique id's 128"});
  }
  std::memcpy(id.internal, bytes.value->data(), sizeof id.internal);
  return R::ok(id);
}

std::optional<Error> fill_peer_buffers(Runtime::Impl& im, const Rendezvous* rv) {
  const manifest::Manifest& m = im.manifest;
  std::map<std::pair<std::string, std::string>, std::vector<uint64_t>> addresses;  // (group, of)
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != manifest::BufferKind::peer) continue;
    const std::string path = json_pointer_append("/buffers", name);
    const std::string& group = *b.group;
    const std::string& of = *b.of;
    const uint64_t size = m.topology->groups.at(group);
    const uint64_t rank = im.ranks.at(group);
    auto key = std::make_pair(group, of);
    if (!addresses.count(key)) {
      const bool is_state = m.states.count(of) != 0;
      const Region own = is_state ? im.alloc.states.at(of) : im.alloc.buffers.at(of);
      const VmmAllocation* mine = nullptr;
      for (const auto& a : im.vmm) {
        if (a.address == own.address) mine = &a;
      }
      if (mine == nullptr) {
        return Error{ErrorKind::Driver, path, "`" + of + "` was not allocated through the virtual-memory API"};
      }
      std::vector<uint64_t> addr(size, 0);
      addr[rank] = own.address;
      if (size > 1) {
        auto fd = vmm_export_fd(*im.api, *mine, path);
        if (!fd) return fd.errors.front();
        const uint64_t bytes = mine->bytes;
        auto shared = rv->exchange_fds(group + "." + of, rank, size, *fd.value, bytes);
        close(*fd.value);
        if (!shared) return shared.errors.front();
        std::optional<Error> failed;
        for (uint64_t r = 0; r < size; ++r) {
          if (r == rank) continue;
          const auto& s = (*shared.value)[r];
          if (failed) {
            close(s.fd);
            continue;
          }
          if (s.bytes != bytes) {
            close(s.fd);
            failed = Error{ErrorKind::Caller, path,
                           "rank " + std::to_string(r) + " of group `" + group + "` allocated `" + of + "` with " +
                               std::to_string(s.bytes) + " bytes, this rank " + std::to_string(bytes) +
                               ": every rank must load with the same capacities"};
            continue;
          }
          auto imported = vmm_import_fd(*im.api, im.device, s.fd, s.bytes, path);
          if (!imported) {
            failed = imported.errors.front();
            continue;
          }
          im.vmm.push_back(*imported.value);
          addr[r] = imported.value->address;
        }
        if (failed) return failed;
      }
      addresses.emplace(key, std::move(addr));
    }
    const auto& addr = addresses.at(key);
    const Region dst = im.alloc.buffers.at(name);
    if (dst.bytes < addr.size() * sizeof(uint64_t)) {
      return Error{ErrorKind::Manifest, path, "peer buffer `" + name + "` is smaller than its group's " +
                                                  std::to_string(addr.size()) + " addresses"};
    }
    if (auto e = im.check(im.api->cuMemcpyHtoDAsync(dst.address, addr.data(), addr.size() * sizeof(uint64_t),
                                                    im.stream),
                          "cuMemcpyHtoDAsync (peer addresses)", path)) {
      return e;
    }
  }
  return im.sync("peer addresses");  // the host arrays in `addresses` outlive the copies
}

}  // namespace kernrt::rt
