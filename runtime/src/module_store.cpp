// Module store (see module_store.hpp). The index file is `<cache>/cubin-index.tsv`, one
// line per file: sha256 TAB size TAB mtime_ns TAB path. It is rewritten through a temp
// file and rename, so a crash never leaves a torn index; a missing or unwritable cache dir
// only costs re-hashing.
#include "module_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "kernrt/manifest/registry.hpp"
#include "kernrt/manifest/sha256.hpp"

namespace kernrt::rt {
namespace fs = std::filesystem;

namespace {

bool stat_file(const std::string& path, uint64_t* size, int64_t* mtime_ns) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *size = static_cast<uint64_t>(st.st_size);
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

bool read_all(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  const auto size = in.tellg();
  if (size < 0) return false;
  out->resize(static_cast<size_t>(size));
  in.seekg(0);
  return static_cast<bool>(in.read(reinterpret_cast<char*>(out->data()), size));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ModuleStore ModuleStore::open(const std::vector<std::string>& cubin_dirs,
                              const std::string& cache_dir) {
  ModuleStore store;
  store.dirs_ = cubin_dirs;
  store.cache_dir_ = cache_dir;

  // Previous digests: (path, size, mtime) -> sha256.
  std::map<std::tuple<std::string, uint64_t, int64_t>, std::string> known;
  const std::string index_path = cache_dir.empty() ? "" : cache_dir + "/cubin-index.tsv";
  if (!index_path.empty()) {
    std::ifstream in(index_path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sha, size, mtime, path;
      if (!std::getline(fields, sha, '\t') || !std::getline(fields, size, '\t') ||
          !std::getline(fields, mtime, '\t') || !std::getline(fields, path)) {
        continue;
      }
      char* end = nullptr;
      const uint64_t sz = std::strtoull(size.c_str(), &end, 10);
      const int64_t mt = std::strtoll(mtime.c_str(), &end, 10);
      if (sha.size() == 64) known[{path, sz, mt}] = sha;
    }
  }

  std::vector<std::string> files;
  for (const auto& dir : cubin_dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (ext == ".cubin" || ext == ".fatbin" || ext == ".so") files.push_back(it->path().string());
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());

  for (const auto& f : files) {
    Entry e;
    e.path = f;
    if (!stat_file(f, &e.size, &e.mtime_ns)) continue;
    auto hit = known.find({f, e.size, e.mtime_ns});
    if (hit != known.end()) {
      e.sha256 = hit->second;
    } else {
      auto sha = sha256_file(f);
      if (!sha) continue;
      e.sha256 = *sha.value;
      ++store.files_hashed_;
    }
    store.entries_.push_back(std::move(e));
  }

  if (!index_path.empty() && store.files_hashed_ > 0) {
    // Keep entries of other directories, replace those of this scan.
    for (const auto& e : store.entries_) known[{e.path, e.size, e.mtime_ns}] = e.sha256;
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    const std::string tmp = index_path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      for (const auto& [key, sha] : known) {
        const auto& [path, size, mtime] = key;
        uint64_t cur_size = 0;
        int64_t cur_mtime = 0;
        if (!stat_file(path, &cur_size, &cur_mtime) || cur_size != size || cur_mtime != mtime) {
          continue;  // stale entry
        }
        out << sha << '\t' << size << '\t' << mtime << '\t' << path << '\n';
      }
    }
    fs::rename(tmp, index_path, ec);
    if (ec) fs::remove(tmp, ec);
  }
  return store;
}

std::string ModuleStore::places() const {
  std::string s;
  for (const auto& d : dirs_) s += (s.empty() ? "`" : ", `") + d + "`";
  if (!cache_dir_.empty()) s += (s.empty() ? "`" : ", `") + cache_dir_ + "/blobs`";
  return s.empty() ? "nowhere (no cubin dir given and no cache dir)" : s;
}

Result<std::vector<uint8_t>> ModuleStore::load(const std::string& name,
                                               const manifest::Module& module,
                                               const std::string& path, std::string* from) const {
  using R = Result<std::vector<uint8_t>>;
  const std::string want = lower(module.sha256);
  std::vector<std::string> candidates;
  for (const auto& e : entries_) {
    if (e.sha256 == want) candidates.push_back(e.path);
  }
  if (!cache_dir_.empty()) {
    const std::string blob = cache_dir_ + "/blobs/" + want;
    uint64_t size = 0;
    int64_t mtime = 0;
    if (stat_file(blob, &size, &mtime)) candidates.push_back(blob);
  }
  std::string changed;
  for (const auto& c : candidates) {
    std::vector<uint8_t> bytes;
    if (!read_all(c, &bytes)) continue;
    const std::string got =
        sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (got == want) {
      if (from) *from = c;
      return R::ok(std::move(bytes));
    }
    changed += "; `" + c + "` changed after it was indexed (now sha256 `" + got + "`)";
  }
  const std::string fix = is_registry_source(module.source)
      ? "an hf: module is downloaded by `kernrt-fetch MANIFEST` into the cache (the runtime "
        "never touches the network)"
      : "build or copy the cubin with that hash into one of them";
  return R::fail(Error{ErrorKind::Artifact, path,
      "module `" + shortened(name) + "` (source `" + shortened(module.source) + "`) with sha256 `" +
      want + "` is not among the artifacts in " + places() +
      ": the source is a label, the hash is the identity; " + fix + changed});
}

}  // namespace kernrt::rt
