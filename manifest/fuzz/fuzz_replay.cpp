// Plain replay driver: feeds every file of the given directories (default: the
// committed seed corpus) through the fuzz entry, without libFuzzer, so CI replays the
// corpus with any compiler. Exit 0 when every input ran, 2 when a directory is
// unreadable; a broken invariant aborts inside the entry.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) dirs.emplace_back(argv[i]);
  if (dirs.empty()) dirs.emplace_back(KERNRT_FUZZ_CORPUS);
  std::size_t count = 0;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file()) files.push_back(it->path());
    }
    if (ec || files.empty()) {
      std::fprintf(stderr, "%s: cannot read a corpus directory with files\n", dir.c_str());
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& p : files) {
      std::ifstream f(p, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++count;
    }
  }
  std::printf("replayed %zu inputs\n", count);
  return 0;
}
