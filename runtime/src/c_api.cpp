// The C ABI (kernrt.h) over kernrt::Runtime. Every entry point catches everything
// (std::bad_alloc included) and turns it into KERNRT_E_INTERNAL plus a message; nothing
// throws across the C boundary. Every failing call records its own errors: on the handle
// when it has one, else in the calling thread's record (kernrt_last_error(NULL)). Does no
// validation of its own beyond null handles, null strings and null out-pointers.
#include "kernrt/kernrt.h"

#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernrt/manifest/file.hpp"
#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"

namespace {

// Errors of the last failing call, as the two read-back forms need them.
struct ErrorRecord {
  kernrt::Errors errors;
  std::string text;  // kernrt_last_error
  std::string json;  // kernrt_last_error_json
  bool json_stale = true;
  kernrt_status internal = KERNRT_OK;  // KERNRT_E_INTERNAL when the failure was ours

  void set(kernrt::Errors es) {
    errors = std::move(es);
    text.clear();
    for (const auto& e : errors) text.append((text.empty() ? "" : "\n") + e.to_string());
    json_stale = true;
    internal = KERNRT_OK;
  }
  void set(kernrt::ErrorKind kind, const std::string& message) {
    set(kernrt::Errors{kernrt::Error{kind, "", message}});
  }
  void clear() { set(kernrt::Errors{}); }
};

}  // namespace

struct kernrt_runtime {
  std::unique_ptr<kernrt::Runtime> rt;
  ErrorRecord error;
  std::vector<std::string> buffers, states, programs;  // the name tables, filled at load
};

namespace {

thread_local ErrorRecord g_thread_error;
thread_local std::string g_verify_report;

kernrt_status status_of(kernrt::ErrorKind k) {
  switch (k) {
    case kernrt::ErrorKind::Parse: return KERNRT_E_PARSE;
    case kernrt::ErrorKind::Manifest: return KERNRT_E_MANIFEST;
    case kernrt::ErrorKind::Artifact: return KERNRT_E_ARTIFACT;
    case kernrt::ErrorKind::Driver: return KERNRT_E_DRIVER;
    case kernrt::ErrorKind::Caller: return KERNRT_E_CALLER;
    case kernrt::ErrorKind::Io: return KERNRT_E_IO;
  }
  return KERNRT_E_INTERNAL;
}

const char* kind_name(kernrt_status s) { return kernrt_status_string(s); }

std::string errors_json(const kernrt::Errors& errors, kernrt_status internal) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : errors) {
    nlohmann::json o = {{"kind", internal == KERNRT_E_INTERNAL ? "internal"
                                                               : kind_name(status_of(e.kind))},
                        {"path", e.path},
                        {"message", e.message}};
    if (e.line) {
      o["line"] = e.line;
      o["column"] = e.column;
    }
    a.push_back(std::move(o));
  }
  return a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

kernrt_status report(const kernrt::Errors& errors, ErrorRecord* sink) {
  if (errors.empty()) {
    sink->clear();
    return KERNRT_OK;
  }
  sink->set(errors);
  return status_of(errors.front().kind);
}

kernrt_status report(const std::optional<kernrt::Error>& e, ErrorRecord* sink) {
  if (!e) {
    sink->clear();
    return KERNRT_OK;
  }
  return report(kernrt::Errors{*e}, sink);
}

kernrt_status caller_error(ErrorRecord* sink, const std::string& message) {
  sink->set(kernrt::ErrorKind::Caller, message);
  return KERNRT_E_CALLER;
}

// Runs f, turning any exception into KERNRT_E_INTERNAL with its message in `sink`.
template <class F>
kernrt_status guarded(ErrorRecord* sink, F&& f) {
  std::string what;
  try {
    return f();
  } catch (const std::exception& ex) {
    what = ex.what();
  } catch (...) {
    what = "unknown exception";
  }
  try {
    sink->set(kernrt::ErrorKind::Caller, "internal error: " + what);
    sink->internal = KERNRT_E_INTERNAL;
  } catch (...) {
  }
  return KERNRT_E_INTERNAL;
}

