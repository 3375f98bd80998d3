// The data-movement and query half of the Runtime API (runtime.hpp): inputs through
// pinned staging, harness writes, whole-allocation reads, sizes and addresses.
// Size rules: a write larger than the allocation, or not a whole number of the buffer's
// elements, is a Caller error naming the buffer with expected and actual bytes, and
// nothing is copied. write_input also checks the written elements against the buffer's
// `domain` (domain.hpp) before copying; the harness writes do not.
#include <algorithm>
#include <cstring>

#include "domain.hpp"
#include "runtime_impl.hpp"

namespace kernrt {

bool device_available(std::string* why) {
  auto api = rt::driver();
  if (!api) {
    if (why) *why = api.errors.front().message;
    return false;
  }
  return true;
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

namespace {

Error caller(const std::string& path, const std::string& message) {
  return Error{ErrorKind::Caller, path, message};
}

const char* kind_name(manifest::BufferKind k) { return manifest::to_string(k); }

}  // namespace

namespace {

// The checks every write into an input buffer shares: the buffer exists and is an
// `input`, and [offset, offset + bytes) is a whole number of elements inside it. Returns
// the buffer's declaration.
Result<const manifest::Buffer*> input_span(const Runtime::Impl& im, const std::string& buffer,
                                           const std::string& path, uint64_t offset,
                                           size_t bytes, const void* data) {
  using R = Result<const manifest::Buffer*>;
  auto b = im.manifest.buffers.find(buffer);
  if (b == im.manifest.buffers.end()) return R::fail(caller(path, "unknown buffer `" + buffer + "`"));
  if (b->second.kind != manifest::BufferKind::input) {
    return R::fail(caller(path, "buffer `" + buffer + "` is `" + kind_name(b->second.kind) +
                                    "`, not `input`: use write_buffer"));
  }
  if (auto e = rt::check_write("input", buffer, path, im.plan.buffers.at(buffer),
                               manifest::dtype_size(b->second.dtype), bytes, data, offset)) {
    return R::fail(*e);
  }
  return R::ok(&b->second);
}

}  // namespace

std::optional<Error> Runtime::write_input(const std::string& buffer, const void* data,
                                          size_t bytes) {
  return write_input_at(buffer, 0, data, bytes);
}

std::optional<Error> Runtime::write_input_at(const std::string& buffer, uint64_t offset,
                                             const void* data, size_t bytes) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  auto decl = input_span(im, buffer, path, offset, bytes, data);
  if (!decl) return decl.errors.front();
  const uint64_t first = offset / manifest::dtype_size((*decl.value)->dtype);
  if (auto e = rt::check_domain(im.manifest, im.plan, buffer, data, bytes, first)) return e;
  if (auto e = im.bind()) return e;
  // The previous copy out of this staging buffer may still be in flight, and a caller's
  // stream may still read the buffer.
  if (auto e = im.sync("write_input")) return e;
  if (bytes == 0) return std::nullopt;
  auto* staging = static_cast<uint8_t*>(im.staging.at(buffer)) + offset;
  std::memcpy(staging, data, bytes);
  im.compute_dirty = true;
  im.handed_to = nullptr;
  return im.check(im.api->cuMemcpyHtoDAsync(im.alloc.buffers.at(buffer).address + offset, staging,
                                            bytes, im.stream),
                  "cuMemcpyHtoDAsync", path);
}

std::optional<Error> Runtime::write_input_device(const std::string& buffer, uint64_t offset,
                                                 uint64_t src, size_t bytes, Stream stream) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  if (src == 0 && bytes > 0) return caller(path, "null source address");
  auto decl = input_span(im, buffer, path, offset, bytes, reinterpret_cast<const void*>(src));
  if (!decl) return decl.errors.front();
  if (auto e = im.bind()) return e;
  if (bytes == 0) return std::nullopt;
  CUstream s = stream ? static_cast<CUstream>(stream) : im.stream;
  const uint64_t dst = im.alloc.buffers.at(buffer).address + offset;
  return im.on_stream(s, false, [&](CUstream on) {
    return im.check(im.api->cuMemcpyDtoDAsync(dst, src, bytes, on), "cuMemcpyDtoDAsync", path);
  });
}

