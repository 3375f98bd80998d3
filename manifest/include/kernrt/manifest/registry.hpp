// Registry module references and the artifact cache layout (reference/kern-schema.md §1.7).
//
// A module's `source` is a label; its sha256 is its identity. A source that starts with
// `hf:` names a file in a Hugging Face hub repository, `hf:<org>/<repo>/<path>[@revision]`
// (revision `main` when absent). Downloaded artifacts live in a content-addressed cache,
// `<cache dir>/blobs/<sha256>`, shared by the fetcher (kernrt::fetch), the runtime's module
// store and kernrt-verify. This file owns the reference grammar and the cache paths only:
// it does no I/O beyond reading environment variables, and it does not check hashes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

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

}  // namespace kernrt
