// SHA-256: known vectors (FIPS 180-2), a file larger than the 1 MiB read chunk, and Io
// errors that name the file.
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kernrt/manifest/sha256.hpp"

namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(kernrt::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(kernrt::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(kernrt::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(kernrt::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, FileMatchesBytesAcrossChunks) {
  std::string path = std::string(KERNRT_BINARY_DIR) + "/core_sha256_test.bin";
  std::string bytes;
  bytes.reserve(3u << 20);
  uint32_t x = 12345;
  for (std::size_t i = 0; i < (3u << 20) + 17; ++i) {
    x = x * 1664525u + 1013904223u;
    bytes.push_back(static_cast<char>(x >> 24));
  }
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto r = kernrt::sha256_file(path);
  ASSERT_TRUE(r) << r.errors[0].to_string();
  EXPECT_EQ(*r.value, kernrt::sha256_hex(bytes));
  std::remove(path.c_str());
}

TEST(Sha256, MissingFileIsIoErrorNamingIt) {
  std::string path = std::string(KERNRT_BINARY_DIR) + "/no/such/file.cubin";
  auto r = kernrt::sha256_file(path);
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].kind, kernrt::ErrorKind::Io);
  EXPECT_EQ(r.errors[0].path, path);
  EXPECT_NE(r.errors[0].message.find("cannot open"), std::string::npos);
}

TEST(Sha256, DirectoryIsIoError) {
  auto r = kernrt::sha256_file(KERNRT_BINARY_DIR);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errors[0].kind, kernrt::ErrorKind::Io);
  EXPECT_EQ(r.errors[0].path, KERNRT_BINARY_DIR);
}

}  // namespace

TEST(Sha256Incremental, PiecesHashLikeTheWhole) {
  kernrt::Sha256 h;
  h.update("ab", 2);
  h.update("c", 1);
  EXPECT_EQ(h.hex_final(), kernrt::sha256_hex("abc"));
  h.reset();
  h.update("x", 1);
  h.reset();
  EXPECT_EQ(h.hex_final(), kernrt::sha256_hex(""));
}
