// Registry module references and the artifact cache layout (reference/kern-schema.md §1.7).
//
// A module's `source` is a label; its sha256 is its identity. A source that starts with
// `hf:` names a file in a Hugging Face hub repository, `hf:<org>/<repo>/<path>[@revision]`
// (revision `main` when absent). Downloaded artifacts live in a content-addressed cache,
// `<cache dir>/blobs/<sha256>`, shared by the fetcher (kernrt::fetch), the runtime's module
// store and kernrt-verify. This file owns the reference grammar, the cache paths, and the
// two lookups every tool shares: the files of a directory by hash, and a verified cache
// hit (the blob re-hashed, so a changed or truncated blob never counts). It never
// downloads (that is kernrt::fetch) and never loads an artifact.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"

namespace kernrt {

struct RegistryRef {
  std::string org;
  std::string repo;
  std::string path;      // one or more `/`-separated segments, none empty, `.` or `..`
  std::string revision;  // "main" when the reference gives none
};

// True when `source` is meant as a registry reference (starts with `hf:`), valid or not.
bool is_registry_source(std::string_view source);

// The reference, or nullopt when `source` is not `hf:<org>/<repo>/<path>[@revision]`
// with org, repo and path non-empty, no empty / `.` / `..` path segment, and a revision
// (after the last `@`) that is non-empty and has no `/`.
std::optional<RegistryRef> parse_registry_ref(std::string_view source);

// $KERNRT_CACHE_DIR, else $HOME/.cache/kernrt, else "" (no cache).
std::string default_cache_dir();

// `<cache_dir>/blobs/<sha256>` with the hash lowercased; "" when cache_dir is "".
std::string blob_path(const std::string& cache_dir, const std::string& sha256);

// lowercase sha256 -> path of every regular file directly in `dir` (sorted by path; the
// first path wins for identical bytes). An Io error names the file or dir that failed.
Result<std::map<std::string, std::string>> hash_files_in(const std::string& dir);

// The blob's path when `<cache_dir>/blobs/<sha256>` exists and its bytes hash to
// `sha256`; nullopt otherwise (absent, unreadable, or changed: `*changed` is then set
// to the hash found, when given).
std::optional<std::string> verified_blob(const std::string& cache_dir, const std::string& sha256,
                                         std::string* changed = nullptr);

}  // namespace kernrt
