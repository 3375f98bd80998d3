// The 1280-byte TRTLLM-GEN FMHA parameter block (FlashInfer `KernelParams`, v0.6.12 to
// v0.6.18rc3), read by kernrt's sm90 attention kernels exactly as the GB300 cubins read it.
//
// Owns: the byte layout (every offset reference/attention.md §1.2 lists, pinned below by
// static_assert), and the meaning of the fields our decode kernel reads. One block is passed
// by value as the single `const __grid_constant__` kernel parameter; the runtime fills it from
// the manifest's pack (tensormaps encoded at load, pointers and literals per launch).
// Deliberately does not check: that the values are consistent with each other (head counts vs
// tensormap extents, page-table row length vs the table allocation, split count vs the grid
// and the scratch shapes). The manifest generator keeps them consistent; a kernel trusts them.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace kernrt::attention {

// cuda::fast_mod_div<int32_t> as CCCL lays it out: 16 bytes, 4-byte aligned.
struct FastModDiv {
  int32_t divisor;
  uint32_t multiplier;
  uint32_t add;
  int32_t shift;
};
static_assert(sizeof(FastModDiv) == 16, "fast_mod_div is 16 bytes");

// CUtensorMap carries alignas(128) in CUDA 13's cuda.h (64 in older headers), so the block is
// 128-byte aligned; every map sits at a multiple of 128 either way.
struct KernelParams {
  CUtensorMap tma_q;              // 0: Q [tokens][heads_kv][q_per_kv][dim], box 64x6
  CUtensorMap tma_k;              // 128: K pool [pages][64 slots][heads_kv][dim]
  CUtensorMap tma_k_swa_pool;     // 256: unused (DSv4 sliding-window pool)
  CUtensorMap tma_v;              // 384: V pool, same geometry as K
  CUtensorMap tma_o;              // 512: O (our kernels store through ptr_o)
  CUtensorMap tma_k_sf;           // 640: unused (NVFP4 KV scales)
  CUtensorMap tma_v_sf;           // 768: unused
  int32_t logical_grid_dim_x;                 // 896
  int32_t logical_grid_dim_y;                 // 900
  int32_t logical_grid_dim_z;                 // 904
  int32_t pad_908;                            // 908
  void* ptr_o;                                // 912: bf16 [tokens][heads_q][dim]
  void* ptr_sf_o;                             // 920
  const float* ptr_attention_sinks;           // 928
  const int32_t* ptr_cum_seq_lens_q;          // 936
  const int32_t* ptr_cum_seq_lens_kv;         // 944
  const uint32_t* ptr_custom_mask;            // 952
  const int64_t* ptr_custom_mask_offsets;     // 960
  float* ptr_debug_o;                         // 968
  const int32_t* ptr_first_sparse_mask_offsets_kv;  // 976
  int32_t* ptr_multi_ctas_kv_counter;         // 984: split-KV semaphores, zero between launches
  const float* ptr_output_scale;              // 992
  const int32_t* ptr_page_idx_kv;             // 1000: [batch][max_pages_per_seq]
  float* ptr_partial_o;                       // 1008: split-KV partial outputs
  float* ptr_partial_stats;                   // 1016: split-KV (max, sum) pairs
  const float* ptr_sage_attn_sfs_k;           // 1024
  const float* ptr_sage_attn_sfs_p;           // 1032
  const float* ptr_sage_attn_sfs_q;           // 1040
  const float* ptr_sage_attn_sfs_v;           // 1048
  const float* ptr_scale_softmax_log2;        // 1056
  const float* ptr_scale_sf_kv;               // 1064
  const float* ptr_scale_sf_o;                // 1072
  const int32_t* ptr_seq_lens_kv;             // 1080: [batch] KV lengths
  float* ptr_skip_softmax_stats;              // 1088
  float* ptr_softmax_stats;                   // 1096
  const int32_t* ptr_sparse_mla_top_k_lens;   // 1104
  int32_t attention_window_size;              // 1112: INT_MAX, no window
  int32_t batch_size;                         // 1116
  int32_t chunked_attention_size_log2;        // 1120
  float inflate_max;                          // 1124
  int32_t log_num_elts_per_sage_attn_blk_k;   // 1128
  int32_t log_num_elts_per_sage_attn_blk_p;   // 1132
  int32_t log_num_elts_per_sage_attn_blk_q;   // 1136
  int32_t log_num_elts_per_sage_attn_blk_v;   // 1140
  int32_t max_seq_len_q;                      // 1144
  int32_t max_seq_len_kv;                     // 1148
  int32_t max_num_ctas_q;                     // 1152
  int32_t max_num_ctas_kv;                    // 1156: KV splits (grid.x)
  int32_t max_num_pages_per_seq_kv;           // 1160: page-table row length
  int32_t num_heads_kv;                       // 1164
  int32_t num_heads_q;                        // 1168
  int32_t num_heads_q_per_kv;                 // 1172
  FastModDiv num_heads_q_per_kv_divisor;      // 1176
  int64_t num_hidden_elts_o;                  // 1192: heads_q * dim
  int32_t num_pages_in_mem_pool;              // 1200
  int32_t num_tokens_per_cta_q;               // 1204
  int32_t num_tokens_per_page_log2;           // 1208
  int32_t reshape_factor_kv;                  // 1212
  float output_scale;                         // 1216
  float scale_softmax_log2;                   // 1220: softmax scale * log2(e)
  float scale_sf_kv;                          // 1224
  float scale_sf_o;                           // 1228
  float skip_softmax_threshold_scale_factor;  // 1232
  int32_t sparse_attn_top_k;                  // 1236
  int32_t start_token_idx_sf_o;               // 1240
  int32_t sum_of_seq_lens_q;                  // 1244
  int32_t sum_of_seq_lens_kv;                 // 1248
  bool use_block_sparse_attention;            // 1252
  bool uses_shared_paged_kv_idx;              // 1253
};

