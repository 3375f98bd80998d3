// Read-only bandwidth ceiling of the H200 for the decode KV layout (a probe, not a product).
//
// The decode kernels only read KV, so the copy floor (read + write) is not their ceiling. This
// times plain 16-byte loads over a ~16 GiB buffer, beyond L2, three ways:
//   contiguous  every CTA streams one contiguous range;
//   head        the buffer as [page][64 tokens][4 heads][1 KiB]: a CTA reads one head's 1 KiB
//               (K 512 B | V 512 B) of every token of its pages, the decode kernels' pattern;
//   half        as `head`, but K's 512 B and V's 512 B of a token in separate passes over the
//               page, as a ring of K tiles then V tiles sees them.
// Prints one JSON line per pattern: bytes read, median us over 20 launches, TB/s.
// Build: nvcc -O3 -arch=sm_90a -o read_ceiling read_ceiling.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kThreads = 256;
constexpr size_t kPageBytes = 64 * 4 * 1024;  // one layer's page, 4 heads
constexpr int kUnroll = 8;

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Keeps the loads alive: the XOR of everything is stored only if it equals a value it never has.
__device__ __forceinline__ void sink(uint32_t acc, uint32_t* out) {
  if (acc == 0x9e3779b9u) out[threadIdx.x] = acc;
}

__global__ void contiguous(const uint4* buf, size_t n16, uint32_t* out) {
  const size_t per_cta = n16 / gridDim.x;
  const uint4* p = buf + blockIdx.x * per_cta;
  uint32_t acc = 0;
  for (size_t i = threadIdx.x; i + (kUnroll - 1) * kThreads < per_cta; i += kUnroll * kThreads) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = ld_stream(p + i + u * kThreads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  sink(acc, out);
}

// blockIdx.y = head; a CTA's pages are a contiguous range. 256 threads cover 4 tokens' 1 KiB
// (64 x 16 B each) per step; `half` reads bytes [0, 512) of every token first, then [512, 1024).
template <bool kHalf>
__global__ void head_pattern(const uint8_t* buf, size_t pages, uint32_t* out) {
  const size_t per_cta = pages / gridDim.x;
  const uint8_t* base = buf + blockIdx.x * per_cta * kPageBytes + blockIdx.y * 1024;
  uint32_t acc = 0;
  const int tok_in_step = threadIdx.x >> 6;  // 4 tokens per step
  const int col = threadIdx.x & 63;          // 16-byte column of the token's 1 KiB
  for (size_t pg = 0; pg < per_cta; ++pg) {
    const uint8_t* page = base + pg * kPageBytes;
    for (int pass = 0; pass < (kHalf ? 2 : 1); ++pass) {
      // Per pass: 64 tokens; whole: 64 columns of 16 B, half: 32 columns twice.
      uint4 v[kUnroll * 2];
#pragma unroll
      for (int u = 0; u < kUnroll * 2; ++u) {
        int tok, c;
        if (kHalf) {
          const int idx = u * kThreads + threadIdx.x;  // 64 tokens x 32 columns = 2048
          tok = idx >> 5;
          c = (idx & 31) + pass * 32;
        } else {
          tok = u * 4 + tok_in_step;
          c = col;
        }
        if (kHalf && u >= kUnroll) {
          v[u] = make_uint4(0, 0, 0, 0);
          continue;
        }
        v[u] = ld_stream(reinterpret_cast<const uint4*>(page + tok * 4096 + c * 16));
      }
#pragma unroll
      for (int u = 0; u < kUnroll * 2; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  sink(acc, out);
}

template <typename Launch>
float median_us(Launch launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t pages = static_cast<size_t>(sms) * 8 * 62;  // ~16 GiB, split evenly below
  const size_t bytes = pages * kPageBytes;
  uint8_t* buf;
  uint32_t* out;
  CHECK(cudaMalloc(&buf, bytes));
  CHECK(cudaMalloc(&out, kThreads * 4));
  CHECK(cudaMemset(buf, 0x5a, bytes));
  auto report = [&](const char* name, int ctas_per_sm, double read, float us) {
    std::printf("{\"probe\": \"read_ceiling\", \"pattern\": \"%s\", \"ctas_per_sm\": %d, "
                "\"bytes\": %.0f, \"us\": %.1f, \"tb_s\": %.3f}\n",
                name, ctas_per_sm, read, us, read / us / 1e6);
  };
  for (int per_sm : {4, 8}) {
    const int grid = sms * per_sm;
    report("contiguous", per_sm, static_cast<double>(bytes), median_us([&] {
             contiguous<<<grid, kThreads>>>(reinterpret_cast<const uint4*>(buf), bytes / 16, out);
           }));
    const dim3 g2(grid / 4, 4);
    report("head", per_sm, static_cast<double>(bytes), median_us([&] {
             head_pattern<false><<<g2, kThreads>>>(buf, pages, out);
           }));
    report("half", per_sm, static_cast<double>(bytes), median_us([&] {
             head_pattern<true><<<g2, kThreads>>>(buf, pages, out);
           }));
  }
  CHECK(cudaGetLastError());
  CHECK(cudaFree(buf));
  CHECK(cudaFree(out));
  return 0;
}
