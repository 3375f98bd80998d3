#!/usr/bin/env bash
# Builds the bench/check variant cubins of the conv kernels into DIR (default
# .peer/conv/variants) with the pinned nvcc flags of cmake/cubin.cmake plus one -D set each.
# Names: conv_fwd_<tag>_s<span>.sm90a.cubin (span = the grid.y span the harness launches
# with), conv_fwd_<tag>_c<ctas>.sm90a.cubin (grid.y sized to about <ctas> blocks in all: the
# persistent walk 3) and conv_update_s<n>[...].sm90a.cubin (n sequences per thread); `id_*`
# cubins compute y = x over the forward's access pattern (the copy ceiling of that pattern)
# and are benched, never checked.
# Does not build the shipped cubins (the cmake build does) or anything for sm_100a.
# SET picks the variants of one device run: run10 (default: run 9's shipped build, halo
# rows through ld_nc_v4, beside the new halo default), run9b (run 9's second call, the
# runs 3-8 hints beside the then defaults), run9 (store/cp.async hints of the ring, and
# copy_probe.sm90a.cubin from validation/conv/copy_probe.cu), run8 (walk 4) or run6.
# Sets other than the newest build on the current defaults (hints included).
# Usage: [SET=run8] bash validation/conv/build_variants.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.peer/conv/variants}
SET=${SET:-run10}  # which run's variants
NVCC=${NVCC:-nvcc}
FLAGS="-O3 -std=c++17 --use_fast_math -lineinfo -gencode arch=compute_90a,code=sm_90a -Ikernels -cubin"
mkdir -p "$DIR"
rm -f "$DIR"/conv_*.cubin "$DIR"/copy_probe.*.cubin
fwd() {  # tag, -D flags...
  local tag=$1; shift
  "$NVCC" $FLAGS "$@" -o "$DIR/conv_fwd_$tag.sm90a.cubin" kernels/conv/conv_fwd.cu
}
upd() {  # tag, -D flags...
  local tag=$1; shift
  "$NVCC" $FLAGS "$@" -o "$DIR/conv_update_$tag.sm90a.cubin" kernels/conv/conv_update.cu
}
# every variant cubin of the set is checked (except id_*) and benched by tools/device/conv.sh
case $SET in
run10)  # run 9's shipped forward (halo rows through ld_nc_v4), the reference of the same run
  fwd halo0_s32 -DKERNRT_CONV_HALO_NC=0
  ;;
run9b)  # the shipped ring of runs 3-8 (.cs stores, cp.async .L2::256B) next to the new defaults
  fwd old_s32 -DKERNRT_CONV_STORE=0 -DKERNRT_CONV_CP_L2=256 -DKERNRT_CONV_HALO_NC=0
  fwd ca_s32 -DKERNRT_CONV_CP_CA=1 -DKERNRT_CONV_HALO_NC=0
  fwd halo_s32 -DKERNRT_CONV_HALO_NC=1
  H0=-DKERNRT_CONV_HALO_NC=0  # the halo default of run 9, so the set rebuilds the same
  fwd id_ring_s32 -DKERNRT_CONV_IDENTITY=1 $H0
  fwd id_ring_old_s32 -DKERNRT_CONV_IDENTITY=1 -DKERNRT_CONV_STORE=0 -DKERNRT_CONV_CP_L2=256 $H0
  fwd id_lin_s32 -DKERNRT_CONV_FWD_KERNEL=9
  ;;
run9)  # the ring with y's store hint / cp.async's L2 hint changed, the copy probes (as run at
  # 1f97bf7, whose defaults were STORE=0 CP_L2=256: both named here so the set rebuilds the same)
  fwd st_wb_s32 -DKERNRT_CONV_STORE=1 -DKERNRT_CONV_CP_L2=256
  fwd st_na_s32 -DKERNRT_CONV_STORE=2 -DKERNRT_CONV_CP_L2=256
  fwd cp0_s32 -DKERNRT_CONV_STORE=0 -DKERNRT_CONV_CP_L2=0
  fwd st_wb_cp0_s32 -DKERNRT_CONV_STORE=1 -DKERNRT_CONV_CP_L2=0
  OLD="-DKERNRT_CONV_STORE=0 -DKERNRT_CONV_CP_L2=256"
  fwd r2s10_s32 -DKERNRT_CONV_RING_ROWS=2 -DKERNRT_CONV_RING_STAGES=10 $OLD  # finer refills
  fwd r6s3_s32 -DKERNRT_CONV_RING_ROWS=6 -DKERNRT_CONV_RING_STAGES=3 $OLD    # coarser refills
  fwd id_ring_s32 -DKERNRT_CONV_IDENTITY=1 $OLD
  fwd id_ring_wb_s32 -DKERNRT_CONV_IDENTITY=1 -DKERNRT_CONV_STORE=1 -DKERNRT_CONV_CP_L2=256
  fwd id_ring_cp0_s32 -DKERNRT_CONV_IDENTITY=1 -DKERNRT_CONV_STORE=0 -DKERNRT_CONV_CP_L2=0
  fwd id_lin_s32 -DKERNRT_CONV_FWD_KERNEL=9
  "$NVCC" ${FLAGS/-lineinfo/} -o "$DIR/copy_probe.sm90a.cubin" validation/conv/copy_probe.cu
  ;;
