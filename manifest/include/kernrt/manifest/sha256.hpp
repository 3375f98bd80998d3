// SHA-256 through OpenSSL EVP, streamed so multi-gigabyte files need no memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"

namespace kernrt {

std::string sha256_hex(std::string_view bytes);          // lowercase hex
Result<std::string> sha256_file(const std::string& path);  // Io error names the file

// An incremental SHA-256, for bytes that arrive in pieces (a download hashed while it is
// written, a resumed download whose first part is already on disk).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t n);
  void reset();             // start over, as if just constructed
  std::string hex_final();  // lowercase hex of everything updated since the last reset
 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace kernrt
