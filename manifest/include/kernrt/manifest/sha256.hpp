// SHA-256 through OpenSSL EVP, streamed so multi-gigabyte files need no memory.
#pragma once

#include <string>
#include <string_view>

#include "kernrt/manifest/error.hpp"

namespace kernrt {

std::string sha256_hex(std::string_view bytes);          // lowercase hex
Result<std::string> sha256_file(const std::string& path);  // Io error names the file

}  // namespace kernrt
