// Kernel artifacts as the driver loads them (reference/kern-schema.md §1.7, §3.1).
//
// An artifact is one file pinned by the SHA-256 of all its bytes; the module store has
// checked that hash. It is split here into the images cuModuleLoadData takes:
// - a CUDA ELF (a cubin: ELF64 with e_machine 190, EM_CUDA) is one image;
// - a host ELF64 (a shared library with CUDA code, such as a torch extension .so) keeps
//   its kernels in the `.nv_fatbin` section, fatbin containers laid end to end, each at an
//   8-byte boundary and starting with a 16-byte header: u32 magic 0xBA55ED50, u16 version,
//   u16 header size, u64 payload size; every container is one image (nvcc writes one per
//   translation unit);
// - anything else (a bare fatbin, PTX text) is one image and the driver decides.
// Each image is copied into 8-byte aligned storage (the driver reads fatbin headers as
// 64-bit words). Pure: no driver. The loader loads every image and looks an entry up in
// each in order until it is found.
// Deliberately not checked: what a container holds (architectures, compression): the
// driver says whether it loads on this device; big-endian or 32-bit host ELFs are "other".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"

namespace kernrt::rt {

inline constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
inline constexpr uint16_t kElfMachineCuda = 190;

enum class ArtifactForm { cubin, host_elf, other };

struct ModuleImage {
  std::vector<uint64_t> words;  // the image's bytes, 8-byte aligned
  size_t bytes = 0;
  size_t offset = 0;            // where it starts in the artifact file
  const void* data() const { return words.data(); }
};

ArtifactForm artifact_form(const std::vector<uint8_t>& file);

// The images of an artifact; for a host ELF, an Artifact error at `path` when it has no
// `.nv_fatbin` section, a section header or container that runs past the file, a bad
// container magic, or no container at all (`what` names the module in messages).
Result<std::vector<ModuleImage>> module_images(const std::vector<uint8_t>& file,
                                               const std::string& path, const std::string& what);

}  // namespace kernrt::rt
