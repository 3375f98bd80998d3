// The PTX wrappers of every kernel family, in one include: kernels/common/ptx/ is the one home
// of inline `asm` in kernels/ (one `asm` per instruction, each function named after it, all in
// namespace kernrt::ptx):
//   ptx/ldst.cuh  shared addresses (and their cluster images: mapa, ld.shared::cluster),
//                 cp.async (plain and zero-filling), non-coherent and hinted global loads,
//                 streaming stores
//   ptx/sync.cuh  mbarrier, proxy fences, elect.sync, bar.sync / bar.arrive, the cluster
//                 barrier, griddepcontrol, %nsmid, %cluster_ctarank
//   ptx/tma.cuh   tensor tile loads, 1-D bulk copies and L2 prefetch, tensormap prefetch
//   ptx/mma.cuh   ldmatrix, mma.sync m16n8k16 bf16 / f16 and m16n8k8 tf32, tf32 conversion,
//                 f16x2 / bf16x2 packing
// A kernel may include the one part it needs instead. What the wrappers deliberately do not
// check (alignment, byte counts, phases) is said in each part.
#pragma once

#include "common/ptx/ldst.cuh"
#include "common/ptx/mma.cuh"
#include "common/ptx/sync.cuh"
#include "common/ptx/tma.cuh"
