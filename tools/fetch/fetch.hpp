// kernrt::fetch: registry (`hf:`) modules downloaded into the content-addressed cache
// (reference/kern-schema.md §1.7, §3.1), for kernrt-fetch. No GPU, no CUDA.
//
// Contract: `<cache>/blobs/<sha256>` only ever holds bytes whose SHA-256 is that name. A
// download is hashed while it is written to `<sha256>.partial` in the same folder and
// renamed into place only when the hash matches the manifest's pin; wrong bytes are
// deleted and reported with both hashes, so the transport is never trusted. A transfer cut
// off or stalled keeps its partial file, and the next fetch resumes it with an HTTP Range
// request (re-hashing the kept bytes first; a server that ignores the range restarts the
// file). One process at a time downloads a blob (flock on `<sha256>.lock`). Offline mode
// uses the cache only. A cache hit is re-hashed; a changed blob is replaced online and
// refused offline.
//
// libcurl is linked, into this small static library only (kernrt::fetch), which only
// kernrt-fetch links: the manifest library and libkernrt never reach the network and
// never depend on libcurl, so they still start on any GPU machine; libcurl's C ABI has
// been libcurl.so.4 since 2006 and the build needs its headers either way, so dlopen would
// only trade curl's type-checked curl_easy_setopt for hand-kept function pointers.
//
// Deliberately not done: hub API calls (file lists, revisions to commits: the pin is the
// hash, not the revision), parallel downloads, proxies beyond libcurl's own environment
// variables (http_proxy, https_proxy, no_proxy), and any check of what the bytes are.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/registry.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::fetch {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";

struct Options {
  std::string cache_dir;  // the folder holding blobs/; "" = no cache (every fetch fails)
  std::string endpoint = kDefaultEndpoint;  // hub base URL, without a trailing slash
  std::string token;      // bearer token sent to the endpoint's host only ("" = none)
  bool offline = false;   // the cache only, never the network
  uint64_t max_bytes = uint64_t{4} << 30;  // a larger artifact is refused while it streams
  long connect_timeout_s = 30;
  long stall_timeout_s = 30;  // below 1 byte/s for this long ends the transfer (kept to resume)
  uint64_t progress_min_bytes = uint64_t{16} << 20;  // downloads at least this large report progress
  std::ostream* progress = nullptr;  // one line per second while downloading; nullptr = quiet
};

// Options from the environment: cache_dir = kernrt::default_cache_dir(); endpoint =
// $KERNRT_HF_ENDPOINT, else $HF_ENDPOINT, else https://huggingface.co; token = $HF_TOKEN;
// offline = $KERNRT_OFFLINE is 1, true or yes.
Options from_environment();

// `<endpoint>/<org>/<repo>/resolve/<revision>/<path>`, every segment percent-encoded.
std::string resolve_url(const std::string& endpoint, const RegistryRef& ref);

enum class Origin { cache, downloaded };

struct Fetched {
  std::string path;  // the verified blob
  Origin origin = Origin::cache;
  uint64_t bytes = 0;    // the blob's size
  uint64_t received = 0;  // bytes transferred by this call (a resume counts the rest only)
  bool resumed = false;
};

// Makes `<cache>/blobs/<sha256>` hold `module`'s bytes, verified. `module.source` must be
// a valid registry reference (rule 9). Errors: Artifact for what the hub serves (404, a
// wrong hash, access denied, too large) or an offline miss; Io for the network and the
// disk (the partial download, if any, is kept for a resume). `name` is for messages.
Result<Fetched> fetch_module(const std::string& name, const manifest::Module& module,
                             const Options& options);

}  // namespace kernrt::fetch
