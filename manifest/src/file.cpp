// Reading named input files (file.hpp): regular files only, up to a limit, never blocking
// on a FIFO. POSIX open/fstat/read; no C++ streams (an ifstream on a FIFO blocks in open).
#include "kernrt/manifest/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kernrt {
namespace {

Error io_error(const std::string& path, std::string message) {
  return Error{ErrorKind::Io, path, std::move(message), 0, 0};
}

// What a non-regular file is, for the message.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, expected a regular file";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string> not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? std::string("does not exist")
                           : std::string("cannot be read: ") + std::strerror(errno);
  }
  if (S_ISREG(st.st_mode)) return std::nullopt;
  return kind_of(st.st_mode);
}

Result<std::string> read_regular_file(const std::string& path, uint64_t max_bytes,
                                      const char* limit_flag) {
  using R = Result<std::string>;
  Fd f;
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever.
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f.fd < 0) {
    if (errno == ENOENT) return R::fail(io_error(path, "does not exist"));
    return R::fail(io_error(path, std::string("cannot open for reading: ") + std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return R::fail(io_error(path, std::string("cannot stat: ") + std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return R::fail(io_error(path, kind_of(st.st_mode)));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto too_large = [&](uint64_t n, const char* how) {
    return R::fail(io_error(path, std::string("has ") + how + with_commas(n) +
                                      " bytes, more than the limit of " +
                                      with_commas(max_bytes) + " bytes" +
                                      (limit_flag ? std::string("; raise it with ") + limit_flag
                                                  : std::string())));
  };
  if (size > max_bytes) return too_large(size, "");
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (got > max_bytes) return too_large(got, "at least ");
      // The file may have grown since fstat: read on in steps, up to limit + 1.
      const uint64_t room = max_bytes + 1 - got;
      text.resize(got + static_cast<std::size_t>(room < (1u << 20) ? room : (1u << 20)));
    }
    const ssize_t n = ::read(f.fd, &text[got], text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return R::fail(io_error(path, std::string("read failed: ") + std::strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_bytes) return too_large(got, "at least ");
  text.resize(got);
  return R::ok(std::move(text));
}

std::optional<uint64_t> parse_byte_count(const std::string& text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  uint64_t v = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
    if (v > (uint64_t{1} << 62)) return std::nullopt;
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i + 1 == text.size()) {
    switch (text[i]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: return std::nullopt;
    }
  } else if (i != text.size()) {
    return std::nullopt;
  }
  if (v == 0 || v > ((uint64_t{1} << 62) >> shift)) return std::nullopt;
  return v << shift;
}

}  // namespace kernrt
