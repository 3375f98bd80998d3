// SHA-256 through OpenSSL EVP. Files are streamed in 1 MiB chunks so a multi-gigabyte
// artifact needs no memory; an unreadable file is an Io error naming the file. It does
// not decide what a hash is compared with (that is the module store's job).
#include "kernrt/manifest/sha256.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <openssl/evp.h>

namespace kernrt {

namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string to_hex(const unsigned char* digest, unsigned int n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

Error io_error(const std::string& path, const std::string& message) {
  Error e;
  e.kind = ErrorKind::Io;
  e.path = path;
  e.message = message;
  return e;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  // One-shot EVP digest; failure here would mean OpenSSL itself is broken.
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr) != 1) return {};
  return to_hex(digest, n);
}

Result<std::string> sha256_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return Result<std::string>::fail(
        io_error(path, std::string("cannot open for reading: ") + std::strerror(errno)));
  }
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Result<std::string>::fail(io_error(path, "openssl sha256 initialisation failed"));
  }
  constexpr std::size_t kChunk = 1u << 20;  // 1 MiB
  std::vector<unsigned char> buf(kChunk);
  for (;;) {
    std::size_t got = std::fread(buf.data(), 1, kChunk, f.get());
    if (got > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), got) != 1) {
      return Result<std::string>::fail(io_error(path, "openssl sha256 update failed"));
    }
    if (got < kChunk) {
      if (std::ferror(f.get())) {
        return Result<std::string>::fail(io_error(path, std::string("read failed: ") + std::strerror(errno)));
      }
      break;
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &n) != 1) {
    return Result<std::string>::fail(io_error(path, "openssl sha256 finalisation failed"));
  }
  return Result<std::string>::ok(to_hex(digest, n));
}

}  // namespace kernrt

namespace kernrt {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { reset(); }

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::reset() { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }

void Sha256::update(const void* data, std::size_t n) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
}

std::string Sha256::hex_final() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &n);
  return to_hex(digest, n);
}

}  // namespace kernrt
