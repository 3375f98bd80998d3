// Parameter blocks of the test kernels, shared by the kernels and the host tests.
//
// Owns: the 1280-byte block of `test_pack_echo_sm90a` (the size of the TRTLLM-GEN attention
// block, with a tensormap at offset 0 like it), the byte offsets the pack_echo manifest
// names, and the layout of the echo kernel's output. Deliberately does not check: what a
// manifest actually writes at these offsets; the GPU tests compare that byte by byte.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define KERNRT_TEST_HD __host__ __device__
#else
#define KERNRT_TEST_HD
#endif

namespace kernrt::test {

// Every field the pack_echo manifest writes, at the offset its pack names.
struct EchoBlock {  // 128-byte aligned through CUtensorMap
  CUtensorMap x_map;         // 0: tensormap over param 0 (x, f32, dims [16, 4], box [16, 2])
  const float* x;            // 128: param 0 (x + the call's offset)
  uint8_t* out;              // 136: param 1
  int32_t lit_i32;           // 144: {"i32": -123456789}
  float lit_f32;             // 148: {"f32": 0.1}
  int64_t lit_i64;           // 152: {"i64": -1234567890123456789}
  uint8_t lit_u8;            // 160: {"u8": 165}
  uint8_t gap0[3];           // 161: no field, must stay zero
  uint32_t var_n;            // 164: {"var": "n"}
  uint32_t expr_mul;         // 168: {"expr": {"mul": ["n", 3]}}
  uint32_t gap1;             // 172: no field
  uint64_t expr_ceil;        // 176: {"expr": {"ceil_div": ["n", 4]}, "width": 8}
  uint16_t var_n16;          // 184: {"var": "n", "width": 2}
  uint8_t gap2[6];           // 186
  const uint8_t* scratch;    // 192: {"scratch": "mark"}
  int32_t k;                 // 200: param 2 (the call passes {"expr": {"mul": ["n", 2]}})
  uint16_t lit_i32_w2;       // 204: {"i32": -2, "width": 2}
  uint8_t gap3[1272 - 206];  // 206: no field up to the tail
  int64_t tail;              // 1272: {"i64": 9223372036854775807}, the last 8 bytes
};

static_assert(sizeof(EchoBlock) == 1280, "the echo block is 1280 bytes like the attention block");
static_assert(offsetof(EchoBlock, x) == 128, "pack field offset");
static_assert(offsetof(EchoBlock, out) == 136, "pack field offset");
static_assert(offsetof(EchoBlock, lit_i32) == 144, "pack field offset");
static_assert(offsetof(EchoBlock, lit_f32) == 148, "pack field offset");
static_assert(offsetof(EchoBlock, lit_i64) == 152, "pack field offset");
static_assert(offsetof(EchoBlock, lit_u8) == 160, "pack field offset");
static_assert(offsetof(EchoBlock, var_n) == 164, "pack field offset");
static_assert(offsetof(EchoBlock, expr_mul) == 168, "pack field offset");
static_assert(offsetof(EchoBlock, expr_ceil) == 176, "pack field offset");
static_assert(offsetof(EchoBlock, var_n16) == 184, "pack field offset");
static_assert(offsetof(EchoBlock, scratch) == 192, "pack field offset");
static_assert(offsetof(EchoBlock, k) == 200, "pack field offset");
static_assert(offsetof(EchoBlock, lit_i32_w2) == 204, "pack field offset");
static_assert(offsetof(EchoBlock, tail) == 1272, "pack field offset");

// Layout of the echo kernel's `out` buffer (u8 [kEchoOutBytes]).
constexpr uint32_t kEchoOutBlock = 0;          // the 1280-byte block as the kernel saw it
constexpr uint32_t kEchoOutDirectX = 1280;     // u64: param `x` passed directly (not packed)
constexpr uint32_t kEchoOutDirectOut = 1288;   // u64: param `out` passed directly
constexpr uint32_t kEchoOutXViaPack = 1296;    // f32: block.x[0]
constexpr uint32_t kEchoOutMarkViaPack = 1300; // u32: block.scratch[0..3]
constexpr uint32_t kEchoOutTmaTile = 1304;     // f32[32]: x_map box at coordinate 0
constexpr uint32_t kEchoOutBytes = 1536;

// The marker `test_mark_sm90a` writes into scratch byte i.
KERNRT_TEST_HD constexpr uint8_t echo_mark(uint32_t i) { return static_cast<uint8_t>(i * 7u + 3u); }
constexpr uint32_t kEchoMarkBytes = 64;

// Tile of the TMA copy kernels: box [32, 8] (2-D) or [32, 8, 1] (3-D) of f32.
constexpr uint32_t kTmaBoxCols = 32;
constexpr uint32_t kTmaBoxRows = 8;

}  // namespace kernrt::test
