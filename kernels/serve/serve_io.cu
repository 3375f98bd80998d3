// The serving ends of the hybrid example's stack: token ids in (embedding rows) and token
// ids out (greedy argmax over f32 logits). They exist so the generated manifest carries the
// serving protocol's `token` and `tokens` fills; the mixers in between are the kernel
// families of kernels/ and the GEMM built-ins.
//
// Entries (plain params, no pdl: each one waits for the whole previous launch):
//   serve_embed_sm90a_bf16(tokens, table, out, row_vecs, vocab)   grid (rows), block 256
//     out[r, :] = table[tokens[r], :]; a row is row_vecs 16-byte vectors (hidden / 8 bf16);
//     a token outside [0, vocab) gives a zero row (the manifest's domain refuses it on
//     host writes; zero-copy writes are not checked).
//   serve_argmax_rows_sm90a_f32(logits, out, vocab)                grid (rows), block 256
//     out[r] = argmax logits[r, :]
//   serve_argmax_last_sm90a_f32(logits, cu_seqlens, out, vocab)    grid (seqs), block 256
//     out[n] = argmax logits[cu_seqlens[n + 1] - 1, :] (each sequence's last row)
// Ties go to the lowest index; NaN never wins (comparisons with NaN are false), so an all-NaN
// row answers 0. Contract not checked here: logits rows are `vocab` floats apart, tables
// and outputs are 16-byte aligned (kernrt's allocations are 256-byte aligned).
#include <cstdint>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void better(float& best, int& idx, float v, int i) {
  if (v > best || (v == best && i < idx)) {
    best = v;
    idx = i;
  }
}

// One block's argmax of row[0, vocab) -> out (thread 0 writes).
__device__ __forceinline__ void argmax_row(const float* row, int vocab, int32_t* out) {
  float best = -__int_as_float(0x7f800000);  // -inf
  int idx = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += kThreads) better(best, idx, row[i], i);
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int j = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, v, j);
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) better(best, idx, sv[w], si[w]);
    *out = idx == 0x7fffffff ? 0 : idx;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
serve_embed_sm90a_bf16(const int32_t* tokens, const uint4* table, uint4* out, int32_t row_vecs,
                       int32_t vocab) {
  const int64_t r = blockIdx.x;
  const int32_t t = tokens[r];
  const bool ok = t >= 0 && t < vocab;
  const uint4* src = table + static_cast<int64_t>(ok ? t : 0) * row_vecs;
  uint4* dst = out + r * row_vecs;
  for (int i = threadIdx.x; i < row_vecs; i += kThreads) dst[i] = ok ? src[i] : make_uint4(0, 0, 0, 0);
}

extern "C" __global__ void __launch_bounds__(kThreads)
serve_argmax_rows_sm90a_f32(const float* logits, int32_t* out, int32_t vocab) {
  argmax_row(logits + static_cast<int64_t>(blockIdx.x) * vocab, vocab, out + blockIdx.x);
}

extern "C" __global__ void __launch_bounds__(kThreads)
serve_argmax_last_sm90a_f32(const float* logits, const int32_t* cu_seqlens, int32_t* out,
                            int32_t vocab) {
  const int64_t row = static_cast<int64_t>(cu_seqlens[blockIdx.x + 1]) - 1;
  argmax_row(logits + (row < 0 ? 0 : row) * vocab, vocab, out + blockIdx.x);
}
