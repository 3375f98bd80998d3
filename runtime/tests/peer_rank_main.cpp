// kernrt_peer_rank: one rank of the two-process peer test (test_gpu_peers.cpp starts two).
//
//   kernrt_peer_rank MANIFEST CUBIN_DIR RENDEZVOUS RANK
//
// Loads the peers manifest as rank RANK of group `tp` (the load meets the other rank in
// RENDEZVOUS: manifest hash, exported slab descriptors), writes its slab (RANK * 100 + 1..4),
// meets the other rank again so both slabs are written, then runs `gather` eagerly and as
// a graph and checks that it read both ranks' slabs through the peer buffer. Exit 0 when
// it did, 1 on a wrong value, 3 when the load or a run failed (the errors on stderr).
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"
#include "rendezvous.hpp"

namespace {

int failed(const std::string& what, const kernrt::Errors& errors) {
  for (const auto& e : errors) std::cerr << what << ": " << e.to_string() << "\n";
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: kernrt_peer_rank MANIFEST CUBIN_DIR RENDEZVOUS RANK\n";
    return 2;
  }
  const std::string rendezvous = argv[3];
  const uint64_t rank = std::stoull(argv[4]);
  auto text = kernrt::read_regular_file(argv[1], kernrt::kDefaultMaxManifestBytes);
  if (!text) return failed("read", text.errors);
  auto verified = kernrt::manifest::verify_json(*text.value);
  if (!verified) return failed("verify", verified.errors);
  kernrt::LoadOptions o;
  o.cubin_dirs = {argv[2]};
  o.ranks = {{"tp", rank}};
  o.rendezvous = rendezvous;
  o.rendezvous_timeout_s = 30;
  auto loaded = kernrt::Runtime::load(*verified.value, o);
  if (!loaded) return failed("load", loaded.errors);
  kernrt::Runtime& rt = **loaded.value;

  std::vector<uint32_t> slab(4);
  for (uint32_t j = 0; j < 4; ++j) slab[j] = static_cast<uint32_t>(rank) * 100 + j + 1;
  if (auto e = rt.write_input("slab", slab.data(), slab.size() * 4)) return failed("write", {*e});
  if (auto e = rt.synchronize()) return failed("synchronize", {*e});
  const kernrt::rt::Rendezvous meet(rendezvous, 30);
  const uint64_t other = 1 - rank;
  auto barrier = [&](const std::string& step) -> std::optional<kernrt::Error> {
    if (auto e = meet.publish(step + "." + std::to_string(rank), "")) return e;
    auto w = meet.wait(step + "." + std::to_string(other), "rank " + std::to_string(other));
    if (!w) return w.errors.front();
    return std::nullopt;
  };
  if (auto e = barrier("written")) return failed("barrier", {*e});

  const std::vector<uint32_t> want{1, 2, 3, 4, 101, 102, 103, 104};
  int status = 0;
  for (bool graph : {false, true}) {
    if (auto e = rt.run("gather", {}, graph)) return failed("run", {*e});
    std::vector<uint8_t> out;
    if (auto e = rt.read_output("gathered", &out)) return failed("read", {*e});
    for (size_t i = 0; i < want.size(); ++i) {
      uint32_t got = 0;
      std::memcpy(&got, out.data() + 4 * i, 4);
      if (got != want[i]) {
        std::cerr << "rank " << rank << (graph ? " graph" : " eager") << ": gathered[" << i << "] = " << got
                  << ", want " << want[i] << "\n";
        status = 1;
      }
    }
  }
  // Both ranks are done reading before either releases its slab.
  if (auto e = barrier("done")) return failed("barrier", {*e});
  if (status == 0) std::cout << "rank " << rank << ": gathered both slabs eagerly and as a graph\n";
  return status;
}
