// Artifact forms and `.nv_fatbin` container splitting (fatbin.hpp). Every offset read from
// the file is bounds-checked with checked arithmetic before use: a hostile .so gets an
// error naming the offset, never a read past the buffer.
#include "fatbin.hpp"

#include <cstring>
#include <optional>

namespace kernrt::rt {
namespace {

template <class T>
T read_le(const std::vector<uint8_t>& b, size_t at) {
  T v{};
  std::memcpy(&v, b.data() + at, sizeof v);  // x86-64 and aarch64 are little-endian
  return v;
}

// [at, at + n) lies inside a buffer of `size` bytes.
bool inside(uint64_t at, uint64_t n, uint64_t size) {
  uint64_t end = 0;
  return !__builtin_add_overflow(at, n, &end) && end <= size;
}

bool is_elf64_le(const std::vector<uint8_t>& f) {
  return f.size() >= 64 && f[0] == 0x7F && f[1] == 'E' && f[2] == 'L' && f[3] == 'F' &&
         f[4] == 2 /* ELFCLASS64 */ && f[5] == 1 /* ELFDATA2LSB */;
}

ModuleImage image_of(const std::vector<uint8_t>& f, size_t at, size_t n) {
  ModuleImage img;
  img.words.assign((n + 7) / 8, 0);
  std::memcpy(img.words.data(), f.data() + at, n);
  img.bytes = n;
  img.offset = at;
  return img;
}

std::string hex32(uint32_t v) {
  static const char kHex[] = "0123456789abcdef";
  std::string s = "0x";
  for (int d = 7; d >= 0; --d) s.push_back(kHex[(v >> (4 * d)) & 0xF]);
  return s;
}

}  // namespace

ArtifactForm artifact_form(const std::vector<uint8_t>& file) {
  if (!is_elf64_le(file)) return ArtifactForm::other;
  return read_le<uint16_t>(file, 18) == kElfMachineCuda ? ArtifactForm::cubin : ArtifactForm::host_elf;
}

Result<std::vector<ModuleImage>> module_images(const std::vector<uint8_t>& f, const std::string& path,
                                               const std::string& what) {
  using R = Result<std::vector<ModuleImage>>;
  std::vector<ModuleImage> images;
  if (artifact_form(f) != ArtifactForm::host_elf) {
    images.push_back(image_of(f, 0, f.size()));
    return R::ok(std::move(images));
  }
  auto fail = [&](const std::string& why) {
    return R::fail(Error{ErrorKind::Artifact, path, what + " is a host shared library, but " + why, 0, 0});
  };
  // ELF64 header: e_shoff @0x28, e_shentsize @0x3A, e_shnum @0x3C, e_shstrndx @0x3E.
  const uint64_t shoff = read_le<uint64_t>(f, 0x28);
  const uint16_t shentsize = read_le<uint16_t>(f, 0x3A);
  const uint16_t shnum = read_le<uint16_t>(f, 0x3C);
  const uint16_t shstrndx = read_le<uint16_t>(f, 0x3E);
  if (shnum == 0) return fail("it has no section headers (no `.nv_fatbin`: no CUDA kernels)");
  if (shentsize < 64 || shstrndx >= shnum || !inside(shoff, uint64_t{shnum} * shentsize, f.size())) {
    return fail("its section header table (" + std::to_string(shnum) + " entries at " +
                std::to_string(shoff) + ") does not fit in its " + std::to_string(f.size()) + " bytes");
  }
  struct Section {
    uint32_t name, type;
    uint64_t offset, size;
  };
  auto section = [&](uint16_t i) {
    const size_t h = static_cast<size_t>(shoff + uint64_t{i} * shentsize);
    return Section{read_le<uint32_t>(f, h), read_le<uint32_t>(f, h + 4), read_le<uint64_t>(f, h + 0x18),
                   read_le<uint64_t>(f, h + 0x20)};
  };
  const Section names = section(shstrndx);
  if (!inside(names.offset, names.size, f.size())) return fail("its section name table runs past the file");
  static const char kWanted[] = ".nv_fatbin";
  std::optional<Section> fatbin;
  for (uint16_t i = 0; i < shnum && !fatbin; ++i) {
    const Section s = section(i);
    if (s.name >= names.size || names.size - s.name < sizeof kWanted) continue;
    if (std::memcmp(f.data() + names.offset + s.name, kWanted, sizeof kWanted) == 0) fatbin = s;
  }
  if (!fatbin) return fail("it has no `.nv_fatbin` section (no CUDA kernels)");
  if (fatbin->type == 8 /* SHT_NOBITS */ || !inside(fatbin->offset, fatbin->size, f.size())) {
    return fail("its `.nv_fatbin` section (" + std::to_string(fatbin->size) + " bytes at " +
                std::to_string(fatbin->offset) + ") is not inside its " + std::to_string(f.size()) + " bytes");
  }
  const uint64_t base = fatbin->offset, size = fatbin->size;
  auto all_zero = [&](uint64_t from) {
    for (uint64_t i = from; i < size; ++i) {
      if (f[base + i] != 0) return false;
    }
    return true;
  };
  for (uint64_t p = 0; p < size;) {
    if (all_zero(p)) break;  // padding after the last container
    if (!inside(p, 16, size)) {
      return fail("a container header at offset " + std::to_string(p) + " of `.nv_fatbin` is cut off");
    }
    const uint32_t magic = read_le<uint32_t>(f, base + p);
    if (magic != kFatbinMagic) {
      return fail("the container at offset " + std::to_string(p) + " of `.nv_fatbin` has magic " +
                  hex32(magic) + ", not " + hex32(kFatbinMagic));
    }
    const uint16_t header = read_le<uint16_t>(f, base + p + 6);
    const uint64_t payload = read_le<uint64_t>(f, base + p + 8);
    uint64_t total = 0;
    if (header < 16 || __builtin_add_overflow(uint64_t{header}, payload, &total) || !inside(p, total, size)) {
      return fail("the container at offset " + std::to_string(p) + " of `.nv_fatbin` claims " +
                  std::to_string(header) + " + " + std::to_string(payload) + " bytes, past the end of the " +
                  std::to_string(size) + "-byte section");
    }
    images.push_back(image_of(f, static_cast<size_t>(base + p), static_cast<size_t>(total)));
    p += total;
    p = (p + 7) / 8 * 8;  // containers start at 8-byte boundaries
  }
  if (images.empty()) return fail("its `.nv_fatbin` section holds no fatbin container");
  return R::ok(std::move(images));
}

}  // namespace kernrt::rt