// A call on a handle: NULL handles and NULL names are refused in the thread's record,
// everything else in the handle's.
template <class F>
kernrt_status on_handle(kernrt_runtime* rt, const char* entry, std::initializer_list<const void*> required,
                        F&& f) {
  if (rt == nullptr) {
    return guarded(&g_thread_error, [&] {
      return caller_error(&g_thread_error, std::string("null runtime handle passed to ") + entry);
    });
  }
  return guarded(&rt->error, [&]() -> kernrt_status {
    for (const void* p : required) {
      if (p == nullptr) return caller_error(&rt->error, std::string("null argument passed to ") + entry);
    }
    return f();
  });
}

kernrt::LoadOptions to_options(const kernrt_load_options* o) {
  kernrt::LoadOptions opts;
  if (o == nullptr) return opts;
  // A caller compiled against an older header passes a smaller struct_size: the fields
  // from the first version are always read, the rank fields only when the struct has them.
  for (size_t i = 0; i < o->n_cubin_dirs; ++i) {
    if (o->cubin_dirs && o->cubin_dirs[i]) opts.cubin_dirs.emplace_back(o->cubin_dirs[i]);
  }
  if (o->cache_dir) opts.cache_dir = o->cache_dir;
  opts.gpu = o->gpu;
  opts.token_capacity = o->token_capacity;
  opts.seq_slots = o->seq_slots;
  for (size_t i = 0; i < o->n_weight_files; ++i) {
    if (o->weight_files && o->weight_files[i]) opts.weight_files.emplace_back(o->weight_files[i]);
  }
  if (o->graph_cache_capacity) opts.graph_cache_capacity = o->graph_cache_capacity;
  if (o->struct_size == 0 || o->struct_size >= offsetof(kernrt_load_options, rendezvous_timeout_s) + sizeof(double)) {
    for (size_t i = 0; i < o->n_ranks; ++i) {
      if (o->rank_groups && o->rank_groups[i] && o->rank_indices) opts.ranks[o->rank_groups[i]] = o->rank_indices[i];
    }
    if (o->rendezvous) opts.rendezvous = o->rendezvous;
    if (o->rendezvous_timeout_s > 0) opts.rendezvous_timeout_s = o->rendezvous_timeout_s;
  }
  return opts;
}

kernrt_status load_text(const std::string& text, const kernrt_load_options* options,
                        kernrt_runtime** out) {
  if (options != nullptr && options->struct_size != 0 &&
      options->struct_size < offsetof(kernrt_load_options, graph_cache_capacity) + sizeof(size_t)) {
    return caller_error(&g_thread_error, "kernrt_load_options.struct_size " +
                                             std::to_string(options->struct_size) +
                                             " is smaller than any version of the struct: call "
                                             "kernrt_load_options_init");
  }
  auto verified = kernrt::manifest::verify_json(text);
  if (!verified) return report(verified.errors, &g_thread_error);
  auto rt = kernrt::Runtime::load(*verified.value, to_options(options));
  if (!rt) return report(rt.errors, &g_thread_error);
  auto handle = std::make_unique<kernrt_runtime>();
  handle->rt = std::move(*rt.value);
  handle->buffers = handle->rt->buffers();
  handle->states = handle->rt->states();
  handle->programs = handle->rt->programs();
  *out = handle.release();
  g_thread_error.clear();
  return KERNRT_OK;
}

std::map<std::string, uint64_t> vars_of(const char* const* names, const uint64_t* values,
                                        size_t n, bool* ok) {
  std::map<std::string, uint64_t> vars;
  *ok = true;
  for (size_t i = 0; i < n; ++i) {
    if (names == nullptr || values == nullptr || names[i] == nullptr) {
      *ok = false;
      return {};
    }
    vars[names[i]] = values[i];
  }
  return vars;
}

const char* name_at(const std::vector<std::string>& names, size_t i) {
  return i < names.size() ? names[i].c_str() : nullptr;
}

}  // namespace

