// PTX wrappers for warp-specialised kernels (one inline `asm` per instruction, each function
// named after it): per-warpgroup register reallocation (named barriers with a thread count are
// sync.cuh's bar_sync / bar_arrive).
//
// Owns: setmaxnreg.inc / setmaxnreg.dec (sm_90a and later), an acquire load and an acq_rel add
// of a global int, and an mbarrier phase wait whose spin loop lives inside one asm block.
// Deliberately does not check: that every warp of a warpgroup executes setmaxnreg with the
// same count (.sync.aligned), or that the counts of all warpgroups fit the register file (65536
// per SM).
#pragma once

#include <cstdint>

namespace kernrt::ptx {

// setmaxnreg.inc.sync.aligned.u32 N: this warp may use up to N registers per thread (it
// blocks until the pool released by setmaxnreg.dec elsewhere covers the increase).
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM90_ALL) || __CUDA_ARCH__ >= 1000)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

// setmaxnreg.dec.sync.aligned.u32 N: this warp gives back registers above N per thread.
template <uint32_t N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM90_ALL) || __CUDA_ARCH__ >= 1000)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

// ld.acquire.gpu.global.b32: a load that later loads of this thread cannot pass, seeing what
// other CTAs released (fence or atomic) before the value was written.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// atom.acq_rel.gpu.global.add.s32: adds v and returns the old value; releases what this thread
// (and, through a barrier before it, its CTA) wrote, and acquires what the writers it follows
// released.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// mbarrier.try_wait.parity.shared::cta.b64 in a loop inside the asm: returns once the phase
// with `parity` completed. The branch stays invisible to the compiler, so code after the wait
// is known to be converged (a C++ spin loop there makes ptxas serialise every later wgmma).
__device__ __forceinline__ void mbarrier_wait_converged(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_again:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_again;\n"
      "}\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
      "r"(parity)
      : "memory");
}

// mbarrier.arrive.shared::cta.b64 by the threads where `pred` holds, predicated inside the asm
// (no branch the compiler could see as divergence around in-flight wgmma).
__device__ __forceinline__ void mbarrier_arrive_if(uint64_t* bar, bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n"
      "}\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
      "r"(static_cast<int>(pred))
      : "memory");
}

}  // namespace kernrt::ptx
