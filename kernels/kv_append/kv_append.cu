// KV append for sm_90a: writes the step's new K and V rows into their paged slots, the call a
// program makes before it attends.
//
// Layout (params.h): new K and V are bf16 [tokens][4 heads][256]; the state pointer is the
// layer's base (state + layer * 262144 bytes, the call's offset); token i goes to slot
// slots[i] = page * 64 + offset, i.e. byte page * page_stride + offset * 4096, where head h's
// K takes bytes [h*1024, h*1024 + 512) and its V the next 512.
// Grid (tokens), block 256: thread j moves 16 bytes, heads and K/V in slot order, so one CTA
// reads 2 x 2 KiB and writes one contiguous 4 KiB slot.
// Deliberately does not check: slot bounds against the state allocation, duplicate slots
// (the last writer wins, unordered), or alignment (all pointers must be 16-byte aligned).
#include <cstdint>

#include "kv_append/params.h"

namespace kernrt::kv_append {
namespace {

template <typename Slot>
__device__ __forceinline__ void append_token(const uint8_t* k_new, const uint8_t* v_new,
                                             uint8_t* kv_layer, const Slot* slots, int tokens,
                                             int page_stride) {
  const int token = blockIdx.x;
  if (token >= tokens) return;
  const int64_t slot = static_cast<int64_t>(slots[token]);
  if (slot < 0) return;  // padding token
  const int j = threadIdx.x;
  const int head = j >> 6;           // 64 threads per head: 32 for K, then 32 for V
  const int is_v = (j >> 5) & 1;
  const int chunk = j & 31;          // 16-byte chunk of the 512-byte row
  const uint8_t* src = (is_v ? v_new : k_new) + static_cast<int64_t>(token) * kRowBytes +
                       head * (kHeadDim * 2) + chunk * 16;
  uint8_t* dst = kv_layer + (slot / kPage) * static_cast<int64_t>(page_stride) +
                 (slot % kPage) * kSlotBytes + j * 16;
  *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<const uint4*>(src));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    kv_append_sm90a_bf16_kv4d256p64_i32(const uint8_t* k_new, const uint8_t* v_new,
                                        uint8_t* kv_layer, const int32_t* slots, int tokens,
                                        int page_stride) {
  append_token(k_new, v_new, kv_layer, slots, tokens, page_stride);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    kv_append_sm90a_bf16_kv4d256p64_i64(const uint8_t* k_new, const uint8_t* v_new,
                                        uint8_t* kv_layer, const int64_t* slots, int tokens,
                                        int page_stride) {
  append_token(k_new, v_new, kv_layer, slots, tokens, page_stride);
}

}  // namespace kernrt::kv_append