#define KERNRT_ATTN_AT(field, off) \
  static_assert(offsetof(KernelParams, field) == (off), "KernelParams." #field " offset")
static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
static_assert(sizeof(KernelParams) == 1280, "the TRTLLM-GEN block is 1280 bytes");
static_assert(alignof(KernelParams) % 64 == 0, "tensormaps need 64-byte alignment");
KERNRT_ATTN_AT(tma_q, 0);
KERNRT_ATTN_AT(tma_k, 128);
KERNRT_ATTN_AT(tma_k_swa_pool, 256);
KERNRT_ATTN_AT(tma_v, 384);
KERNRT_ATTN_AT(tma_o, 512);
KERNRT_ATTN_AT(tma_k_sf, 640);
KERNRT_ATTN_AT(tma_v_sf, 768);
KERNRT_ATTN_AT(logical_grid_dim_x, 896);
KERNRT_ATTN_AT(logical_grid_dim_z, 904);
KERNRT_ATTN_AT(ptr_o, 912);
KERNRT_ATTN_AT(ptr_sf_o, 920);
KERNRT_ATTN_AT(ptr_attention_sinks, 928);
KERNRT_ATTN_AT(ptr_cum_seq_lens_q, 936);
KERNRT_ATTN_AT(ptr_cum_seq_lens_kv, 944);
KERNRT_ATTN_AT(ptr_custom_mask, 952);
KERNRT_ATTN_AT(ptr_custom_mask_offsets, 960);
KERNRT_ATTN_AT(ptr_debug_o, 968);
KERNRT_ATTN_AT(ptr_first_sparse_mask_offsets_kv, 976);
KERNRT_ATTN_AT(ptr_multi_ctas_kv_counter, 984);
KERNRT_ATTN_AT(ptr_output_scale, 992);
KERNRT_ATTN_AT(ptr_page_idx_kv, 1000);
KERNRT_ATTN_AT(ptr_partial_o, 1008);
KERNRT_ATTN_AT(ptr_partial_stats, 1016);
KERNRT_ATTN_AT(ptr_sage_attn_sfs_k, 1024);
KERNRT_ATTN_AT(ptr_sage_attn_sfs_v, 1048);
KERNRT_ATTN_AT(ptr_scale_softmax_log2, 1056);
KERNRT_ATTN_AT(ptr_scale_sf_kv, 1064);
KERNRT_ATTN_AT(ptr_scale_sf_o, 1072);
KERNRT_ATTN_AT(ptr_seq_lens_kv, 1080);
KERNRT_ATTN_AT(ptr_skip_softmax_stats, 1088);
KERNRT_ATTN_AT(ptr_softmax_stats, 1096);
KERNRT_ATTN_AT(ptr_sparse_mla_top_k_lens, 1104);
KERNRT_ATTN_AT(attention_window_size, 1112);
KERNRT_ATTN_AT(batch_size, 1116);
KERNRT_ATTN_AT(chunked_attention_size_log2, 1120);
KERNRT_ATTN_AT(inflate_max, 1124);
KERNRT_ATTN_AT(log_num_elts_per_sage_attn_blk_k, 1128);
KERNRT_ATTN_AT(log_num_elts_per_sage_attn_blk_v, 1140);
KERNRT_ATTN_AT(max_seq_len_q, 1144);
KERNRT_ATTN_AT(max_seq_len_kv, 1148);
KERNRT_ATTN_AT(max_num_ctas_q, 1152);
KERNRT_ATTN_AT(max_num_ctas_kv, 1156);
KERNRT_ATTN_AT(max_num_pages_per_seq_kv, 1160);
KERNRT_ATTN_AT(num_heads_kv, 1164);
KERNRT_ATTN_AT(num_heads_q, 1168);
KERNRT_ATTN_AT(num_heads_q_per_kv, 1172);
KERNRT_ATTN_AT(num_heads_q_per_kv_divisor, 1176);
KERNRT_ATTN_AT(num_hidden_elts_o, 1192);
KERNRT_ATTN_AT(num_pages_in_mem_pool, 1200);
KERNRT_ATTN_AT(num_tokens_per_cta_q, 1204);
KERNRT_ATTN_AT(num_tokens_per_page_log2, 1208);
KERNRT_ATTN_AT(reshape_factor_kv, 1212);
KERNRT_ATTN_AT(output_scale, 1216);
KERNRT_ATTN_AT(scale_softmax_log2, 1220);
KERNRT_ATTN_AT(scale_sf_kv, 1224);
KERNRT_ATTN_AT(scale_sf_o, 1228);
KERNRT_ATTN_AT(skip_softmax_threshold_scale_factor, 1232);
KERNRT_ATTN_AT(sparse_attn_top_k, 1236);
KERNRT_ATTN_AT(start_token_idx_sf_o, 1240);
KERNRT_ATTN_AT(sum_of_seq_lens_q, 1244);
KERNRT_ATTN_AT(sum_of_seq_lens_kv, 1248);
KERNRT_ATTN_AT(use_block_sparse_attention, 1252);
KERNRT_ATTN_AT(uses_shared_paged_kv_idx, 1253);
#undef KERNRT_ATTN_AT

}  // namespace kernrt::attention
