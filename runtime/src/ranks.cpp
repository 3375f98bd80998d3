// resolve_ranks and friends (see ranks.hpp).
#include "ranks.hpp"

#include "kernrt/runtime.hpp"


namespace kernrt::rt {

Result<Ranks> resolve_ranks(const manifest::Manifest& m, const Ranks& given, const std::string& rendezvous) {
  Errors errors;
  if (!m.topology) {
    if (!given.empty()) {
      errors.push_back(Error{ErrorKind::Caller, "",
          "ranks were given (`" + given.begin()->first + "` = " + std::to_string(given.begin()->second) +
          "...) but the manifest declares no topology"});
    }
    return errors.empty() ? Result<Ranks>::ok(Ranks{}) : Result<Ranks>::fail(std::move(errors));
  }
  for (const auto& [group, index] : given) {
    if (!m.topology->groups.count(group)) {
      std::string groups;
      for (const auto& [g, size] : m.topology->groups) groups += (groups.empty() ? "`" : ", `") + g + "`";
      errors.push_back(Error{ErrorKind::Caller, "/topology/groups",
          "a rank was given for group `" + group + "`, which the topology does not declare (it has " +
          groups + ")"});
    }
  }
  Ranks ranks;
  for (const auto& [group, size] : m.topology->groups) {
    const std::string path = json_pointer_append("/topology/groups", group);
    auto it = given.find(group);
    if (it == given.end()) {
      if (size == 1) {
        ranks[group] = 0;
        continue;
      }
      errors.push_back(Error{ErrorKind::Caller, path,
          "topology group `" + group + "` has " + std::to_string(size) + " ranks and this "
          "process was given no index in it: one process per rank, each loaded with its index "
          "(LoadOptions::ranks; program_io --rank " + group + "=I) and the job's rendezvous directory"});
      continue;
    }
    if (it->second >= size) {
      errors.push_back(Error{ErrorKind::Caller, path,
          "rank " + std::to_string(it->second) + " is outside topology group `" + group + "` of " +
          std::to_string(size) + " rank(s)"});
      continue;
    }
    ranks[group] = it->second;
  }
  if (multi_rank(m) && rendezvous.empty()) {
    errors.push_back(Error{ErrorKind::Caller, "/topology",
        "a multi-rank load needs a rendezvous directory that every rank of the job can reach "
        "(LoadOptions::rendezvous; program_io --rendezvous DIR): a fresh one per job"});
  }
  if (!errors.empty()) return Result<Ranks>::fail(std::move(errors));
  return Result<Ranks>::ok(std::move(ranks));
}

Ranks one_rank_groups(const manifest::Manifest& m) {
  Ranks r;
  if (!m.topology) return r;
  for (const auto& [group, size] : m.topology->groups) {
    if (size == 1) r[group] = 0;
  }
  return r;
}

bool multi_rank(const manifest::Manifest& m) {
  if (!m.topology) return false;
  for (const auto& [group, size] : m.topology->groups) {
    if (size > 1) return true;
  }
  return false;
}

}  // namespace kernrt::rt

namespace kernrt {

Errors check_ranks(const manifest::Manifest& m, const LoadOptions& options) {
  auto r = rt::resolve_ranks(m, options.ranks, options.rendezvous);
  return r ? Errors{} : r.errors;
}

}  // namespace kernrt
