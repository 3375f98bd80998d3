// Runtime::load on a machine with or without a GPU: everything that needs no driver is
// checked first (topology, externs, modules by hash, weights), so those refusals are the
// same everywhere; past them, a missing driver is a clear Driver error.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "kernrt/manifest/sha256.hpp"
#include "kernrt/runtime.hpp"
#include "memory.hpp"

namespace kernrt {
namespace {

const Error* find_message(const Errors& errors, const std::string& needle) {
  for (const auto& e : errors) {
    if (e.message.find(needle) != std::string::npos) return &e;
  }
  return nullptr;
}

// Each corpus topology manifest loads as far as this process's ranks allow, or is refused
// with exactly what is missing, at its pointer; never a blanket "topology unsupported".
struct Refusal {
  const char* path;
  const char* needle;
};

void expect_refusals(const std::string& file, const std::vector<Refusal>& want,
                     const LoadOptions& options = LoadOptions{}) {
  SCOPED_TRACE(file);
  auto v = testing::verify_file(testing::shared_path("corpus/kern/" + file));
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  auto r = Runtime::load(*v.value, options);
  ASSERT_FALSE(r);
  for (const auto& w : want) {
    const Error* e = nullptr;
    for (const auto& x : r.errors) {
      if (x.path == w.path && x.message.find(w.needle) != std::string::npos) e = &x;
    }
    ASSERT_NE(e, nullptr) << w.path << ": " << w.needle << "\n" << testing::all_messages(r.errors);
    EXPECT_NE(e->kind, ErrorKind::Driver);  // refused before the driver is asked
  }
  // Besides these, only the module lookup (same pass: no cubin directory given) may fail.
  size_t others = 0;
  for (const auto& e : r.errors) others += e.kind != ErrorKind::Artifact;
  EXPECT_EQ(others, want.size()) << testing::all_messages(r.errors);
  for (const auto& e : r.errors) {
    EXPECT_EQ(e.message.find("topology unsupported"), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find("single-GPU runtime"), std::string::npos) << e.message;
  }
}

TEST(Load, TrayWithoutRanksNamesEachGroupTheRendezvousAndItsExterns) {
  expect_refusals("tray.json",
                  {{"/topology/groups/ep", "topology group `ep` has 4 ranks and this process was given no index"},
                   {"/topology/groups/tp", "topology group `tp` has 4 ranks and this process was given no index"},
                   {"/topology", "a multi-rank load needs a rendezvous directory"},
                   {"/ops/step/impl/launches/0/entry", "unsupported extern `extern:x`"},
                   {"/ops/init/impl/launches/0/entry", "unsupported extern `extern:x`"}});
}

TEST(Load, TrayWithItsRanksIsRefusedOnlyForItsExterns) {
  LoadOptions o;
  o.ranks = {{"ep", 3}, {"tp", 1}};
  o.rendezvous = "/tmp/kernrt-unused";  // never reached: the externs stop the load first
  expect_refusals("tray.json",
                  {{"/ops/step/impl/launches/0/entry", "unsupported extern `extern:x`"},
                   {"/ops/init/impl/launches/0/entry", "unsupported extern `extern:x`"}},
                  o);
}

TEST(Load, K3MoeEp1PassesEveryCheckUpToItsKernels) {
  // ep has one rank: its exported slab and peer buffer load (the peer array holds this
  // rank's own address); what stops it here is only the missing cubins.
  expect_refusals("k3-moe-l1-ep1.json", {});
}

TEST(Load, K3MoeEp4NeedsItsRankAndARendezvous) {
  expect_refusals("k3-moe-l1-ep4.json",
                  {{"/topology/groups/ep", "topology group `ep` has 4 ranks and this process was given no index"},
                   {"/topology", "a multi-rank load needs a rendezvous directory"}});
  LoadOptions o;
  o.ranks = {{"ep", 4}};
  o.rendezvous = "/tmp/kernrt-unused";
  expect_refusals("k3-moe-l1-ep4.json", {{"/topology/groups/ep", "rank 4 is outside topology group `ep` of 4"}}, o);
}

TEST(Load, RefusesExternsOtherThanTheGemmBuiltIns) {
  auto v = testing::verify_file(testing::shared_path("corpus/kern/plain.json"));
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  auto r = Runtime::load(*v.value, LoadOptions{});
  ASSERT_FALSE(r);
  const Error* e = find_message(r.errors, "unsupported extern `extern:");
  ASSERT_NE(e, nullptr) << testing::all_messages(r.errors);
  EXPECT_EQ(e->kind, ErrorKind::Manifest);
  EXPECT_NE(e->message.find("the built-ins are extern:cublaslt_bf16_tn"), std::string::npos);
  EXPECT_NE(e->path.find("/impl/launches/"), std::string::npos);
}

TEST(Load, MissingCubinNamesModuleHashAndDirectory) {
  auto v = testing::verify_file(testing::source_path("examples/decode.json"));
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  testing::TempDir cubins, cache;
  LoadOptions opts;
  opts.cubin_dirs = {cubins.path()};
  opts.cache_dir = cache.path();
  auto r = Runtime::load(*v.value, opts);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u) << testing::all_messages(r.errors);
  const Error& e = r.errors[0];
  EXPECT_EQ(e.kind, ErrorKind::Artifact);
  EXPECT_EQ(e.path.rfind("/modules/fmhaSm100f", 0), 0u) << e.path;
  EXPECT_NE(e.message.find("a5c3300d05153675d2c6c432c50be888f3e0a8bb6c3ffbdaed48fbb25e52f86e"),
            std::string::npos);
  EXPECT_NE(e.message.find("`" + cubins.path() + "`"), std::string::npos) << e.message;
}

TEST(Load, PastTheArtifactChecksTheDriverDecides) {
  auto m = testing::parse_file(testing::source_path("examples/decode.json"));
  testing::TempDir cubins, cache;
  const std::string fake = "not really a cubin, but the hash matches";
  testing::write_bytes(cubins.file("attn.cubin"), fake);
  for (auto& [name, module] : m.modules) module.sha256 = sha256_hex(fake);
  auto v = manifest::verify(m);
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  LoadOptions opts;
  opts.cubin_dirs = {cubins.path()};
  opts.cache_dir = cache.path();
  auto r = Runtime::load(*v.value, opts);
  ASSERT_FALSE(r);
  std::string why;
  if (device_available(&why)) {
    // The bytes reach cuModuleLoadData, which refuses them.
    EXPECT_EQ(r.errors[0].kind, ErrorKind::Artifact) << r.errors[0].to_string();
    EXPECT_NE(r.errors[0].message.find("does not load on this device"), std::string::npos);
  } else {
    EXPECT_EQ(r.errors[0].kind, ErrorKind::Driver);
    EXPECT_EQ(r.errors[0].message.rfind("no CUDA driver/device: ", 0), 0u) << r.errors[0].message;
  }
}

TEST(Load, WeightsAreBoundBeforeTheDriverOpens) {
  auto m = testing::parse_file(testing::source_path("examples/decode.json"));
  m.buffers.at("kv").kind = manifest::BufferKind::weight;
  auto v = manifest::verify(m);
  ASSERT_TRUE(v) << testing::all_messages(v.errors);
  testing::TempDir cache;
  LoadOptions opts;
  opts.cache_dir = cache.path();
  auto r = Runtime::load(*v.value, opts);
  ASSERT_FALSE(r);
  const Error* e = find_message(r.errors, "weight `kv` missing");
  ASSERT_NE(e, nullptr) << testing::all_messages(r.errors);
  EXPECT_EQ(e->kind, ErrorKind::Artifact);
}

TEST(InputWrite, SizeRulesNameBufferExpectedAndActual) {
  auto e = rt::check_write("input", "q", "/buffers/q", 24576, 2, 24578, "x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, ErrorKind::Caller);
  EXPECT_EQ(e->path, "/buffers/q");
  EXPECT_EQ(e->message, "input `q` takes at most 24576 bytes, got 24578");
  e = rt::check_write("input", "q", "/buffers/q", 24576, 2, 3, "x");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "input `q` has 2-byte elements: 3 bytes is not a whole number of elements");
  EXPECT_FALSE(rt::check_write("input", "q", "/buffers/q", 24576, 2, 24576, "x"));
  EXPECT_FALSE(rt::check_write("input", "q", "/buffers/q", 24576, 2, 2, "x"));  // a prefix
  EXPECT_TRUE(rt::check_write("input", "q", "/buffers/q", 24576, 2, 2, nullptr));
}

}  // namespace
}  // namespace kernrt
