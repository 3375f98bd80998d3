// The C ABI (kernrt.h) over kernrt::Runtime. Every entry point catches everything
// (std::bad_alloc included) and turns it into a status plus a message; nothing throws
// across the C boundary. Does no validation of its own beyond null handles/pointers.
#include "kernrt/kernrt.h"

#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include "kernrt/manifest/verify.hpp"
#include "kernrt/runtime.hpp"

struct kernrt_runtime {
  std::unique_ptr<kernrt::Runtime> rt;
  std::string last_error;
};

namespace {

thread_local std::string g_load_error;

kernrt_status status_of(kernrt::ErrorKind k) {
  switch (k) {
    case kernrt::ErrorKind::Parse: return KERNRT_E_PARSE;
    case kernrt::ErrorKind::Manifest: return KERNRT_E_MANIFEST;
    case kernrt::ErrorKind::Artifact: return KERNRT_E_ARTIFACT;
    case kernrt::ErrorKind::Driver: return KERNRT_E_DRIVER;
    case kernrt::ErrorKind::Caller: return KERNRT_E_CALLER;
    case kernrt::ErrorKind::Io: return KERNRT_E_IO;
  }
  return KERNRT_E_CALLER;
}

// One message for a list of errors: each on its own line.
kernrt_status report(const kernrt::Errors& errors, std::string* sink) {
  sink->clear();
  for (const auto& e : errors) sink->append((sink->empty() ? "" : "\n") + e.to_string());
  return errors.empty() ? KERNRT_E_CALLER : status_of(errors.front().kind);
}

kernrt_status report(const std::optional<kernrt::Error>& e, std::string* sink) {
  if (!e) {
    sink->clear();
    return KERNRT_OK;
  }
  *sink = e->to_string();
  return status_of(e->kind);
}

template <class F>
kernrt_status guarded(std::string* sink, F&& f) {
  try {
    return f();
  } catch (const std::exception& ex) {
    *sink = std::string("internal error: ") + ex.what();
  } catch (...) {
    *sink = "internal error: unknown exception";
  }
  return KERNRT_E_CALLER;
}

kernrt::LoadOptions to_options(const kernrt_load_options* o) {
  kernrt::LoadOptions opts;
  if (o == nullptr) return opts;
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
  return opts;
}

kernrt_status load_text(const std::string& text, const kernrt_load_options* options,
                        kernrt_runtime** out) {
  auto verified = kernrt::manifest::verify_json(text);
  if (!verified) return report(verified.errors, &g_load_error);
  auto rt = kernrt::Runtime::load(*verified.value, to_options(options));
  if (!rt) return report(rt.errors, &g_load_error);
  auto* handle = new kernrt_runtime;
  handle->rt = std::move(*rt.value);
  *out = handle;
  g_load_error.clear();
  return KERNRT_OK;
}

}  // namespace

extern "C" {

void kernrt_load_options_init(kernrt_load_options* options) {
  if (options == nullptr) return;
  *options = kernrt_load_options{};
  options->graph_cache_capacity = kernrt::kDefaultGraphCacheCapacity;
}

kernrt_status kernrt_load_file(const char* manifest_path, const kernrt_load_options* options,
                               kernrt_runtime** out) {
  return guarded(&g_load_error, [&]() -> kernrt_status {
    if (out == nullptr || manifest_path == nullptr) {
      g_load_error = "null manifest path or output handle";
      return KERNRT_E_CALLER;
    }
    *out = nullptr;
    std::ifstream in(manifest_path, std::ios::binary);
    if (!in) {
      g_load_error = std::string(manifest_path) + ": cannot open `" + manifest_path + "`";
      return KERNRT_E_IO;
    }
    std::ostringstream text;
    text << in.rdbuf();
    return load_text(text.str(), options, out);
  });
}

kernrt_status kernrt_load_json(const char* json_text, size_t json_len,
                               const kernrt_load_options* options, kernrt_runtime** out) {
  return guarded(&g_load_error, [&]() -> kernrt_status {
    if (out == nullptr || (json_text == nullptr && json_len > 0)) {
      g_load_error = "null manifest text or output handle";
      return KERNRT_E_CALLER;
    }
    *out = nullptr;
    return load_text(std::string(json_text ? json_text : "", json_len), options, out);
  });
}

kernrt_status kernrt_write_input(kernrt_runtime* rt, const char* buffer, const void* data,
                                 size_t bytes) {
  if (rt == nullptr || buffer == nullptr) return KERNRT_E_CALLER;
  return guarded(&rt->last_error, [&] {
    return report(rt->rt->write_input(buffer, data, bytes), &rt->last_error);
  });
}

kernrt_status kernrt_run(kernrt_runtime* rt, const char* program, const char* const* var_names,
                         const uint64_t* var_values, size_t n_vars, int graph) {
  if (rt == nullptr || program == nullptr) return KERNRT_E_CALLER;
  return guarded(&rt->last_error, [&]() -> kernrt_status {
    std::map<std::string, uint64_t> vars;
    for (size_t i = 0; i < n_vars; ++i) {
      if (var_names == nullptr || var_values == nullptr || var_names[i] == nullptr) {
        rt->last_error = "null var name or value array";
        return KERNRT_E_CALLER;
      }
      vars[var_names[i]] = var_values[i];
    }
    return report(rt->rt->run(program, vars, graph != 0), &rt->last_error);
  });
}

kernrt_status kernrt_read_output(kernrt_runtime* rt, const char* buffer, void* dst,
                                 size_t capacity, size_t* written) {
  if (rt == nullptr || buffer == nullptr) return KERNRT_E_CALLER;
  return guarded(&rt->last_error, [&]() -> kernrt_status {
    std::vector<uint8_t> bytes;
    if (auto e = rt->rt->read_output(buffer, &bytes)) return report(e, &rt->last_error);
    if (written) *written = bytes.size();
    if (capacity < bytes.size() || (dst == nullptr && !bytes.empty())) {
      rt->last_error = "output `" + std::string(buffer) + "` has " + std::to_string(bytes.size()) +
                       " bytes, the destination holds " + std::to_string(capacity);
      return KERNRT_E_CALLER;
    }
    if (!bytes.empty()) std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(dst));
    rt->last_error.clear();
    return KERNRT_OK;
  });
}

kernrt_status kernrt_buffer_bytes(kernrt_runtime* rt, const char* buffer, size_t* bytes) {
  if (rt == nullptr || buffer == nullptr || bytes == nullptr) return KERNRT_E_CALLER;
  return guarded(&rt->last_error, [&]() -> kernrt_status {
    *bytes = rt->rt->buffer_bytes(buffer);
    if (*bytes == 0) {
      rt->last_error = "unknown buffer `" + std::string(buffer) + "`";
      return KERNRT_E_CALLER;
    }
    return KERNRT_OK;
  });
}

const char* kernrt_last_error(const kernrt_runtime* rt) {
  return rt ? rt->last_error.c_str() : g_load_error.c_str();
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