extern "C" {

const char* kernrt_status_string(kernrt_status status) {
  switch (status) {
    case KERNRT_OK: return "ok";
    case KERNRT_E_PARSE: return "parse";
    case KERNRT_E_MANIFEST: return "manifest";
    case KERNRT_E_ARTIFACT: return "artifact";
    case KERNRT_E_DRIVER: return "driver";
    case KERNRT_E_CALLER: return "caller";
    case KERNRT_E_IO: return "io";
    case KERNRT_E_INTERNAL: return "internal";
  }
  return "unknown";
}

void kernrt_load_options_init(kernrt_load_options* options) {
  if (options == nullptr) return;
  *options = kernrt_load_options{};
  options->struct_size = sizeof(kernrt_load_options);
  options->graph_cache_capacity = kernrt::kDefaultGraphCacheCapacity;
}

kernrt_status kernrt_load_file(const char* manifest_path, const kernrt_load_options* options,
                               kernrt_runtime** out) {
  return guarded(&g_thread_error, [&]() -> kernrt_status {
    if (out != nullptr) *out = nullptr;
    if (out == nullptr || manifest_path == nullptr) {
      return caller_error(&g_thread_error, "null manifest path or output handle passed to kernrt_load_file");
    }
    // The CLIs' reader: regular files only, checked on the open descriptor, so a FIFO or a
    // path swapped for one after a check never blocks. No size limit: the caller names it.
    auto text = kernrt::read_regular_file(manifest_path, uint64_t{1} << 62);
    if (!text) return report(text.errors, &g_thread_error);
    return load_text(*text.value, options, out);
  });
}

kernrt_status kernrt_load_json(const char* json_text, size_t json_len,
                               const kernrt_load_options* options, kernrt_runtime** out) {
  return guarded(&g_thread_error, [&]() -> kernrt_status {
    if (out != nullptr) *out = nullptr;
    if (out == nullptr || (json_text == nullptr && json_len > 0)) {
      return caller_error(&g_thread_error, "null manifest text or output handle passed to kernrt_load_json");
    }
    return load_text(std::string(json_text ? json_text : "", json_len), options, out);
  });
}

kernrt_status kernrt_verify_json(const char* json_text, size_t json_len, const char** report_json) {
  if (report_json) *report_json = "[]";
  return guarded(&g_thread_error, [&]() -> kernrt_status {
    if (json_text == nullptr && json_len > 0) {
      return caller_error(&g_thread_error, "null manifest text passed to kernrt_verify_json");
    }
    auto verified = kernrt::manifest::verify_json(std::string_view(json_text ? json_text : "", json_len));
    g_verify_report = errors_json(verified.errors, KERNRT_OK);
    if (report_json) *report_json = g_verify_report.c_str();
    if (verified) return KERNRT_OK;
    return report(verified.errors, &g_thread_error);
  });
}

kernrt_status kernrt_write_input(kernrt_runtime* rt, const char* buffer, const void* data,
                                 size_t bytes) {
  return kernrt_write_input_at(rt, buffer, 0, data, bytes);
}

kernrt_status kernrt_write_input_at(kernrt_runtime* rt, const char* buffer, uint64_t offset,
                                    const void* data, size_t bytes) {
  return on_handle(rt, "kernrt_write_input", {buffer}, [&] {
    return report(rt->rt->write_input_at(buffer, offset, data, bytes), &rt->error);
  });
}

kernrt_status kernrt_write_input_device(kernrt_runtime* rt, const char* buffer, uint64_t offset,
                                        uint64_t src_device_ptr, size_t bytes, void* stream) {
  return on_handle(rt, "kernrt_write_input_device", {buffer}, [&] {
    return report(rt->rt->write_input_device(buffer, offset, src_device_ptr, bytes, stream),
                  &rt->error);
  });
}

kernrt_status kernrt_read_output(kernrt_runtime* rt, const char* buffer, void* dst,
                                 size_t capacity, size_t* written) {
  return on_handle(rt, "kernrt_read_output", {buffer}, [&]() -> kernrt_status {
    auto info = rt->rt->buffer_info(buffer);
    const size_t bytes = info ? static_cast<size_t>(info->bytes) : 0;
    if (info && info->kind == kernrt::manifest::BufferKind::output) {
      if (written) *written = bytes;
      if (capacity < bytes || (dst == nullptr && bytes > 0)) {
        return caller_error(&rt->error, "output `" + std::string(buffer) + "` has " +
                                            std::to_string(bytes) + " bytes, the destination holds " +
                                            std::to_string(capacity));
      }
    }
    return report(rt->rt->read_output_at(buffer, 0, dst, bytes), &rt->error);
  });
}

kernrt_status kernrt_read_output_at(kernrt_runtime* rt, const char* buffer, uint64_t offset,
                                    void* dst, size_t bytes) {
  return on_handle(rt, "kernrt_read_output_at", {buffer}, [&] {
    return report(rt->rt->read_output_at(buffer, offset, dst, bytes), &rt->error);
  });
}

kernrt_status kernrt_buffer_device_ptr(kernrt_runtime* rt, const char* buffer, uint64_t* device_ptr,
                                       size_t* bytes) {
  return on_handle(rt, "kernrt_buffer_device_ptr", {buffer}, [&]() -> kernrt_status {
    auto info = rt->rt->buffer_info(buffer);
    if (!info) return caller_error(&rt->error, "unknown buffer `" + std::string(buffer) + "`");
    if (device_ptr) *device_ptr = info->address;
    if (bytes) *bytes = static_cast<size_t>(info->bytes);
    rt->error.clear();
    return KERNRT_OK;
  });
}

kernrt_status kernrt_state_device_ptr(kernrt_runtime* rt, const char* state, uint64_t* device_ptr,
                                      size_t* bytes) {
  return on_handle(rt, "kernrt_state_device_ptr", {state}, [&]() -> kernrt_status {
    const size_t n = rt->rt->state_bytes(state);
    if (n == 0) return caller_error(&rt->error, "unknown state `" + std::string(state) + "`");
    if (device_ptr) *device_ptr = rt->rt->state_address(state);
    if (bytes) *bytes = n;
    rt->error.clear();
    return KERNRT_OK;
  });
}

kernrt_status kernrt_buffer_bytes(kernrt_runtime* rt, const char* buffer, size_t* bytes) {
  return on_handle(rt, "kernrt_buffer_bytes", {buffer, bytes}, [&]() -> kernrt_status {
    return kernrt_buffer_device_ptr(rt, buffer, nullptr, bytes);
  });
}

kernrt_status kernrt_get_buffer_info(kernrt_runtime* rt, const char* buffer, kernrt_buffer_info* info) {
  return on_handle(rt, "kernrt_get_buffer_info", {buffer, info}, [&]() -> kernrt_status {
    if (info->struct_size < sizeof(kernrt_buffer_info)) {
      return caller_error(&rt->error, "kernrt_buffer_info.struct_size " +
                                          std::to_string(info->struct_size) + " is smaller than " +
                                          std::to_string(sizeof(kernrt_buffer_info)));
    }
    auto b = rt->rt->buffer_info(buffer);
    if (!b) return caller_error(&rt->error, "unknown buffer `" + std::string(buffer) + "`");
    if (b->shape.size() > KERNRT_MAX_RANK) {
      return caller_error(&rt->error, "buffer `" + std::string(buffer) + "` has rank " +
                                          std::to_string(b->shape.size()) + ", more than " +
                                          std::to_string(KERNRT_MAX_RANK));
    }
    info->dtype = kernrt::manifest::to_string(b->dtype);
    info->kind = kernrt::manifest::to_string(b->kind);
    info->rank = static_cast<uint32_t>(b->shape.size());
    for (size_t i = 0; i < KERNRT_MAX_RANK; ++i) info->shape[i] = i < b->shape.size() ? b->shape[i] : 0;
    info->bytes = b->bytes;
    info->device_ptr = b->address;
    rt->error.clear();
    return KERNRT_OK;
  });
}

size_t kernrt_buffer_count(const kernrt_runtime* rt) { return rt ? rt->buffers.size() : 0; }
const char* kernrt_buffer_name(const kernrt_runtime* rt, size_t i) {
  return rt ? name_at(rt->buffers, i) : nullptr;
}
size_t kernrt_state_count(const kernrt_runtime* rt) { return rt ? rt->states.size() : 0; }
const char* kernrt_state_name(const kernrt_runtime* rt, size_t i) {
  return rt ? name_at(rt->states, i) : nullptr;
}
size_t kernrt_program_count(const kernrt_runtime* rt) { return rt ? rt->programs.size() : 0; }
const char* kernrt_program_name(const kernrt_runtime* rt, size_t i) {
  return rt ? name_at(rt->programs, i) : nullptr;
}

kernrt_status kernrt_run(kernrt_runtime* rt, const char* program, const char* const* var_names,
                         const uint64_t* var_values, size_t n_vars, int graph) {
  return on_handle(rt, "kernrt_run", {program}, [&]() -> kernrt_status {
    bool ok = false;
    auto vars = vars_of(var_names, var_values, n_vars, &ok);
    if (!ok) return caller_error(&rt->error, "null var name or value array passed to kernrt_run");
    return report(rt->rt->run(program, vars, graph != 0), &rt->error);
  });
}

kernrt_status kernrt_enqueue(kernrt_runtime* rt, const char* program, const char* const* var_names,
                             const uint64_t* var_values, size_t n_vars, int graph, void* stream) {
  return on_handle(rt, "kernrt_enqueue", {program}, [&]() -> kernrt_status {
    bool ok = false;
    auto vars = vars_of(var_names, var_values, n_vars, &ok);
    if (!ok) return caller_error(&rt->error, "null var name or value array passed to kernrt_enqueue");
    return report(rt->rt->enqueue(program, vars, graph != 0, stream), &rt->error);
  });
}

kernrt_status kernrt_enqueue_bound(kernrt_runtime* rt, const char* program,
                                   const char* const* var_names, const uint64_t* var_values,
                                   size_t n_vars, const kernrt_binding* bindings,
                                   size_t n_bindings, void* stream) {
  return on_handle(rt, "kernrt_enqueue_bound", {program}, [&]() -> kernrt_status {
    bool ok = false;
    auto vars = vars_of(var_names, var_values, n_vars, &ok);
    if (!ok) return caller_error(&rt->error, "null var name or value array passed to kernrt_enqueue_bound");
    std::vector<kernrt::Binding> bound;
    for (size_t i = 0; i < n_bindings; ++i) {
      if (bindings == nullptr || bindings[i].buffer == nullptr) {
        return caller_error(&rt->error, "null binding or binding name passed to kernrt_enqueue_bound");
      }
      bound.push_back({bindings[i].buffer, bindings[i].device_ptr, bindings[i].bytes});
    }
    return report(rt->rt->enqueue_bound(program, vars, bound, stream), &rt->error);
  });
}

kernrt_status kernrt_synchronize(kernrt_runtime* rt) {
  return on_handle(rt, "kernrt_synchronize", {}, [&] { return report(rt->rt->synchronize(), &rt->error); });
}

kernrt_status kernrt_time(kernrt_runtime* rt, const char* program, const char* const* var_names,
                          const uint64_t* var_values, size_t n_vars, int graph, int iters,
                          kernrt_timing* out) {
  return on_handle(rt, "kernrt_time", {program, out}, [&]() -> kernrt_status {
    bool ok = false;
    auto vars = vars_of(var_names, var_values, n_vars, &ok);
    if (!ok) return caller_error(&rt->error, "null var name or value array passed to kernrt_time");
    auto t = rt->rt->time(program, vars, graph != 0, iters);
    if (!t) return report(t.errors, &rt->error);
    *out = kernrt_timing{t.value->median_us, t.value->min_us, t.value->mean_us, t.value->iters};
    rt->error.clear();
    return KERNRT_OK;
  });
}

const char* kernrt_last_error(const kernrt_runtime* rt) {
  return rt ? rt->error.text.c_str() : g_thread_error.text.c_str();
}

const char* kernrt_last_error_json(const kernrt_runtime* rt) {
  auto* record = rt ? const_cast<ErrorRecord*>(&rt->error) : &g_thread_error;
  try {
    if (record->json_stale) {
      record->json = errors_json(record->errors, record->internal);
      record->json_stale = false;
    }
    return record->json.c_str();
  } catch (...) {
    return "[]";
  }
}

int kernrt_device_available(void) {
  try {
    return kernrt::device_available(nullptr) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

const char* kernrt_version(void) { return KERNRT_VERSION; }

void kernrt_destroy(kernrt_runtime* rt) {
  try {
    delete rt;
  } catch (...) {
  }
}

}  // extern "C"
