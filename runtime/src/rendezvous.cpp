// Rendezvous (see rendezvous.hpp): files published with link(2) so that an existing name
// fails instead of being replaced, polled for with a deadline; descriptors passed with
// SCM_RIGHTS over unix-domain stream sockets, all non-blocking in one poll loop so that two
// ranks connecting to each other at the same moment cannot wait on each other.
#include "rendezvous.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace kernrt::rt {
namespace {

using Clock = std::chrono::steady_clock;

Error io(const std::string& path, const std::string& message) {
  return Error{ErrorKind::Io, path, message};
}

std::string errno_text() { return std::strerror(errno); }

// What a rank sends with each descriptor: who it is, what it shares and how big it is.
struct Header {
  char magic[8];
  char tag[48];
  uint64_t rank;
  uint64_t bytes;
};
constexpr char kMagic[8] = {'k', 'e', 'r', 'n', 'r', 't', 'f', 'd'};

void fill_tag(char (&out)[48], const std::string& tag) {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, tag.data(), std::min(tag.size(), sizeof out - 1));
}

// One header and room for one descriptor, as sendmsg / recvmsg take them (msg points into
// the object itself, so it is never copied).
struct FdMessage {
  explicit FdMessage(Header* h) : iov{h, sizeof *h} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

bool send_fd(int sock, Header h, int fd) {
  FdMessage m(&h);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &m.msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof h);
}

// 1: received; 0: nothing yet; -1: the connection failed or sent something else.
int recv_fd(int sock, Header* h, int* fd) {
  FdMessage m(h);
  const ssize_t n = recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n != static_cast<ssize_t>(sizeof *h)) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) return -1;
  std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  return 1;
}

bool socket_address(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace

std::optional<Error> Rendezvous::publish(const std::string& name, const std::string& bytes) const {
  const std::string final_path = path(name);
  const std::string tmp = final_path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !out.flush()) {
      return io(dir_, "cannot write `" + tmp + "` in the rendezvous directory (does `" + dir_ +
                          "` exist and is it writable?)");
    }
  }
  const int rc = link(tmp.c_str(), final_path.c_str());
  const int err = errno;
  unlink(tmp.c_str());
  if (rc != 0) {
    if (err == EEXIST) {
      return io(final_path, "`" + final_path + "` already exists: the rendezvous directory holds "
                            "an earlier job's files; give every job a fresh directory");
    }
    return io(final_path, "cannot publish `" + final_path + "`: " + std::strerror(err));
  }
  return std::nullopt;
}

Result<std::string> Rendezvous::wait(const std::string& name, const std::string& who) const {
  const std::string p = path(name);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    std::ifstream in(p, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      return Result<std::string>::ok(s.str());
    }
    if (Clock::now() > deadline) {
      std::ostringstream t;
      t << timeout_s_;
      return Result<std::string>::fail(io(p, who + " did not publish `" + p + "` within " + t.str() +
                                                 " s (is it running, with the same rendezvous directory?)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Result<std::vector<Rendezvous::Shared>> Rendezvous::exchange_fds(const std::string& tag, uint64_t rank,
                                                                 uint64_t size, int fd,
                                                                 uint64_t bytes) const {
  using R = Result<std::vector<Shared>>;
  std::vector<Shared> out(size);
  out[rank] = Shared{fd, bytes};
  if (size == 1) return R::ok(std::move(out));
  auto sock_path = [&](uint64_t r) { return path("fd." + tag + "." + std::to_string(r)); };
  const std::string mine = sock_path(rank);
  sockaddr_un addr{};
  if (!socket_address(mine, &addr)) {
    return R::fail(io(mine, "the socket path `" + mine + "` is longer than a unix socket allows (" +
                                std::to_string(sizeof addr.sun_path - 1) + " bytes): use a shorter "
                                "rendezvous directory"));
  }
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) return R::fail(io(mine, "socket(AF_UNIX) failed: " + errno_text()));
  std::vector<int> conn(size, -1);
  bool listening = false;
  auto cleanup = [&](bool drop_received) {
    for (int& c : conn) {
      if (c >= 0) close(c);
      c = -1;
    }
    close(listener);
    if (listening) unlink(mine.c_str());
    if (drop_received) {
      for (uint64_t r = 0; r < size; ++r) {
        if (r != rank && out[r].fd >= 0) close(out[r].fd);
      }
    }
  };
  if (bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = errno == EADDRINUSE
        ? "already exists: the rendezvous directory holds an earlier job's files; give every "
          "job a fresh directory"
        : "cannot be bound: " + errno_text();
    cleanup(false);
    return R::fail(io(mine, "socket `" + mine + "` " + why));
  }
  listening = true;
  if (listen(listener, static_cast<int>(size)) != 0) {
    const std::string why = errno_text();
    cleanup(false);
    return R::fail(io(mine, "listen on `" + mine + "` failed: " + why));
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  fill_tag(h.tag, tag);
  h.rank = rank;
  h.bytes = bytes;
  uint64_t served = 0, received = 0;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  while (served + 1 < size || received + 1 < size) {
    if (Clock::now() > deadline) {
      std::string missing;
      for (uint64_t r = 0; r < size; ++r) {
        if (r != rank && out[r].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      std::ostringstream t;
      t << timeout_s_;
      cleanup(true);
      return R::fail(io(dir_, "`" + tag + "`: rank " + std::to_string(rank) + " did not hear from " +
                                  (missing.empty() ? "every rank it serves" : "rank(s) " + missing) +
                                  " within " + t.str() + " s"));
    }
    // Connect to every member not heard from yet (its socket may not exist yet: retry).
    for (uint64_t r = 0; r < size; ++r) {
      if (r == rank || out[r].fd >= 0 || conn[r] >= 0) continue;
      sockaddr_un to{};
      socket_address(sock_path(r), &to);
      const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s < 0) continue;
      if (connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0 || errno == EINPROGRESS) {
        conn[r] = s;
      } else {
        close(s);
      }
    }
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    std::vector<uint64_t> who{size};
    for (uint64_t r = 0; r < size; ++r) {
      if (conn[r] >= 0) {
        fds.push_back({conn[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    if (poll(fds.data(), fds.size(), 5) < 0 && errno != EINTR) {
      const std::string why = errno_text();
      cleanup(true);
      return R::fail(io(dir_, "poll failed: " + why));
    }
    if (fds[0].revents & POLLIN) {
      const int a = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (a >= 0) {
        if (send_fd(a, h, fd)) ++served;
        close(a);
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const uint64_t r = who[i];
      Header got{};
      int rfd = -1;
      const int st = recv_fd(conn[r], &got, &rfd);
      if (st == 0) continue;
      close(conn[r]);
      conn[r] = -1;
      if (st < 0) continue;  // a failed connection: connect again
      char want[48];
      fill_tag(want, tag);
      if (std::memcmp(got.magic, kMagic, sizeof kMagic) != 0 || std::memcmp(got.tag, want, sizeof want) != 0 ||
          got.rank != r) {
        close(rfd);
        cleanup(true);
        return R::fail(io(sock_path(r), "`" + sock_path(r) + "` answered with something other than "
                                        "rank " + std::to_string(r) + "'s `" + tag + "`"));
      }
      out[r] = Shared{rfd, got.bytes};
      ++received;
    }
  }
  cleanup(false);
  return R::ok(std::move(out));
}

}  // namespace kernrt::rt
