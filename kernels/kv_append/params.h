// Layout constants of the KV append kernel, shared by the kernel and its host checks.
//
// Owns: the per-token slot geometry of kernrt's paged KV state (BF16, 4 KV heads, head dim
// 256, page 64): one token slot is 4 heads x [K 512 B | V 512 B] = 4096 bytes, one layer's page
// is 64 slots = 262144 bytes, and a page of the interleaved state is `page_stride` bytes
// (layers x 262144). Deliberately does not check: that a slot's page lies inside the state
// allocation; the caller's slot mapping is trusted (a negative slot means "padding, skip").
#pragma once

#include <cstdint>

namespace kernrt::kv_append {

constexpr int kHeadsKv = 4;
constexpr int kHeadDim = 256;
constexpr int kPage = 64;
constexpr int kSlotBytes = kHeadsKv * 2 * kHeadDim * 2;  // 4096: [head][K|V][dim] bf16
constexpr int kLayerPageBytes = kPage * kSlotBytes;      // 262144
constexpr int kRowBytes = kHeadsKv * kHeadDim * 2;       // 2048: one token of new K (or V)
constexpr int kThreads = kSlotBytes / 16;                // 256 threads, 16 bytes each
static_assert(kLayerPageBytes == 262144, "one layer's page");
static_assert(kThreads == 256, "one CTA writes one token slot");

}  // namespace kernrt::kv_append
