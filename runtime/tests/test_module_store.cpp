// Module store: cubins are found by hash, digests are cached in an index keyed by
// path + size + mtime, a changed file is re-hashed, and the returned bytes are always
// re-hashed so a byte changed behind the index's back can never load under the old digest.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fixtures.hpp"
#include "kernrt/manifest/sha256.hpp"
#include "module_store.hpp"

namespace kernrt {
namespace {

struct Store : ::testing::Test {
  testing::TempDir cubins;
  testing::TempDir cache;
  const std::string bytes = std::string("\x7f" "ELF fake cubin bytes ", 22) + std::string(100, 'k');
  manifest::Module module;
  void SetUp() override {
    testing::write_bytes(cubins.file("attn.sm90a.cubin"), bytes);
    testing::write_bytes(cubins.file("notes.txt"), "not a cubin");
    module.source = "attn.cubin";
    module.sha256 = sha256_hex(bytes);
  }
  rt::ModuleStore open() { return rt::ModuleStore::open({cubins.path()}, cache.path()); }
};

TEST_F(Store, FindsModuleByHashNotName) {
  auto store = open();
  EXPECT_EQ(store.files_indexed(), 1u);  // only *.cubin
  auto r = store.load("attn", module, "/modules/attn");
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(std::string(r.value->begin(), r.value->end()), bytes);
}

TEST_F(Store, IndexAvoidsRehashingUnchangedFiles) {
  EXPECT_EQ(open().files_hashed(), 1u);
  EXPECT_EQ(open().files_hashed(), 0u);  // served from <cache>/cubin-index.tsv
}

TEST_F(Store, MissingModuleNamesModuleHashAndPlaces) {
  manifest::Module other{"gone.cubin", std::string(64, 'a')};
  auto r = open().load("gone", other, "/modules/gone");
  ASSERT_FALSE(r);
  const Error& e = r.errors[0];
  EXPECT_EQ(e.kind, ErrorKind::Artifact);
  EXPECT_EQ(e.path, "/modules/gone");
  EXPECT_NE(e.message.find("module `gone`"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(std::string(64, 'a')), std::string::npos);
  EXPECT_NE(e.message.find("`" + cubins.path() + "`"), std::string::npos);
  EXPECT_NE(e.message.find("`" + cache.path() + "/blobs`"), std::string::npos);
  EXPECT_NE(e.message.find("the hash is the identity"), std::string::npos);
}

TEST_F(Store, ChangedByteIsRehashedAndRefused) {
  ASSERT_TRUE(open().load("attn", module, "/modules/attn"));
  std::string changed = bytes;
  changed[30] ^= 1;
  testing::write_bytes(cubins.file("attn.sm90a.cubin"), changed);
  auto store = open();
  auto r = store.load("attn", module, "/modules/attn");
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("module `attn` (source `attn.cubin`) with sha256 `" +
                                     module.sha256 + "` is not among the artifacts in `" +
                                     cubins.path() + "`"),
            std::string::npos)
      << r.errors[0].message;
}

TEST_F(Store, ChangeHiddenFromTheIndexStillNeverLoads) {
  ASSERT_TRUE(open().load("attn", module, "/modules/attn"));
  const std::string path = cubins.file("attn.sm90a.cubin");
  struct stat before{};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::string changed = bytes;
  changed[30] ^= 1;  // same size
  testing::write_bytes(path, changed);
  struct timespec times[2] = {before.st_atim, before.st_mtim};  // restore the old mtime
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  auto store = open();
  EXPECT_EQ(store.files_hashed(), 0u);  // the index still vouches for the old digest
  auto r = store.load("attn", module, "/modules/attn");
  ASSERT_FALSE(r);
  EXPECT_NE(r.errors[0].message.find("changed after it was indexed (now sha256 `" +
                                     sha256_hex(changed) + "`)"),
            std::string::npos)
      << r.errors[0].message;
}

TEST_F(Store, CacheBlobsAreFoundByHash) {
  testing::TempDir empty;
  std::filesystem::create_directories(cache.file("blobs"));
  testing::write_bytes(cache.file("blobs/" + module.sha256), bytes);
  auto r = rt::ModuleStore::open({empty.path()}, cache.path()).load("attn", module, "/modules/attn");
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  EXPECT_EQ(r.value->size(), bytes.size());
}

TEST_F(Store, UppercaseHashInManifestMatches) {
  manifest::Module upper = module;
  for (char& c : upper.sha256) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(open().load("attn", upper, "/modules/attn"));
}

}  // namespace
}  // namespace kernrt
