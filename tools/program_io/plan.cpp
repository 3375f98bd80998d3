// program_io's CPU-side checks (plan.hpp): flags against the manifest, before the driver.
#include "plan.hpp"

#include <sys/stat.h>

#include <set>
#include <sstream>

#include "kernrt/manifest/expr.hpp"
#include "kernrt/manifest/file.hpp"

namespace kernrt::program_io {
namespace {

Error caller(std::string path, std::string message) {
  return Error{ErrorKind::Caller, std::move(path), std::move(message), 0, 0};
}

Error io(const std::string& path, std::string message) {
  return Error{ErrorKind::Io, path, std::move(message), 0, 0};
}

std::string tk(const std::string& name) { return "`" + shortened(name) + "`"; }

std::string names_of(const std::map<std::string, manifest::Var>& vars) {
  std::string out;
  for (const auto& [name, var] : vars) out += (out.empty() ? "`" : ", `") + name + "`";
  return out.empty() ? "none" : out;
}

std::string program_names(const manifest::Manifest& m) {
  std::string out;
  for (const auto& [name, p] : m.programs) out += (out.empty() ? "`" : ", `") + name + "`";
  return out;
}

// Strict unsigned decimal: no sign, no spaces, no overflow.
std::optional<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

void check_vars(const manifest::Manifest& m, const Flags& flags, Plan* plan, Errors* errors) {
  for (const auto& text : flags.vars) {
    std::string why;
    auto a = parse_assignment(text, &why);
    if (!a) {
      errors->push_back(caller("--env", why));
      continue;
    }
    const std::string path = json_pointer_append("/vars", a->name);
    auto it = m.vars.find(a->name);
    if (it == m.vars.end()) {
      errors->push_back(caller(path, "unknown var `" + a->name + "` (declared: " +
                                         names_of(m.vars) + ")"));
      continue;
    }
    auto value = parse_u64(a->value);
    if (!value) {
      errors->push_back(caller(path, "var `" + a->name + "` expects an unsigned integer, got `" +
                                         a->value + "`"));
      continue;
    }
    if (*value < 1 || *value > it->second.max) {
      errors->push_back(caller(path, "var `" + a->name + "` = " + std::to_string(*value) +
                                         " is outside [1, " + std::to_string(it->second.max) +
                                         "]"));
      continue;
    }
    if (plan->vars.count(a->name) != 0) {
      errors->push_back(caller(path, "var `" + a->name + "` is given twice"));
      continue;
    }
    plan->vars[a->name] = *value;
  }
}

void check_program(const manifest::Manifest& m, const Flags& flags, Plan* plan,
                   Errors* errors) {
  if (!flags.program.empty()) {
    if (m.programs.count(flags.program) == 0) {
      errors->push_back(caller("/programs", "unknown program `" + flags.program +
                                                "` (declared: " + program_names(m) + ")"));
    }
    plan->program = flags.program;
    return;
  }
  if (m.programs.size() != 1) {
    errors->push_back(caller("/programs", "the manifest declares " +
                                              std::to_string(m.programs.size()) +
                                              " programs (" + program_names(m) +
                                              "); choose one with --program"));
    return;
  }
  plan->program = m.programs.begin()->first;
}

// Buffer kinds each flag accepts: --in inputs only, --out outputs only, --dump anything.
enum class Use { In, Out, Dump };

void check_bindings(const manifest::Manifest& m, const std::vector<std::string>& texts, Use use,
                    const Files& files, std::set<std::string>* names_in,
                    std::set<std::string>* out_files, Plan* plan, Errors* errors) {
  const char* flag = use == Use::In ? "--in" : use == Use::Out ? "--out" : "--dump";
  for (const auto& text : texts) {
    std::string why;
    auto a = parse_assignment(text, &why);
    if (!a) {
      errors->push_back(caller(flag, why));
      continue;
    }
    FileBinding b{a->name, a->value, 0, false};
    if (use != Use::In) {
      // An output file: its folder must exist and it must not be a directory or a FIFO;
      // one file takes one output (a second would overwrite the first).
      if (auto problem = files.output_problem(a->value)) {
        errors->push_back(io(a->value, std::string(flag) + " " + tk(a->name) + ": " + *problem));
        continue;
      }
      if (!out_files->insert(a->value).second) {
        errors->push_back(caller(flag, "file " + tk(a->value) + " is named by two outputs"));
        continue;
      }
    } else if (!names_in->insert(a->name).second) {
      errors->push_back(caller(json_pointer_append("/buffers", a->name),
                               "--in " + tk(a->name) + " is given twice"));
      continue;
    }
    auto buf = m.buffers.find(a->name);
    if (buf == m.buffers.end()) {
      if (use == Use::Dump && m.states.count(a->name) != 0) {
        b.is_state = true;
        plan->dumps.push_back(b);
        continue;
      }
      errors->push_back(caller(json_pointer_append("/buffers", a->name),
                               std::string(flag) + " names unknown " +
                                   (use == Use::Dump ? "buffer or state `" : "buffer `") +
                                   a->name + "`"));
      continue;
    }
    const std::string path = json_pointer_append("/buffers", a->name);
    const manifest::BufferKind kind = buf->second.kind;
    if (use == Use::In && kind != manifest::BufferKind::input) {
      errors->push_back(caller(path, "--in writes input buffers only; `" + a->name + "` is " +
                                         manifest::to_string(kind)));
      continue;
    }
    if (use == Use::Out && kind != manifest::BufferKind::output) {
      errors->push_back(caller(path, "--out reads output buffers only; `" + a->name + "` is " +
                                         manifest::to_string(kind) + " (use --dump)"));
      continue;
    }
    if (use == Use::In) {
      std::string unreadable;
      auto size = files.input_size(a->value, &unreadable);
      if (!size) {
        errors->push_back(io(a->value, "input file for " + tk(a->name) + " " + unreadable));
        continue;
      }
      b.bytes = *size;
      std::string err;
      auto cap = buffer_bytes_at(m, a->name, plan->vars, &err);
      const uint32_t elem = manifest::dtype_size(buf->second.dtype);
      if (!cap) {
        errors->push_back(caller(path, err));
      } else if (*size > *cap) {
        errors->push_back(caller(path, "input `" + a->name + "` holds at most " +
                                            std::to_string(*cap) + " bytes at these vars, file `" +
                                            a->value + "` has " + std::to_string(*size) +
                                            " bytes"));
      } else if (*size % elem != 0) {
        errors->push_back(caller(path, "input `" + a->name + "` has " +
                                            manifest::to_string(buf->second.dtype) +
                                            " elements of " + std::to_string(elem) +
                                            " bytes, file `" + a->value + "` has " +
                                            std::to_string(*size) +
                                            " bytes (not a whole number of elements)"));
      } else {
        plan->inputs.push_back(b);
      }
      continue;
    }
    (use == Use::Out ? plan->outputs : plan->dumps).push_back(b);
  }
}

// --fill: a declared state and a readable file with at least one byte to repeat.
void check_fills(const manifest::Manifest& m, const std::vector<std::string>& texts,
                 const Files& files, Plan* plan, Errors* errors) {
  std::set<std::string> states;
  for (const auto& text : texts) {
    std::string why;
    auto a = parse_assignment(text, &why);
    if (!a) {
      errors->push_back(caller("--fill", why));
      continue;
    }
    if (m.states.count(a->name) == 0) {
      const bool buffer = m.buffers.count(a->name) != 0;
      errors->push_back(caller(
          json_pointer_append(buffer ? "/buffers" : "/states", a->name),
          buffer ? "--fill writes states only; `" + a->name + "` is a buffer (use --in)"
                 : "--fill names unknown state `" + a->name + "`"));
      continue;
    }
    if (!states.insert(a->name).second) {
      errors->push_back(caller(json_pointer_append("/states", a->name),
                               "--fill " + tk(a->name) + " is given twice"));
      continue;
    }
    std::string unreadable;
    auto size = files.input_size(a->value, &unreadable);
    if (!size) {
      errors->push_back(io(a->value, "fill file for " + tk(a->name) + " " + unreadable));
      continue;
    }
    if (*size == 0) {
      errors->push_back(caller(json_pointer_append("/states", a->name),
                               "fill file `" + a->value + "` for `" + a->name + "` is empty"));
      continue;
    }
    plan->fills.push_back(FileBinding{a->name, a->value, *size, true});
  }
}

// Every var the program reads must be given: the runtime would refuse the run only after
// the driver, the allocations and the load.
void check_vars_given(const manifest::Manifest& m, Plan* plan, Errors* errors) {
  if (m.programs.count(plan->program) == 0) return;  // reported by check_program
  for (const std::string& v : manifest::vars_read_by(m, plan->program)) {
    if (plan->vars.count(v) != 0) continue;
    auto it = m.vars.find(v);
    const std::string range = it == m.vars.end() ? "" : " in [1, " + std::to_string(it->second.max) + "]";
    errors->push_back(caller(json_pointer_append("/vars", v),
                             "var " + tk(v) + " not given: program " + tk(plan->program) +
                                 " reads it (pass --vars " + shortened(v) + "=N" + range + ")"));
  }
}

void check_weights(const std::vector<std::string>& weights, Errors* errors) {
  std::set<std::string> seen;
  for (const std::string& w : weights) {
    if (auto why = not_a_regular_file(w)) {
      errors->push_back(io(w, "weights file " + *why));
    } else if (!seen.insert(w).second) {
      errors->push_back(caller("--weights", "file " + tk(w) + " is given twice"));
    }
  }
}

std::optional<uint64_t> real_input_size(const std::string& path, std::string* why) {
  if (auto problem = not_a_regular_file(path)) {
    *why = *problem;
    return std::nullopt;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *why = "cannot be read";
    return std::nullopt;
  }
  return static_cast<uint64_t>(st.st_size);
}

std::optional<std::string> real_output_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::string("`") + shortened(path) + "` is a directory";
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
      return std::string("`") + shortened(path) + "` is a FIFO or socket, not a file";
    }
    return std::nullopt;  // a regular file is replaced; a device (/dev/null) is written
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return "folder `" + shortened(dir) + "` does not exist";
  }
  return std::nullopt;
}

}  // namespace

