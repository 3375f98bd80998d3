// The module store: artifacts found by SHA-256, never by name.
//
// Owns: hashing every artifact file (*.cubin, *.fatbin, *.so: a host shared library with
// CUDA kernels, see fatbin.hpp) in the given directories (sorted, deterministic), a small
// digest index under the cache dir keyed by path + size + mtime so a restart does not
// re-hash unchanged files, the content-addressed cache `<cache>/blobs/<sha256>`, and the
// final guard: the bytes returned are hashed again, so a file changed after indexing can
// never load under its old digest. Missing artifacts are Artifact errors naming the
// module, the expected hash and every place looked in. Does not talk to the driver and
// does not fetch registry (`hf:`) sources: the runtime never touches the network;
// kernrt-fetch puts them in `<cache>/blobs` (its error says so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

class ModuleStore {
 public:
  // Never fails: an unreadable directory or index just contributes nothing (a missing
  // module then names the places looked in).
  static ModuleStore open(const std::vector<std::string>& cubin_dirs, const std::string& cache_dir);

  // The verified bytes of `module` (named `name`), or an Artifact error at `path`;
  // `from` (when given) is set to the file they were read from.
  Result<std::vector<uint8_t>> load(const std::string& name, const manifest::Module& module,
                                    const std::string& path, std::string* from = nullptr) const;

  size_t files_hashed() const { return files_hashed_; }    // hashed by this open
  size_t files_indexed() const { return entries_.size(); } // artifact files seen
  std::string places() const;  // "`dir1`, `dir2`, `<cache>/blobs`"

 private:
  struct Entry {
    std::string path;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string sha256;
  };
  std::vector<std::string> dirs_;
  std::string cache_dir_;
  std::vector<Entry> entries_;
  size_t files_hashed_ = 0;
};

}  // namespace kernrt::rt
