// Compile check of kernels/common: every PTX wrapper and block reduction used once, so that
// both archs (sm_90a, sm_100a) compile all of them, also those no shipped kernel calls yet.
// Entry: test_ptx_wrappers_sm90a(const float* g, float* o, const CUtensorMap* map), never
// launched (no manifest names it; its values are meaningless).
// Deliberately does not check what the instructions do: the kernels that use them do.
#include <cuda.h>

#include <cstdint>

#include "common/block.cuh"
#include "common/ptx.cuh"

namespace kernrt::test {
namespace {

__device__ __forceinline__ void use_ldst(uint8_t* s, const float* g, float* o) {
  ptx::cp_async_cg_16(s, g);
  ptx::cp_async_cg_16_zfill(s + 16, g, 8);
  ptx::cp_async_ca_4_zfill(s + 32, g, 4);
  ptx::cp_async_commit_group();
  ptx::cp_async_wait_group<0>();
  const uint4 a = ptx::ld_global_nc_v4(g);
  const uint2 b = ptx::ld_global_nc_v2(g + 4);
  const uint32_t c = ptx::ld_global_nc_u32(g + 6) + ptx::ld_global_nc_u16(g + 7);
  const uint4 d = ptx::ld_global_nc_na_l2_256_v4(g + 8);
  ptx::st_global_cs_v4(o, make_uint4(a.x ^ d.x, b.x ^ d.y, c ^ d.z, a.w ^ d.w));
}

__device__ __forceinline__ void use_sync_tma(uint8_t* s, uint64_t* bar, const float* g,
                                             const CUtensorMap* map) {
  if (ptx::elect_one_sync()) {
    ptx::prefetch_tensormap(map);
    ptx::mbarrier_init(bar, 1);
    ptx::fence_mbarrier_init();
    ptx::fence_proxy_async_shared();
    ptx::fence_proxy_async();
    ptx::mbarrier_arrive_expect_tx(bar, 16 + 5 * 128);
    ptx::bulk_load(s + 64, g, 16, bar);
    ptx::bulk_prefetch_l2(g, 256);
    ptx::tma_load_2d(s + 128, map, bar, 0, 0);
    ptx::tma_load_3d(s + 256, map, bar, 0, 0, 0);
    ptx::tma_load_4d(s + 384, map, bar, 0, 0, 0, 0);
    ptx::tma_load_5d(s + 512, map, bar, 0, 0, 0, 0, 0);
  }
  ptx::mbarrier_wait(bar, 0);
  ptx::mbarrier_arrive(bar);
  ptx::griddepcontrol_wait();
  ptx::griddepcontrol_launch_dependents();
  ptx::bar_sync(1, 64);
  ptx::bar_arrive(2, 64);
}

__device__ __forceinline__ float use_cluster(const uint8_t* s) {
  ptx::barrier_cluster_arrive_release();
  ptx::barrier_cluster_wait_acquire();
  const uint32_t rank = ptx::cluster_ctarank();
  const float2 v = ptx::ld_shared_cluster_v2_f32(ptx::mapa_shared_cluster(ptx::smem_u32(s), rank));
  return v.x + v.y;
}

__device__ __forceinline__ float use_mma(const uint8_t* s) {
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  uint32_t r0, r1, r2, r3;
  ptx::ldmatrix_x4(r0, r1, r2, r3, ptx::smem_u32(s));
  ptx::mma_m16n8k16_bf16(acc, r0, r1, r2, r3, r0, r1);
  ptx::ldmatrix_x4_trans(r0, r1, r2, r3, ptx::smem_u32(s));
  ptx::mma_m16n8k16_f16(acc, r0, r1, r2, r3, r2, r3);
  const uint32_t tf = __float_as_uint(ptx::cvt_rna_tf32(acc[0])) ^ __float_as_uint(ptx::cvt_rn_tf32(acc[1]));
  ptx::mma_m16n8k8_tf32(acc, tf, r1, r2, r3, ptx::pack_f16x2(acc[1], acc[2]),
                        ptx::pack_bf16x2(acc[2], acc[3]));
  return acc[0] + acc[1] + acc[2] + acc[3];
}

}  // namespace
}  // namespace kernrt::test

extern "C" __global__ void __launch_bounds__(128)
    test_ptx_wrappers_sm90a(const float* g, float* o, const CUtensorMap* map) {
  namespace ptx = kernrt::ptx;
  namespace block = kernrt::block;
  __shared__ alignas(128) uint8_t s[4096];
  __shared__ alignas(8) uint64_t bar;
  __shared__ int tmp[24];
  kernrt::test::use_ldst(s, g, o);
  kernrt::test::use_sync_tma(s, &bar, g, map);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  int t = block::sum<4>(ptx::nsmid(), tmp, warp, lane);
  __syncthreads();
  t += block::exclusive_scan<4>(t, tmp + 8, warp, lane);
  __syncthreads();
  t += block::argmax<4>(t, lane, tmp + 16, warp, lane);
  o[threadIdx.x + 4] =
      kernrt::test::use_mma(s) + kernrt::test::use_cluster(s) + static_cast<float>(t);
}
