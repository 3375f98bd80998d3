// Registry references and cache paths (registry.hpp).
#include "kernrt/manifest/registry.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "kernrt/manifest/sha256.hpp"

namespace kernrt {

bool is_registry_source(std::string_view source) { return source.rfind("hf:", 0) == 0; }

std::optional<RegistryRef> parse_registry_ref(std::string_view source) {
  if (!is_registry_source(source)) return std::nullopt;
  std::string_view rest = source.substr(3);
  RegistryRef ref;
  ref.revision = "main";
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view rev = rest.substr(at + 1);
    if (rev.empty() || rev.find('/') != std::string_view::npos) return std::nullopt;
    ref.revision = std::string(rev);
    rest = rest.substr(0, at);
  }
  const size_t s1 = rest.find('/');
  if (s1 == std::string_view::npos || s1 == 0) return std::nullopt;
  const size_t s2 = rest.find('/', s1 + 1);
  if (s2 == std::string_view::npos || s2 == s1 + 1) return std::nullopt;
  ref.org = std::string(rest.substr(0, s1));
  ref.repo = std::string(rest.substr(s1 + 1, s2 - s1 - 1));
  const std::string_view path = rest.substr(s2 + 1);
  size_t start = 0;
  while (true) {
    const size_t end = path.find('/', start);
    const std::string_view seg = path.substr(start, end == std::string_view::npos ? end : end - start);
    if (seg.empty() || seg == "." || seg == "..") return std::nullopt;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  ref.path = std::string(path);
  return ref;
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("KERNRT_CACHE_DIR"); d && *d) return d;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kernrt";
  return "";
}

std::string blob_path(const std::string& cache_dir, const std::string& sha256) {
  if (cache_dir.empty()) return "";
  std::string lower = sha256;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return cache_dir + "/blobs/" + lower;
}

Result<std::map<std::string, std::string>> hash_files_in(const std::string& dir) {
  namespace fs = std::filesystem;
  using R = Result<std::map<std::string, std::string>>;
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code kind_ec;
    if (it->is_regular_file(kind_ec)) files.push_back(it->path().string());
  }
  if (ec) return R::fail(Error{ErrorKind::Io, dir, ec.message(), 0, 0});
  std::sort(files.begin(), files.end());
  std::map<std::string, std::string> out;
  for (const std::string& f : files) {
    Result<std::string> h = sha256_file(f);
    if (!h.value) return R::fail(std::move(h.errors));
    out.emplace(*h.value, f);  // sha256_file is lowercase hex; the first path is kept
  }
  return R::ok(std::move(out));
}

std::optional<std::string> verified_blob(const std::string& cache_dir, const std::string& sha256,
                                         std::string* changed) {
  const std::string path = blob_path(cache_dir, sha256);
  if (path.empty()) return std::nullopt;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  Result<std::string> h = sha256_file(path);
  if (!h.value) return std::nullopt;
  std::string want = sha256;
  for (char& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (*h.value == want) return path;
  if (changed) *changed = *h.value;
  return std::nullopt;
}

}  // namespace kernrt
