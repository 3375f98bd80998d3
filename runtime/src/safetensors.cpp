// Safetensors header parsing and weight binding (see safetensors.hpp). nlohmann is used
// without exceptions (parse with allow_exceptions = false) and every value's kind is
// checked before it is read.
#include "safetensors.hpp"

#include <nlohmann/json.hpp>

#include <fstream>

#include "kernrt/manifest/file.hpp"

namespace kernrt::rt {
namespace {

// A safetensors header longer than 100 MB is refused (the format's own limit).
constexpr uint64_t kMaxHeader = 100'000'000;

Error artifact(const std::string& path, const std::string& message) {
  return Error{ErrorKind::Artifact, path, message};
}

}  // namespace

std::optional<manifest::DType> safetensors_dtype(const std::string& s) {
  using D = manifest::DType;
  static const std::map<std::string, D> kMap = {
      {"BF16", D::bf16}, {"F16", D::f16}, {"F32", D::f32}, {"I32", D::i32}, {"U32", D::u32},
      {"I64", D::i64}, {"U64", D::u64}, {"F8_E4M3", D::fp8e4m3}, {"U8", D::u8}};
  auto it = kMap.find(s);
  if (it == kMap.end()) return std::nullopt;
  return it->second;
}

Result<SafetensorsHeader> parse_safetensors_header(std::string_view bytes, uint64_t file_size,
                                                   const std::string& file) {
  using R = Result<SafetensorsHeader>;
  const std::string where = "safetensors file `" + file + "`";
  if (bytes.size() < 8 || file_size < 8) {
    return R::fail(artifact(file, where + " is shorter than its 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (n > kMaxHeader || n > file_size - 8 || n > bytes.size() - 8) {
    return R::fail(artifact(file, where + " declares a " + std::to_string(n) +
                                      "-byte header but the file has " +
                                      std::to_string(file_size) + " bytes"));
  }
  auto json = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return R::fail(artifact(file, where + " header is not a JSON object"));
  }
  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_bytes = file_size - h.data_start;
  for (const auto& [name, v] : json.items()) {
    if (name == "__metadata__") continue;
    const std::string bad = where + ": tensor `" + name + "` ";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      return R::fail(artifact(file, bad + "needs `dtype`, `shape` and `data_offsets`"));
    }
    const auto& dt = v.at("dtype");
    const auto& shape = v.at("shape");
    const auto& off = v.at("data_offsets");
    if (!dt.is_string() || !shape.is_array() || !off.is_array() || off.size() != 2 ||
        !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return R::fail(artifact(file, bad + "has a malformed `dtype`, `shape` or `data_offsets`"));
    }
    SafetensorsTensor t;
    t.dtype = dt.get<std::string>();
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) {
        return R::fail(artifact(file, bad + "has a shape entry that is not a u64"));
      }
      t.shape.push_back(d.get<uint64_t>());
    }
    const uint64_t b = off[0].get<uint64_t>();
    const uint64_t e = off[1].get<uint64_t>();
    if (b > e || e > data_bytes) {
      return R::fail(artifact(file, bad + "has data_offsets [" + std::to_string(b) + ", " +
                                        std::to_string(e) + "] outside the " +
                                        std::to_string(data_bytes) + " data bytes"));
    }
    t.begin = h.data_start + b;
    t.end = h.data_start + e;
    h.tensors.emplace(name, std::move(t));
  }
  return R::ok(std::move(h));
}

Result<SafetensorsHeader> read_safetensors_header(const std::string& file) {
  using R = Result<SafetensorsHeader>;
  // An ifstream blocks forever in open on a FIFO without a writer, and /dev/zero has no end.
  if (auto why = not_a_regular_file(file)) return R::fail(Error{ErrorKind::Io, file, "weights file " + *why});
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return R::fail(Error{ErrorKind::Io, file, "cannot open `" + file + "`"});
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::string head(8, '\0');
  if (size < 8 || !in.read(head.data(), 8)) {
    return parse_safetensors_header(std::string_view(), size, file);
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(head[static_cast<size_t>(i)]);
  if (n <= kMaxHeader && n <= size - 8) {
    head.resize(8 + n);
    if (!in.read(head.data() + 8, static_cast<std::streamsize>(n))) {
      return R::fail(Error{ErrorKind::Io, file, "cannot read the header of `" + file + "`"});
    }
  }
  return parse_safetensors_header(head, size, file);
}

Result<std::map<std::string, WeightSource>> bind_weights(
    const manifest::Manifest& m, const std::map<std::string, uint64_t>& buffer_bytes,
    const std::vector<std::string>& files) {
  using R = Result<std::map<std::string, WeightSource>>;
  std::vector<SafetensorsHeader> headers;
  for (const auto& f : files) {
    auto h = read_safetensors_header(f);
    if (!h) return R::fail(h.errors);
    headers.push_back(std::move(*h.value));
  }
  std::string searched;
  for (const auto& f : files) searched += (searched.empty() ? "`" : ", `") + f + "`";
  if (searched.empty()) searched = "no files (pass --weights)";

  std::map<std::string, WeightSource> bound;
  Errors errors;
  for (const auto& [name, b] : m.buffers) {
    if (b.kind != manifest::BufferKind::weight) continue;
    const std::string path = json_pointer_append("/buffers", name);
    std::vector<size_t> hits;
    for (size_t i = 0; i < headers.size(); ++i) {
      if (headers[i].tensors.count(name)) hits.push_back(i);
    }
    if (hits.empty()) {
      errors.push_back(artifact(path, "weight `" + name + "` missing: no tensor of that name in " +
                                          searched));
      continue;
    }
    if (hits.size() > 1) {
      errors.push_back(artifact(path, "weight `" + name + "` appears in both `" +
                                          files[hits[0]] + "` and `" + files[hits[1]] +
                                          "`: it must be in exactly one file"));
      continue;
    }
    const SafetensorsTensor& t = headers[hits[0]].tensors.at(name);
    auto dt = safetensors_dtype(t.dtype);
    if (!dt || *dt != b.dtype) {
      errors.push_back(artifact(path, "weight `" + name + "` in `" + files[hits[0]] +
                                          "` has dtype `" + t.dtype + "`, expected `" +
                                          manifest::to_string(b.dtype) + "`"));
      continue;
    }
    const uint64_t want = buffer_bytes.count(name) ? buffer_bytes.at(name) : 0;
    if (t.end - t.begin != want) {
      errors.push_back(artifact(path, "weight `" + name + "` in `" + files[hits[0]] + "` has " +
                                          std::to_string(t.end - t.begin) + " bytes, expected " +
                                          std::to_string(want)));
      continue;
    }
    bound[name] = WeightSource{files[hits[0]], t.begin, t.end - t.begin};
  }
  if (!errors.empty()) return R::fail(std::move(errors));
  return R::ok(std::move(bound));
}

}  // namespace kernrt::rt
