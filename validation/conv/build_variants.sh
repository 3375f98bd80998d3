#!/usr/bin/env bash
# Builds the bench/check variant cubins of the conv kernels into DIR (default
# .peer/conv/variants) with the pinned nvcc flags of cmake/cubin.cmake plus one -D set each.
# Names: conv_fwd_<tag>_s<span>.sm90a.cubin (span = the grid.y span the harness launches
# with) and conv_update_s<n>[o<order>].sm90a.cubin; `id_*` cubins compute y = x over the forward's
# access pattern (the copy ceiling of that pattern) and are benched, never checked.
# Does not build the shipped cubins (the cmake build does) or anything for sm_100a.
# Usage: bash validation/conv/build_variants.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.peer/conv/variants}
NVCC=${NVCC:-nvcc}
FLAGS="-O3 -std=c++17 --use_fast_math -lineinfo -gencode arch=compute_90a,code=sm_90a -Ikernels -cubin"
mkdir -p "$DIR"
rm -f "$DIR"/conv_*.cubin
fwd() {  # tag, -D flags...
  local tag=$1; shift
  "$NVCC" $FLAGS "$@" -o "$DIR/conv_fwd_$tag.sm90a.cubin" kernels/conv/conv_fwd.cu
}
fwd regs_c8_s32 -DKERNRT_CONV_FWD_KERNEL=0
fwd regs_c4_s32 -DKERNRT_CONV_FWD_KERNEL=0 -DKERNRT_CONV_CHUNK=4 -DKERNRT_CONV_MIN_BLOCKS=4
fwd mb5_s32 -DKERNRT_CONV_MIN_BLOCKS=5
fwd tanh_s32 -DKERNRT_CONV_TANH_SILU=1
fwd bulk_s32 -DKERNRT_CONV_FWD_KERNEL=2
cp "$DIR/conv_fwd_bulk_s32.sm90a.cubin" "$DIR/conv_fwd_bulk_s64.sm90a.cubin"
fwd id_ring_s32 -DKERNRT_CONV_IDENTITY=1
fwd id_regs_s32 -DKERNRT_CONV_IDENTITY=1 -DKERNRT_CONV_FWD_KERNEL=0
for n in 1 2 4; do
  "$NVCC" $FLAGS -DKERNRT_CONV_UPDATE_SEQS=$n -o "$DIR/conv_update_s$n.sm90a.cubin" \
    kernels/conv/conv_update.cu
done
for o in 1 2; do  # fla's cross-lane tap-sum order (conv_update.cu dot_update), 4 seqs/thread
  "$NVCC" $FLAGS -DKERNRT_CONV_UPDATE_ORDER=$o -o "$DIR/conv_update_s4o$o.sm90a.cubin" \
    kernels/conv/conv_update.cu
done
ls -l "$DIR"
