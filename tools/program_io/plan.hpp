// program_io's request plan: everything it checks before it touches the CUDA driver.
//
// Owns: parsing `name=value` / `name=file` flags, choosing the program, checking var
// names and values against the manifest ([1, max]) and that every var the program reads
// is given, buffer names and kinds for --in / --out / --dump, the size of every --in file
// against its buffer at these vars (no larger than the buffer, a whole number of
// elements), that every --in and --fill file is a regular file (a FIFO or /dev/zero is
// refused, not read) and every --fill file is non-empty, that no buffer or state is given
// twice to --in or --fill and no file is named by two outputs, that every --out / --dump
// file can be created (its folder exists; it is not a directory or a FIFO), and that
// every --weights file is a regular file. A rejected request launches nothing, and these
// checks give the same answer with or without a GPU.
// Deliberately does not check: input contents against `domain` (write_input does, once
// loaded), that the cubins exist, the contents of a --weights file (the runtime binds
// them), or a --fill file against its state's size (that depends on the token capacity;
// the runtime checks it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::program_io {

// One `name=value` flag as the user wrote it.
struct Assignment {
  std::string name;
  std::string value;
};

// Splits at the first `=`; both sides must be non-empty.
std::optional<Assignment> parse_assignment(const std::string& text, std::string* error);

// The flags program_io was given, before any check.
struct Flags {
  std::string program;  // "" = the manifest's only program
  std::vector<std::string> vars;     // name=value
  std::vector<std::string> inputs;   // buffer=file
  std::vector<std::string> outputs;  // buffer=file
  std::vector<std::string> dumps;    // buffer-or-state=file
  std::vector<std::string> fills;    // state=file, repeated over the whole state
  std::vector<std::string> weights;  // safetensors files
};

struct FileBinding {
  std::string name;  // buffer or state
  std::string path;
  uint64_t bytes = 0;  // inputs and fills: the file's size
  bool is_state = false;  // dumps (fills are always states)
};

// A request every CPU-side check accepted.
struct Plan {
  std::string program;
  std::map<std::string, uint64_t> vars;
  std::vector<FileBinding> inputs;
  std::vector<FileBinding> outputs;
  std::vector<FileBinding> dumps;
  std::vector<FileBinding> fills;
};

// Bytes of `buffer` at these vars (vars not given count at their max, as allocated).
std::optional<uint64_t> buffer_bytes_at(const manifest::Manifest& m, const std::string& buffer,
                                        const std::map<std::string, uint64_t>& vars,
                                        std::string* error);

// The file system as the plan sees it (tests pass fakes).
struct Files {
  // The size of a regular file that can be read, or nullopt with `why` set ("does not
  // exist", "is a FIFO, not a regular file", ...).
  std::optional<uint64_t> (*input_size)(const std::string& path, std::string* why);
  // nullopt when `path` can be written as an output file, else why not.
  std::optional<std::string> (*output_problem)(const std::string& path);
};
Files real_files();

// Every check above; all problems are reported, each a Caller error whose path names the
// manifest entry (`/vars/n`, `/buffers/x`, `/programs`) or the flag, or an Io error
// whose path is the file.
Result<Plan> make_plan(const manifest::Manifest& m, const Flags& flags, const Files& files);

// Names the vars for the summary line: "{n=37, t=2}" in manifest (sorted) order.
std::string format_vars(const std::map<std::string, uint64_t>& vars);

}  // namespace kernrt::program_io
