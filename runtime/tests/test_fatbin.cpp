// Kernel artifacts that are host shared libraries (fatbin.hpp), on the CPU: the form of an
// artifact, `.nv_fatbin` split into its containers at 8-byte boundaries (each copied into
// aligned storage), and the errors of a corrupted library. Two sources: synthetic ELFs
// built here (exact layouts: padding, a trailing zero fill, each corruption), and the .so
// that nvcc builds from kernels/test/hostlib_{add,scale}.cu (the real layout: one
// container per translation unit); the latter is skipped when kernels are not built.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "fatbin.hpp"
#include "fixtures.hpp"
#include "kernrt/manifest/sha256.hpp"
#include "module_store.hpp"

namespace kernrt {
namespace {

using rt::ArtifactForm;

const std::string kHostLib = std::string(KERNRT_CUBIN_DIR) + "/libkernrt_test_hostlib.so";

template <class T>
void put(std::vector<uint8_t>& b, size_t at, T v) {
  if (b.size() < at + sizeof v) b.resize(at + sizeof v);
  std::memcpy(b.data() + at, &v, sizeof v);
}

// A fatbin container: the 16-byte header and `payload` bytes of `fill`.
std::vector<uint8_t> container(uint64_t payload, uint8_t fill) {
  std::vector<uint8_t> c(16 + payload, fill);
  put<uint32_t>(c, 0, rt::kFatbinMagic);
  put<uint16_t>(c, 4, 1);
  put<uint16_t>(c, 6, 16);
  put<uint64_t>(c, 8, payload);
  return c;
}

// A minimal little-endian ELF64 of machine `machine` whose sections are the null section,
// `.nv_fatbin` holding `fatbin`, and `.shstrtab`.
std::vector<uint8_t> elf(const std::vector<uint8_t>& fatbin, uint16_t machine = 62 /* x86-64 */,
                         const char* section_name = ".nv_fatbin") {
  std::vector<uint8_t> f(64, 0);
  f[0] = 0x7F; f[1] = 'E'; f[2] = 'L'; f[3] = 'F'; f[4] = 2; f[5] = 1; f[6] = 1;
  put<uint16_t>(f, 16, 3);  // ET_DYN
  put<uint16_t>(f, 18, machine);
  const std::string names = std::string("\0", 1) + section_name + std::string("\0.shstrtab\0", 11);
  const uint64_t fat_at = 64, names_at = fat_at + fatbin.size();
  f.insert(f.end(), fatbin.begin(), fatbin.end());
  f.insert(f.end(), names.begin(), names.end());
  while (f.size() % 8) f.push_back(0);
  const uint64_t shoff = f.size();
  put<uint64_t>(f, 0x28, shoff);
  put<uint16_t>(f, 0x3A, 64);
  put<uint16_t>(f, 0x3C, 3);
  put<uint16_t>(f, 0x3E, 2);
  f.resize(shoff + 3 * 64, 0);
  auto header = [&](int i, uint32_t name, uint32_t type, uint64_t off, uint64_t size) {
    const size_t h = shoff + 64 * static_cast<size_t>(i);
    put<uint32_t>(f, h, name);
    put<uint32_t>(f, h + 4, type);
    put<uint64_t>(f, h + 0x18, off);
    put<uint64_t>(f, h + 0x20, size);
  };
  header(1, 1, 1 /* PROGBITS */, fat_at, fatbin.size());
  header(2, static_cast<uint32_t>(1 + std::strlen(section_name) + 1), 3 /* STRTAB */, names_at, names.size());
  return f;
}

std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Result<std::vector<rt::ModuleImage>> split(const std::vector<uint8_t>& f) {
  return rt::module_images(f, "/modules/lib", "module `lib`");
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Fatbin, TellsArtifactFormsApart) {
  EXPECT_EQ(rt::artifact_form(elf({}, rt::kElfMachineCuda)), ArtifactForm::cubin);
  EXPECT_EQ(rt::artifact_form(elf(container(8, 1))), ArtifactForm::host_elf);
  EXPECT_EQ(rt::artifact_form({'P', 'T', 'X'}), ArtifactForm::other);
  auto cubin = split(elf({}, rt::kElfMachineCuda));
  ASSERT_TRUE(cubin);
  ASSERT_EQ(cubin.value->size(), 1u);  // a cubin is one image: the whole file
  EXPECT_EQ(cubin.value->at(0).offset, 0u);
}

TEST(Fatbin, SplitsContainersAtEightByteBoundariesIntoAlignedCopies) {
  // 16 + 13 bytes, padded to 32; then 16 + 24; then a zero fill to the section's end.
  const auto a = container(13, 0xAA), b = container(24, 0xBB);
  const auto f = elf(cat({a, std::vector<uint8_t>(3, 0), b, std::vector<uint8_t>(16, 0)}));
  auto r = split(f);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  ASSERT_EQ(r.value->size(), 2u);
  const rt::ModuleImage& first = r.value->at(0);
  const rt::ModuleImage& second = r.value->at(1);
  EXPECT_EQ(first.bytes, 29u);
  EXPECT_EQ(first.offset, 64u);
  EXPECT_EQ(second.bytes, 40u);
  EXPECT_EQ(second.offset, 64u + 32u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second.data()) % 8, 0u);
  EXPECT_EQ(std::memcmp(first.data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(second.data(), b.data(), b.size()), 0);
}

TEST(Fatbin, RefusesACorruptedContainer) {
  auto b = container(24, 0xBB);
  put<uint32_t>(b, 0, 0xDEADBEEF);
  auto bad_magic = split(elf(cat({container(16, 0xAA), b})));
  ASSERT_FALSE(bad_magic);
  EXPECT_EQ(bad_magic.errors.at(0).kind, ErrorKind::Artifact);
  EXPECT_EQ(bad_magic.errors.at(0).path, "/modules/lib");
  EXPECT_NE(bad_magic.errors.at(0).message.find(
                "module `lib` is a host shared library, but the container at offset 32 of "
                "`.nv_fatbin` has magic 0xdeadbeef, not 0xba55ed50"),
            std::string::npos)
      << bad_magic.errors.at(0).message;

  auto c = container(24, 0xCC);
  put<uint64_t>(c, 8, ~uint64_t{0} - 4);  // a payload size that wraps u64 when added
  auto wraps = split(elf(cat({container(16, 0xAA), c})));
  ASSERT_FALSE(wraps);
  EXPECT_NE(wraps.errors.at(0).message.find("the container at offset 32 of `.nv_fatbin` claims 16 + "),
            std::string::npos)
      << wraps.errors.at(0).message;
  const auto whole = container(24, 1);
  auto cut = split(elf(std::vector<uint8_t>(whole.begin(), whole.begin() + 12)));
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.errors.at(0).message.find("header at offset 0 of `.nv_fatbin` is cut off"), std::string::npos)
      << cut.errors.at(0).message;
}

TEST(Fatbin, RefusesAHostLibraryWithoutKernelsOrWithBrokenHeaders) {
  auto none = split(elf(container(8, 1), 62, ".rodata"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.errors.at(0).message.find("it has no `.nv_fatbin` section (no CUDA kernels)"), std::string::npos);
  auto empty = split(elf({}));
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.errors.at(0).message.find("holds no fatbin container"), std::string::npos)
      << empty.errors.at(0).message;
  auto f = elf(container(8, 1));
  put<uint64_t>(f, 0x28, uint64_t{1} << 62);  // section headers far past the end
  auto past = split(f);
  ASSERT_FALSE(past);
  EXPECT_NE(past.errors.at(0).message.find("section header table (3 entries at 4611686018427387904) does not fit"),
            std::string::npos)
      << past.errors.at(0).message;
}

class NvccHostLib : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = read_file(kHostLib);
    if (bytes_.empty()) GTEST_SKIP() << "built with KERNRT_BUILD_KERNELS=ON only: " << kHostLib;
  }
  std::vector<uint8_t> bytes_;
};

