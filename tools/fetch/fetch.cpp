// Registry downloads into the content-addressed cache (fetch.hpp): one libcurl easy
// transfer per attempt, written to `<sha256>.partial` and hashed as it arrives.
#include "fetch.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "kernrt/manifest/sha256.hpp"

namespace kernrt::fetch {
namespace {

using Clock = std::chrono::steady_clock;

Error artifact(const std::string& path, std::string message) {
  return Error{ErrorKind::Artifact, path, std::move(message), 0, 0};
}
Error io(const std::string& path, std::string message) {
  return Error{ErrorKind::Io, path, std::move(message), 0, 0};
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// Unreserved characters (RFC 3986) stay, everything else is %XX.
std::string encode_segment(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

// A token goes only where it cannot be read on the wire: https, or this machine.
bool token_allowed(const std::string& endpoint) {
  if (endpoint.rfind("https://", 0) == 0) return true;
  for (const char* local : {"http://127.0.0.1", "http://localhost", "http://[::1]"}) {
    const std::string p(local);
    if (endpoint.rfind(p, 0) == 0 && (endpoint.size() == p.size() || endpoint[p.size()] == ':' ||
                                      endpoint[p.size()] == '/')) {
      return true;
    }
  }
  return false;
}

void curl_init_once() {
  static const bool done = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)done;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// One transfer: the partial file, its hash so far, and what the callbacks saw.
struct Transfer {
  CURL* curl = nullptr;
  int fd = -1;
  Sha256* sha = nullptr;
  uint64_t start = 0;     // bytes already in the partial file (the Range start)
  uint64_t received = 0;  // body bytes written by this transfer
  uint64_t limit = 0;
  bool checked = false;   // the response's status was looked at (first body bytes)
  bool too_large = false;
  bool bad_resume = false;
  bool disk_error = false;
  std::string content_range;  // of the latest response
  // progress
  std::ostream* progress = nullptr;
  uint64_t progress_min = 0;
  std::string label;
  Clock::time_point last_report{};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) t->content_range.clear();  // a new response (redirects)
  if (line.size() > 14 && lower(line.substr(0, 14)) == "content-range:") {
    t->content_range = line.substr(14);
  }
  return size * n;
}

// The first body bytes decide how the response continues the partial file.
bool check_response(Transfer* t) {
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code == 206) {
    // "bytes <first>-<last>/<total>": it must continue exactly where the file ends.
    const size_t at = t->content_range.find("bytes ");
    const unsigned long long first =
        at == std::string::npos ? ~0ull : std::strtoull(t->content_range.c_str() + at + 6, nullptr, 10);
    if (first != t->start) {
      t->bad_resume = true;
      return false;
    }
  } else if (t->start != 0) {
    // The server sent the whole file (it ignored the Range): start the file over.
    if (::ftruncate(t->fd, 0) != 0 || ::lseek(t->fd, 0, SEEK_SET) != 0) {
      t->disk_error = true;
      return false;
    }
    t->sha->reset();
    t->start = 0;
  }
  return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->checked) {
    t->checked = true;
    if (!check_response(t)) return 0;
  }
  if (t->start + t->received + bytes > t->limit) {
    t->too_large = true;
    return 0;
  }
  for (size_t done = 0; done < bytes;) {
    const ssize_t w = ::write(t->fd, data + done, bytes - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      t->disk_error = true;
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  t->sha->update(data, bytes);
  t->received += bytes;
  return bytes;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  const uint64_t whole = t->start + static_cast<uint64_t>(total);
  if (total > 0 && whole > t->limit) {  // Content-Length says it is too large: stop now
    t->too_large = true;
    return 1;
  }
  if (t->progress == nullptr) return 0;
  const uint64_t have = t->start + static_cast<uint64_t>(now);
  if ((total > 0 ? whole : have) < t->progress_min) return 0;
  const auto at = Clock::now();
  if (at - t->last_report < std::chrono::seconds(1) && !(total > 0 && now == total)) return 0;
  t->last_report = at;
  *t->progress << "kernrt-fetch: `" << t->label << "` " << mib(have);
  if (total > 0) *t->progress << " of " << mib(whole) << " (" << (100 * have / whole) << " %)";
  *t->progress << "\n" << std::flush;
  return 0;
}

// Hashes the kept bytes of a partial download so a resume continues the same digest.
bool hash_existing(int fd, uint64_t size, Sha256* sha) {
  std::vector<char> buf(1 << 20);
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  for (uint64_t left = size; left > 0;) {
    const ssize_t r = ::read(fd, buf.data(), left < buf.size() ? left : buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    sha->update(buf.data(), static_cast<size_t>(r));
    left -= static_cast<uint64_t>(r);
  }
  return ::lseek(fd, 0, SEEK_END) >= 0;
}

struct Attempt {
  std::optional<Error> error;  // set when the attempt failed
  bool retry_from_zero = false;  // a resumed file hashed wrong: try once more from byte 0
  uint64_t received = 0;
  bool resumed = false;
};

// One transfer of `url` into `partial`; on success `partial` holds bytes hashing to `want`.
Attempt transfer(const std::string& name, const std::string& url, const std::string& partial,
                 const std::string& want, const std::string& where, const Options& o) {
  Attempt a;
  Fd f;
  f.fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
    a.error = io(partial, std::string("cannot open the partial download: ") + std::strerror(errno));
    return a;
  }
  if (!S_ISREG(st.st_mode)) {  // a FIFO planted here would block the read of its kept bytes
    a.error = io(partial, "the partial download is not a regular file: remove it");
    return a;
  }
  Sha256 sha;
  Transfer t;
  t.fd = f.fd;
  t.sha = &sha;
  t.start = static_cast<uint64_t>(st.st_size);
  t.limit = o.max_bytes;
  t.progress = o.progress;
  t.progress_min = o.progress_min_bytes;
  t.label = shortened(name);
  if (!hash_existing(f.fd, t.start, &sha)) {
    a.error = io(partial, "cannot read the partial download");
    return a;
  }
  a.resumed = t.start > 0;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    a.error = io(url, "libcurl could not start a transfer");
    return a;
  }
  t.curl = curl;
  char errbuf[CURL_ERROR_SIZE] = {};
  const std::string range = std::to_string(t.start) + "-";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);  // an error body never reaches the file
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "kernrt-fetch/" KERNRT_VERSION);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, o.stall_timeout_s);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  if (t.start > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  if (!o.token.empty() && token_allowed(o.endpoint)) {
    // Bearer auth through libcurl: it is not sent on to another host after a redirect.
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    curl_easy_setopt(curl, CURLOPT_XOAUTH2_BEARER, o.token.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  a.resumed = a.resumed && t.start > 0;  // a server that ignored the Range restarted it
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  a.received = t.received;
  const std::string so_far = std::to_string(t.start + t.received) + " bytes";
  const std::string detail = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  auto drop = [&] { std::remove(partial.c_str()); };
  struct DropIfEmpty {  // a failure before any byte arrived leaves no file behind
    const std::string& path;
    ~DropIfEmpty() {
      struct stat s {};
      if (::stat(path.c_str(), &s) == 0 && s.st_size == 0) std::remove(path.c_str());
    }
  } drop_if_empty{partial};

  if (t.too_large) {
    drop();
    a.error = artifact(where, "`" + url + "` serves more than the limit of " +
                                  with_commas(o.max_bytes) + " bytes: refused, nothing kept");
    return a;
  }
  if (t.bad_resume) {
    drop();
    a.error = io(where, "`" + url + "` answered the resume at byte " + std::to_string(t.start) +
                            " with another range (`" + t.content_range +
                            "`): the partial download was dropped, run again");
    return a;
  }
  if (t.disk_error) {
    a.error = io(partial, std::string("cannot write the download: ") + std::strerror(errno));
    return a;
  }
  const bool complete_already = rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && t.start > 0;
  if (rc != CURLE_OK && !complete_already) {
    if (rc == CURLE_HTTP_RETURNED_ERROR) {
      if (a.resumed) drop();  // nothing was added; start clean next time
      std::string why = "HTTP " + std::to_string(code);
      if (code == 401 || code == 403) {
        why += o.token.empty() ? " (access denied: set HF_TOKEN for a private or gated repo)"
                               : " (access denied for the HF_TOKEN given)";
      } else if (code == 404) {
        why += " (no such file or revision)";
      }
      a.error = artifact(where, "`" + url + "`: " + why);
      return a;
    }
    const bool stalled = rc == CURLE_OPERATION_TIMEDOUT;
    a.error = io(where, "download of `" + url + "` " +
                            (stalled ? "stalled (under 1 byte/s for " +
                                           std::to_string(o.stall_timeout_s) + " s)"
                                     : "stopped (" + detail + ")") +
                            " after " + so_far + "; the partial file is kept: run again to resume");
    return a;
  }
  const std::string got = sha.hex_final();
  if (got != want) {
    drop();
    a.retry_from_zero = a.resumed;
    a.error = artifact(where, "the " + so_far + " served at `" + url + "` have sha256 `" + got +
                                  "`, not the pinned `" + want + "`: refused, nothing was put "
                                  "in the cache");
    return a;
  }
  if (::fsync(f.fd) != 0) {
    a.error = io(partial, std::string("cannot sync the download: ") + std::strerror(errno));
  }
  return a;
}

}  // namespace

Options from_environment() {
  Options o;
  o.cache_dir = default_cache_dir();
  std::string endpoint = env("KERNRT_HF_ENDPOINT");
  if (endpoint.empty()) endpoint = env("HF_ENDPOINT");
  if (!endpoint.empty()) o.endpoint = endpoint;
  while (o.endpoint.size() > 1 && o.endpoint.back() == '/') o.endpoint.pop_back();
  o.token = env("HF_TOKEN");
  const std::string offline = lower(env("KERNRT_OFFLINE"));
  o.offline = offline == "1" || offline == "true" || offline == "yes";
  return o;
}

std::string resolve_url(const std::string& endpoint, const RegistryRef& ref) {
  std::string url = endpoint;
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += "/" + encode_segment(ref.org) + "/" + encode_segment(ref.repo) + "/resolve/" +
         encode_segment(ref.revision);
  size_t start = 0;
  while (start <= ref.path.size()) {
    const size_t end = std::min(ref.path.find('/', start), ref.path.size());
    url += "/" + encode_segment(ref.path.substr(start, end - start));
    start = end + 1;
  }
  return url;
}

Result<Fetched> fetch_module(const std::string& name, const manifest::Module& module,
                             const Options& o) {
  using R = Result<Fetched>;
  const std::string where = json_pointer_append("/modules", shortened(name));
  const std::string want = lower(module.sha256);
  auto ref = parse_registry_ref(module.source);
  if (!ref) {
    return R::fail(artifact(where, "source `" + shortened(module.source) +
                                       "` is not hf:<org>/<repo>/<path>[@revision]"));
  }
  if (o.cache_dir.empty()) {
    return R::fail(io(where, "no cache folder: set KERNRT_CACHE_DIR or HOME"));
  }
  const std::string blob = blob_path(o.cache_dir, want);
  std::error_code ec;
  std::filesystem::create_directories(o.cache_dir + "/blobs", ec);
  if (ec) return R::fail(io(o.cache_dir + "/blobs", "cannot create the cache folder: " + ec.message()));

  // One downloader per blob; a second process waits, then finds the blob in place.
  Fd lock;
  lock.fd = ::open((blob + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd < 0 || ::flock(lock.fd, LOCK_EX) != 0) {
    return R::fail(io(blob + ".lock", std::string("cannot lock: ") + std::strerror(errno)));
  }
  std::string changed;
  if (auto hit = verified_blob(o.cache_dir, want, &changed)) {
    struct stat st {};
    ::stat(hit->c_str(), &st);
    return R::ok(Fetched{*hit, Origin::cache, static_cast<uint64_t>(st.st_size), 0, false});
  }
  const std::string source = "module `" + shortened(name) + "` (`" + shortened(module.source) + "`)";
  if (o.offline) {
    return R::fail(artifact(where, "offline: " + source + " is not in `" + o.cache_dir + "/blobs`" +
                                       (changed.empty() ? "" : " (the blob there changed: sha256 `" +
                                                                   changed + "`)") +
                                       "; fetch it without KERNRT_OFFLINE / --offline"));
  }
  if (!changed.empty()) std::remove(blob.c_str());  // a changed blob is replaced

  curl_init_once();
  const std::string url = resolve_url(o.endpoint, *ref);
  const std::string partial = blob + ".partial";
  Attempt a = transfer(name, url, partial, want, where, o);
  uint64_t received = a.received;
  if (a.error && a.retry_from_zero) {
    a = transfer(name, url, partial, want, where, o);  // the kept part was stale
    received += a.received;
  }
  if (a.error) return R::fail(*a.error);
  if (std::rename(partial.c_str(), blob.c_str()) != 0) {
    return R::fail(io(blob, std::string("cannot move the download into place: ") + std::strerror(errno)));
  }
  struct stat st {};
  ::stat(blob.c_str(), &st);
  return R::ok(Fetched{blob, Origin::downloaded, static_cast<uint64_t>(st.st_size), received,
                       a.resumed});
}

}  // namespace kernrt::fetch
