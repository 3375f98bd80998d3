// kernrt::read_regular_file and parse_byte_count (file.hpp): regular files only (a FIFO is
// refused without blocking), the size limit, the size flag's syntax; registry references
// and cache paths (registry.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/registry.hpp"

namespace {

namespace fs = std::filesystem;

class ReadRegularFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kernrt_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(ReadRegularFile, ReadsAFileWithinTheLimit) {
  const std::string f = write("a.json", "{\"x\": 1}");
  auto r = kernrt::read_regular_file(f, 8);
  ASSERT_TRUE(r) << r.errors.at(0).message;
  EXPECT_EQ(*r.value, "{\"x\": 1}");
}

TEST_F(ReadRegularFile, RefusesAFileOverTheLimit) {
  const std::string f = write("a.json", std::string(9, ' '));
  auto r = kernrt::read_regular_file(f, 8, "--max-bytes");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors.at(0).kind, kernrt::ErrorKind::Io);
  EXPECT_EQ(r.errors.at(0).path, f);
  EXPECT_EQ(r.errors.at(0).message, "has 9 bytes, more than the limit of 8 bytes; raise it with --max-bytes");
}

TEST_F(ReadRegularFile, RefusesWhatIsNotARegularFile) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(kernrt::read_regular_file(fifo, 100).errors.at(0).message, "is a FIFO, not a regular file");
  EXPECT_EQ(kernrt::read_regular_file("/dev/zero", 100).errors.at(0).message,
            "is a character device, not a regular file");
  EXPECT_EQ(kernrt::read_regular_file(dir_.string(), 100).errors.at(0).message,
            "is a directory, expected a regular file");
  EXPECT_EQ(kernrt::read_regular_file((dir_ / "absent").string(), 100).errors.at(0).message,
            "does not exist");
  EXPECT_EQ(kernrt::not_a_regular_file(fifo), std::optional<std::string>("is a FIFO, not a regular file"));
  EXPECT_EQ(kernrt::not_a_regular_file(write("ok", "x")), std::nullopt);
}

TEST(ParseByteCount, AcceptsDigitsAndBinarySuffixes) {
  EXPECT_EQ(kernrt::parse_byte_count("65536"), std::optional<uint64_t>(65536));
  EXPECT_EQ(kernrt::parse_byte_count("1K"), std::optional<uint64_t>(1024));
  EXPECT_EQ(kernrt::parse_byte_count("64M"), std::optional<uint64_t>(64u << 20));
  EXPECT_EQ(kernrt::parse_byte_count("2g"), std::optional<uint64_t>(uint64_t{2} << 30));
  for (const char* bad : {"", "0", "-1", "1.5M", "M", "12MB", "1 K", "99999999999999999999"}) {
    EXPECT_EQ(kernrt::parse_byte_count(bad), std::nullopt) << bad;
  }
}

}  // namespace

namespace {

// Registry references (§1.7): the grammar rule 9 checks and the fetcher downloads by.
TEST(RegistryRef, ParsesOrgRepoPathAndRevision) {
  auto r = kernrt::parse_registry_ref("hf:kernels-community/activation/build/x86_64/a.so@v0.2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->org, "kernels-community");
  EXPECT_EQ(r->repo, "activation");
  EXPECT_EQ(r->path, "build/x86_64/a.so");
  EXPECT_EQ(r->revision, "v0.2");
  EXPECT_EQ(kernrt::parse_registry_ref("hf:o/r/k.cubin")->revision, "main");
}

TEST(RegistryRef, RejectsMalformedReferences) {
  for (const char* bad : {"hf:", "hf:o", "hf:o/r", "hf:o/r/", "hf:/r/p", "hf:o//p", "hf:o/r/a//b",
                          "hf:o/r/./p", "hf:o/r/../p", "hf:o/r/p@", "hf:o/r/p@a/b", "k.cubin"}) {
    EXPECT_FALSE(kernrt::parse_registry_ref(bad)) << bad;
  }
  EXPECT_TRUE(kernrt::is_registry_source("hf:o"));
  EXPECT_FALSE(kernrt::is_registry_source("k.cubin"));
}

TEST(RegistryRef, BlobPathsAreContentAddressed) {
  EXPECT_EQ(kernrt::blob_path("/c", "ABcd"), "/c/blobs/abcd");
  EXPECT_EQ(kernrt::blob_path("", "abcd"), "");
}

}  // namespace