Files real_files() { return Files{&real_input_size, &real_output_problem}; }

std::optional<Assignment> parse_assignment(const std::string& text, std::string* error) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    *error = "expected `name=value`, got `" + text + "`";
    return std::nullopt;
  }
  return Assignment{text.substr(0, eq), text.substr(eq + 1)};
}

std::optional<uint64_t> buffer_bytes_at(const manifest::Manifest& m, const std::string& buffer,
                                        const std::map<std::string, uint64_t>& vars,
                                        std::string* error) {
  auto it = m.buffers.find(buffer);
  if (it == m.buffers.end()) {
    *error = "unknown buffer `" + buffer + "`";
    return std::nullopt;
  }
  std::map<std::string, uint64_t> values = manifest::vars_at_max(m);
  for (const auto& [name, v] : vars) values[name] = v;
  return manifest::byte_size(it->second.shape, it->second.dtype, manifest::lookup_in(values),
                             error);
}

Result<Plan> make_plan(const manifest::Manifest& m, const Flags& flags, const Files& files) {
  Plan plan;
  Errors errors;
  check_program(m, flags, &plan, &errors);
  check_vars(m, flags, &plan, &errors);
  check_vars_given(m, &plan, &errors);
  std::set<std::string> inputs, out_files;
  check_bindings(m, flags.inputs, Use::In, files, &inputs, &out_files, &plan, &errors);
  check_bindings(m, flags.outputs, Use::Out, files, &inputs, &out_files, &plan, &errors);
  check_bindings(m, flags.dumps, Use::Dump, files, &inputs, &out_files, &plan, &errors);
  check_fills(m, flags.fills, files, &plan, &errors);
  check_weights(flags.weights, &errors);
  if (!errors.empty()) return Result<Plan>::fail(std::move(errors));
  return Result<Plan>::ok(std::move(plan));
}

std::string format_vars(const std::map<std::string, uint64_t>& vars) {
  std::ostringstream out;
  out << '{';
  bool first = true;
  for (const auto& [name, v] : vars) {
    out << (first ? "" : ", ") << name << '=' << v;
    first = false;
  }
  out << '}';
  return out.str();
}

}  // namespace kernrt::program_io