run8)  # walk 4 (warp walk, register pipeline of P rows, L2 bulk prefetch Q rows ahead)
  fwd pipe_p4_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=4
  fwd pipe_p8mb3_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=8 -DKERNRT_CONV_MIN_BLOCKS=3
  fwd pipe_p4q12_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=4 -DKERNRT_CONV_PREFETCH=12
  fwd pipe_p4q20_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=4 -DKERNRT_CONV_PREFETCH=20
  for s in 16 64; do  # same cubin, other spans (the harness launches by the name's span)
    cp "$DIR/conv_fwd_pipe_p4q12_s32.sm90a.cubin" "$DIR/conv_fwd_pipe_p4q12_s$s.sm90a.cubin"
  done
  fwd id_pipe_p4_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=4 -DKERNRT_CONV_IDENTITY=1
  fwd id_pipe_p4q12_s32 -DKERNRT_CONV_FWD_KERNEL=4 -DKERNRT_CONV_PIPE=4 -DKERNRT_CONV_PREFETCH=12 \
    -DKERNRT_CONV_IDENTITY=1
  # the two copy references of run 6: the ring's pattern and the plain grid-strided copy
  fwd id_ring_s32 -DKERNRT_CONV_IDENTITY=1
  fwd id_lin_s32 -DKERNRT_CONV_FWD_KERNEL=9
  ;;
run6)
  fwd regs_c8_s32 -DKERNRT_CONV_FWD_KERNEL=0
  fwd mb5_s32 -DKERNRT_CONV_MIN_BLOCKS=5
  fwd bulk_s32 -DKERNRT_CONV_FWD_KERNEL=2
  fwd id_ring_s32 -DKERNRT_CONV_IDENTITY=1
  # walk 3 (persistent blocks over chunks of k ring stages): c<ctas> = one wave of blocks
  fwd chunk_k8_c528 -DKERNRT_CONV_FWD_KERNEL=3 -DKERNRT_CONV_CHUNK_STAGES=8
  fwd chunk_k4_c528 -DKERNRT_CONV_FWD_KERNEL=3 -DKERNRT_CONV_CHUNK_STAGES=4
  fwd chunk_k8mb5_c660 -DKERNRT_CONV_FWD_KERNEL=3 -DKERNRT_CONV_CHUNK_STAGES=8 -DKERNRT_CONV_MIN_BLOCKS=5
  fwd id_chunk_k8_c528 -DKERNRT_CONV_FWD_KERNEL=3 -DKERNRT_CONV_CHUNK_STAGES=8 -DKERNRT_CONV_IDENTITY=1
  # walk 9: y = x as a plain grid-strided copy, as many blocks as the ring (s32) or 12 per SM (40 registers)
  fwd id_lin_s32 -DKERNRT_CONV_FWD_KERNEL=9
  cp "$DIR/conv_fwd_id_lin_s32.sm90a.cubin" "$DIR/conv_fwd_id_lin_c1584.sm90a.cubin"
  upd s4                                          # the shipped build, benched at block 128 too
  upd s4o0 -DKERNRT_CONV_UPDATE_ORDER=0           # runs 2-5's tap order (one fma chain)
  upd s4mb4 -DKERNRT_CONV_UPDATE_MIN_BLOCKS=4     # <= 128 registers: 1024 blocks of 64 in one wave
  upd s8 -DKERNRT_CONV_UPDATE_SEQS=8              # 8 sequences per thread: 512 blocks of 64, one wave
  ;;
*) echo "unknown SET $SET (run10, run9b, run9, run8, run6)" >&2; exit 2 ;;
esac
ls -l "$DIR"