std::optional<Error> Runtime::write_buffer(const std::string& buffer, const void* data,
                                           size_t bytes) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  auto b = im.manifest.buffers.find(buffer);
  if (b == im.manifest.buffers.end()) return caller(path, "unknown buffer `" + buffer + "`");
  if (auto e = rt::check_write("buffer", buffer, path, im.plan.buffers.at(buffer),
                           manifest::dtype_size(b->second.dtype), bytes, data)) {
    return e;
  }
  if (auto e = im.bind()) return e;
  if (bytes == 0) return std::nullopt;
  if (auto e = im.check(im.api->cuMemcpyHtoDAsync(im.alloc.buffers.at(buffer).address, data,
                                                  bytes, im.stream),
                        "cuMemcpyHtoDAsync", path)) {
    return e;
  }
  return im.sync("write_buffer");
}

std::optional<Error> Runtime::write_state(const std::string& state, const void* data,
                                          size_t bytes) {
  return write_state_at(state, 0, data, bytes);
}

std::optional<Error> Runtime::write_state_at(const std::string& state, uint64_t offset,
                                             const void* data, size_t bytes) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/states", state);
  auto s = im.alloc.states.find(state);
  if (s == im.alloc.states.end()) return caller(path, "unknown state `" + state + "`");
  if (auto e = rt::check_write("state", state, path, s->second.bytes, 1, bytes, data, offset)) {
    return e;
  }
  if (auto e = im.bind()) return e;
  if (bytes == 0) return std::nullopt;
  if (auto e = im.check(im.api->cuMemcpyHtoDAsync(s->second.address + offset, data, bytes,
                                                  im.stream),
                        "cuMemcpyHtoDAsync", path)) {
    return e;
  }
  return im.sync("write_state");
}

namespace {

std::optional<Error> read_region(Runtime::Impl& im, const rt::Region& r, const std::string& path,
                                 std::vector<uint8_t>* out) {
  if (out == nullptr) return caller(path, "null output vector");
  if (auto e = im.bind()) return e;
  if (auto e = im.sync("read")) return e;
  out->assign(r.bytes, 0);
  if (r.bytes == 0) return std::nullopt;
  if (auto e = im.check(im.api->cuMemcpyDtoHAsync(out->data(), r.address, r.bytes, im.stream),
                        "cuMemcpyDtoHAsync", path)) {
    return e;
  }
  return im.sync("read");
}

}  // namespace

std::optional<Error> Runtime::read_output(const std::string& buffer, std::vector<uint8_t>* out) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  auto b = im.manifest.buffers.find(buffer);
  if (b == im.manifest.buffers.end()) return caller(path, "unknown buffer `" + buffer + "`");
  if (b->second.kind != manifest::BufferKind::output) {
    return caller(path, "buffer `" + buffer + "` is `" + kind_name(b->second.kind) +
                            "`, not `output`: use read_buffer");
  }
  return read_region(im, im.alloc.buffers.at(buffer), path, out);
}

std::optional<Error> Runtime::read_output_at(const std::string& buffer, uint64_t offset,
                                             void* dst, size_t bytes) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  auto b = im.manifest.buffers.find(buffer);
  if (b == im.manifest.buffers.end()) return caller(path, "unknown buffer `" + buffer + "`");
  if (b->second.kind != manifest::BufferKind::output) {
    return caller(path, "buffer `" + buffer + "` is `" + kind_name(b->second.kind) +
                            "`, not `output`: use read_buffer");
  }
  const rt::Region& r = im.alloc.buffers.at(buffer);
  if (offset > r.bytes || bytes > r.bytes - offset) {
    return caller(path, "output `" + buffer + "` has " + std::to_string(r.bytes) +
                            " bytes; cannot read " + std::to_string(bytes) + " at offset " +
                            std::to_string(offset));
  }
  if (dst == nullptr && bytes > 0) return caller(path, "null destination");
  if (auto e = im.bind()) return e;
  if (auto e = im.sync("read")) return e;
  if (bytes == 0) return std::nullopt;
  if (auto e = im.check(im.api->cuMemcpyDtoHAsync(dst, r.address + offset, bytes, im.stream),
                        "cuMemcpyDtoHAsync", path)) {
    return e;
  }
  return im.sync("read");
}

