// Safetensors weights: header parsing and binding weight buffers by name (v4, §3.8).
//
// Owns: the file format (8-byte little-endian header length, a JSON object of
// name -> {dtype, shape, data_offsets}, then the data) and the binding rule: every
// `weight` buffer must appear by exact name in exactly one file, with a dtype equal to the
// buffer's and exactly the buffer's allocation in bytes. All failures are Artifact errors
// naming the file and the fix. Does not read tensor data (exec copies it), does not
// check tensors that no buffer names, and ignores `__metadata__`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernrt/manifest/error.hpp"
#include "kernrt/manifest/types.hpp"

namespace kernrt::rt {

struct SafetensorsTensor {
  std::string dtype;            // as written: "BF16", "F32", ...
  std::vector<uint64_t> shape;
  uint64_t begin = 0;           // absolute file offsets of the data
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;
  std::map<std::string, SafetensorsTensor> tensors;
};

// `bytes` holds at least the first 8 + header-length bytes of a file of `file_size`
// bytes; `file` names it in errors.
Result<SafetensorsHeader> parse_safetensors_header(std::string_view bytes, uint64_t file_size,
                                                   const std::string& file);
Result<SafetensorsHeader> read_safetensors_header(const std::string& file);

// The kernrt dtype of a safetensors dtype string (BF16, F16, F32, I32, U32, I64, U64,
// F8_E4M3, U8), or nullopt.
std::optional<manifest::DType> safetensors_dtype(const std::string& s);

struct WeightSource {
  std::string file;
  uint64_t offset = 0;  // absolute file offset
  uint64_t bytes = 0;
};

// Binds every weight buffer of `m` (sized by `buffer_bytes`) to a tensor in `files`.
Result<std::map<std::string, WeightSource>> bind_weights(
    const manifest::Manifest& m, const std::map<std::string, uint64_t>& buffer_bytes,
    const std::vector<std::string>& files);

}  // namespace kernrt::rt
