// Reading input files that a user names: only regular files, only up to a size limit.
//
// Contract: a FIFO, a character or block device (/dev/zero), a socket or a directory is an
// Io error naming the file and what it is, found without reading (so a FIFO never blocks:
// the file is opened non-blocking and checked with fstat on the same descriptor); a file
// larger than the limit is an Io error before any byte is kept (and a file that grows
// while read is cut off at limit + 1 and refused). Symlinks are followed. It does not
// check permissions beyond what open(2) says, and it does not lock the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernrt/manifest/error.hpp"

namespace kernrt {

// The default input size limit for a manifest: 64 MiB (the largest shipped manifest is a
// few MB; a 50 MB unrolled model verifies in seconds).
inline constexpr uint64_t kDefaultMaxManifestBytes = uint64_t{64} << 20;

// The whole file, or an Io error (path = the file): "is a directory, expected a regular
// file", "is a FIFO, not a regular file", "has N bytes, more than the limit of M bytes"
// (followed by "; raise it with FLAG" when `limit_flag` names the option that sets it).
Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes,
                                      const char* limit_flag = nullptr);

// nullopt when `path` names a regular file (after symlinks), else why not, in the words
// read_regular_file uses ("does not exist", "is a directory, expected a regular file", ...).
std::optional<std::string> not_a_regular_file(const std::string& path);

// Parses a byte count for a size flag: digits, optionally followed by K, M or G (binary:
// KiB, MiB, GiB), e.g. "64M". nullopt for anything else, 0, or a value above 2^62.
std::optional<uint64_t> parse_byte_count(const std::string& text);

}  // namespace kernrt