TEST_F(NvccHostLib, HasOneContainerPerTranslationUnit) {
  EXPECT_EQ(rt::artifact_form(bytes_), ArtifactForm::host_elf);
  auto r = split(bytes_);
  ASSERT_TRUE(r) << testing::all_messages(r.errors);
  ASSERT_GE(r.value->size(), 2u);  // hostlib_add.cu and hostlib_scale.cu (and nvcc's own, if any)
  size_t end = 0;
  for (const rt::ModuleImage& img : *r.value) {
    EXPECT_EQ(img.offset % 8, 0u);
    EXPECT_GE(img.offset, end);  // in file order, not overlapping
    end = img.offset + img.bytes;
    uint32_t magic = 0;
    std::memcpy(&magic, img.data(), sizeof magic);
    EXPECT_EQ(magic, rt::kFatbinMagic);
  }
}

TEST_F(NvccHostLib, CorruptingItsSecondContainerIsNamed) {
  auto r = split(bytes_);
  ASSERT_TRUE(r && r.value->size() >= 2);
  const size_t second = r.value->at(1).offset;
  std::vector<uint8_t> bad = bytes_;
  bad[second] ^= 0xFF;
  auto refused = split(bad);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.errors.at(0).message.find("has magic 0xba55edaf, not 0xba55ed50"), std::string::npos)
      << refused.errors.at(0).message;
}

TEST_F(NvccHostLib, IsFoundByTheHashOfTheWholeFile) {
  testing::TempDir dir, cache;
  testing::write_bytes(dir.file("libanything.so"), std::string(bytes_.begin(), bytes_.end()));
  auto store = rt::ModuleStore::open({dir.path()}, cache.path());
  manifest::Module m{"libkernrt_test_hostlib.so", sha256_hex(std::string(bytes_.begin(), bytes_.end()))};
  std::string from;
  auto got = store.load("hostlib", m, "/modules/hostlib", &from);
  ASSERT_TRUE(got) << testing::all_messages(got.errors);
  EXPECT_EQ(got.value->size(), bytes_.size());
  EXPECT_EQ(from, dir.file("libanything.so"));
}

}  // namespace
}  // namespace kernrt
