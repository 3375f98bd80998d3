// kernrt-verify's per-file work: read one file, verify it as a manifest (then check the
// serving protocol) or as a merge fragment, optionally check module hashes against a
// directory of artifacts, and print the verdict as text or as one JSON object.
//
// It decides nothing the library does not: rules live in kernrt::manifest. It does not
// walk DIR recursively and does not load or inspect artifacts beyond hashing their bytes.
// What one file can cost is bounded: files are read only if regular and at most
// max_bytes long, and at most max_errors problems are printed per file (the rest are
// counted); every name printed as text goes through kernrt::printable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::verify_tool {

struct Options {
  bool fragment = false;
  bool json = false;
  uint64_t max_bytes = kDefaultMaxManifestBytes;  // --max-bytes: larger files are refused
  size_t max_errors = 100;                         // --max-errors: per file, the rest counted
  std::optional<std::string> cubins_dir;
  std::map<std::string, std::string> cubin_files;     // lowercase sha256 -> file in DIR
  std::string cache_dir;                              // where blobs/<sha256> are looked up
  std::map<std::string, manifest::Var> fragment_vars;  // from --vars
};

enum class Verdict { verified, rejected, io_error };

// Where --cubins found a module: a file of DIR, a verified blob of the cache, or nowhere.
struct ModuleOrigin {
  std::string name;
  std::string source;
  std::string path;    // "" = not found
  bool cached = false;  // path is a cache blob
};

struct FileReport {
  std::string file;
  Verdict verdict = Verdict::verified;
  Errors errors;           // why it was rejected (or the I/O error), at most max_errors
  uint64_t omitted = 0;    // problems found beyond max_errors
  bool protocol_checked = false;
  Errors misfits;          // serving-protocol misfits of a verified manifest (not failures)
  uint64_t misfits_omitted = 0;
  size_t forwards = 0;
  size_t fills = 0;
  std::map<std::string, manifest::Var> fragment_vars;  // the bounds a fragment was checked at
  std::vector<ModuleOrigin> modules;  // with --cubins: every module and where it was found
};

// The vars a fragment names (grids, shared_mem, pack var/expr fields, scratch shapes),
// each at max 1 unless `given` sets it.
std::map<std::string, manifest::Var> fragment_vars(const manifest::Fragment& f,
                                                   const std::map<std::string, manifest::Var>& given);

FileReport check_file(const std::string& path, const Options& opts);

// Text: verdict lines and problems on `out`; I/O errors on `err` as `file: message`.
void print_text(const FileReport& r, std::ostream& out, std::ostream& err);
// One JSON object on one line.
void print_json(const FileReport& r, std::ostream& out);

}  // namespace kernrt::verify_tool