std::optional<Error> Runtime::read_buffer(const std::string& buffer, std::vector<uint8_t>* out) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/buffers", buffer);
  auto r = im.alloc.buffers.find(buffer);
  if (r == im.alloc.buffers.end()) return caller(path, "unknown buffer `" + buffer + "`");
  return read_region(im, r->second, path, out);
}

std::optional<Error> Runtime::read_state(const std::string& state, std::vector<uint8_t>* out) {
  Impl& im = *impl_;
  const std::string path = json_pointer_append("/states", state);
  auto r = im.alloc.states.find(state);
  if (r == im.alloc.states.end()) return caller(path, "unknown state `" + state + "`");
  return read_region(im, r->second, path, out);
}

size_t Runtime::buffer_bytes(const std::string& buffer) const {
  auto r = impl_->alloc.buffers.find(buffer);
  return r == impl_->alloc.buffers.end() ? 0 : static_cast<size_t>(r->second.bytes);
}

size_t Runtime::state_bytes(const std::string& state) const {
  auto r = impl_->alloc.states.find(state);
  return r == impl_->alloc.states.end() ? 0 : static_cast<size_t>(r->second.bytes);
}

uint64_t Runtime::buffer_address(const std::string& buffer) const {
  auto r = impl_->alloc.buffers.find(buffer);
  return r == impl_->alloc.buffers.end() ? 0 : r->second.address;
}

uint64_t Runtime::state_address(const std::string& state) const {
  auto r = impl_->alloc.states.find(state);
  return r == impl_->alloc.states.end() ? 0 : r->second.address;
}

std::map<std::string, std::string> Runtime::module_files() const { return impl_->module_files; }

std::vector<std::string> Runtime::programs() const {
  std::vector<std::string> names;
  for (const auto& p : impl_->programs) names.push_back(p.name);
  return names;
}

std::vector<std::string> Runtime::buffers() const {
  const auto& b = impl_->lowered.bindable;
  return {b.begin(), b.begin() + static_cast<std::ptrdiff_t>(impl_->lowered.buffer_count)};
}

std::vector<std::string> Runtime::states() const {
  std::vector<std::string> names;
  for (const auto& [name, region] : impl_->alloc.states) names.push_back(name);
  return names;
}

std::optional<BufferInfo> Runtime::buffer_info(const std::string& buffer) const {
  const Impl& im = *impl_;
  auto b = im.manifest.buffers.find(buffer);
  auto r = im.alloc.buffers.find(buffer);
  if (b == im.manifest.buffers.end() || r == im.alloc.buffers.end()) return std::nullopt;
  BufferInfo info;
  info.dtype = b->second.dtype;
  info.kind = b->second.kind;
  info.bytes = r->second.bytes;
  info.address = r->second.address;
  for (const auto& e : b->second.shape) {
    info.shape.push_back(e.kind == manifest::Expr::Kind::Var ? im.manifest.vars.at(e.var).max
                                                             : e.value);
  }
  return info;
}

size_t Runtime::launch_count(const std::string& program) const {
  for (const auto& p : impl_->programs) {
    if (p.name == program) return p.plan->launches.size();
  }
  return 0;
}

size_t Runtime::graph_cache_size() const { return impl_->graphs ? impl_->graphs->size() : 0; }

}  // namespace kernrt
