#!/usr/bin/env bash
# Device run for the attention family (H200, via the device tool's `run`, carry .peer/attention):
# builds the decode and KV-append cubins with the pinned flags, disassembles them (HMMA/UTMALDG
# counts, spills), installs the carried FlashInfer peer, then runs the validation + benchmark
# (validation/attention/run_attention.py) and the KV-append check; results land in $OUT.
# Usage: bash tools/device/attention.sh <commit> [extra run_attention.py args...]
# Env: BATCHES (run_attention.py --batches, default 1,2,3,4,8,16,32), ROUNDS (default 2);
# PIO=0 skips program_io; a carried .peer/attention/base/attention_decode.cu (the previous
# kernel's source) is built and timed as variant `base` (BASE_SMEM, BASE_SPLITS: its launch,
# by default the shipped geometry);
# DEFS="name=-DKNOB=value[,-DKNOB2=value] ..." adds builds of the shipped source with
# compile-time knobs (a name starting "probe-timeline" also prints its timeline);
# PROBES=1 adds the timing probe (the shipped kernel with %globaltimer stamps, summarised as a
# timeline) and the read-only bandwidth probe.
# program_io (a host build carried as .peer/attention/program_io) runs the generated
# examples/h200/decode.json and validation/attention/program_io_check.py's integration cases,
# the long ones (batch 1-32 at 150k-250k) with the KV as a paged state (--tokens, --fill).
# Deliberately does not check: the host build itself (program_io is built on the host).
set -uo pipefail
COMMIT=${1:-unknown}; shift || true
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
CUB=/tmp/cubins; mkdir -p $CUB
FLAGS="-O3 -std=c++17 --use_fast_math -lineinfo -Xptxas=-v -gencode arch=compute_90a,code=sm_90a -Ikernels"
{
  nvcc $FLAGS -cubin -o $CUB/attention_decode.sm90a.cubin kernels/attention/attention_decode.cu
  nvcc $FLAGS -cubin -o $CUB/kv_append.sm90a.cubin kernels/kv_append/kv_append.cu
  mkdir -p $CUB/variants
  # The previous kernel for a side-by-side run, when a copy of its source was carried.
  if [ -f .peer/attention/base/attention_decode.cu ]; then
    nvcc -I.peer/attention/base $FLAGS -cubin -o $CUB/variants/base.sm90a.cubin .peer/attention/base/attention_decode.cu &
  fi
  # DEFS="name=-DKNOB=value ..." builds the shipped source with each knob as variant `name`.
  for def in ${DEFS:-}; do
    nvcc $FLAGS $(echo "${def#*=}" | tr , ' ') -cubin -o $CUB/variants/${def%%=*}.sm90a.cubin kernels/attention/attention_decode.cu &
  done
  if [ "${PROBES:-0}" = 1 ]; then
    nvcc $FLAGS -DKERNRT_DECODE_PROBE=3 -cubin -o $CUB/variants/probe3.sm90a.cubin kernels/attention/attention_decode.cu &
    nvcc -O3 -arch=sm_90a -o /tmp/read_ceiling validation/attention/read_ceiling.cu &
  fi
  wait
  cuobjdump --dump-sass $CUB/attention_decode.sm90a.cubin > /tmp/ad.sass
  echo "sass: HMMA $(grep -c HMMA /tmp/ad.sass) UTMALDG $(grep -c UTMALDG /tmp/ad.sass) LDSM $(grep -c LDSM /tmp/ad.sass) LDL/STL $(grep -cE 'LDL|STL' /tmp/ad.sass)"
} 2>&1 | grep -E "error|registers|spill|sass:" | tee "$OUT/pre.log"

SITE=/tmp/site; mkdir -p $SITE
if [ -d .peer/attention ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $SITE .peer/attention/*.whl
  tar -xJf .peer/attention/fi_trim.tar.xz -C $SITE
  for so in .peer/attention/so/*.so; do
    [ -f "$so" ] || continue; n=$(basename "$so" .so)
    mkdir -p $SITE/flashinfer/data/aot/$n && cp "$so" $SITE/flashinfer/data/aot/$n/
  done
fi
export PYTHONPATH=$SITE:$ROOT/validation/attention PYTHONUNBUFFERED=1
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=14
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(which nvcc)")")}

python3 validation/attention/kv_append_check.py --cubin $CUB/kv_append.sm90a.cubin 2>&1 | tee -a "$OUT/pre.log"
# program_io: the generated example exactly, then the integration cases (generator-made
# manifests around the h200 op, 1000 graph replays), when a program_io build was carried.
if [ "${PIO:-1}" != 0 ] && [ -x .peer/attention/program_io ]; then
  {
    SHA=$(sha256sum $CUB/attention_decode.sm90a.cubin | cut -d' ' -f1)
    mkdir -p /tmp/ex && sed "s/@SHA256:attention_decode.sm90a@/$SHA/" examples/h200/decode.json > /tmp/ex/decode.json
    python3 tools/gen/example_io.py inputs /tmp/ex/decode.json /tmp/ex
    for mode in "" "--graph --iters 1000"; do
      .peer/attention/program_io --manifest /tmp/ex/decode.json --cubins $CUB --vars seqs=2 --vars tokens=2 $mode \
        --in q=/tmp/ex/q.bin --in kv=/tmp/ex/kv.bin --in table=/tmp/ex/table.bin \
        --in seq=/tmp/ex/seq.bin --in cuq=/tmp/ex/cuq.bin --out out=/tmp/ex/out.bin && \
      echo "examples/h200/decode.json ${mode:-eager}: $(python3 tools/gen/example_io.py check /tmp/ex/decode.json /tmp/ex 2>&1 | tail -1)"
    done
    python3 validation/attention/program_io_check.py --program-io .peer/attention/program_io \
      --cubins $CUB --out "$OUT/program_io.jsonl" --commit "$COMMIT" --long
  } 2>&1 | tee "$OUT/pio.log"
fi

AD=$CUB/attention_decode.sm90a.cubin V=$CUB/variants
SMEM=$(python3 -c "import json; print(json.load(open('kernels/attention/geometry.json'))['shared_mem'])")
SPLITS=$(python3 -c "import json; print(json.load(open('kernels/attention/geometry.json'))['splits'])")
VARS=(--variant "shipped:$AD:$SMEM:128:$SPLITS")
for def in ${DEFS:-}; do VARS+=(--variant "${def%%=*}:$V/${def%%=*}.sm90a.cubin:$SMEM:128:$SPLITS"); done
[ -f $V/base.sm90a.cubin ] && VARS+=(--variant "base:$V/base.sm90a.cubin:${BASE_SMEM:-$SMEM}:128:${BASE_SPLITS:-$SPLITS}")
if [ "${PROBES:-0}" = 1 ]; then
  /tmp/read_ceiling | tee "$OUT/read_ceiling.jsonl"
  VARS+=(--variant "probe-timeline:$V/probe3.sm90a.cubin:$SMEM:128:$SPLITS")
fi
python3 validation/attention/run_attention.py "${VARS[@]}" \
  --batches "${BATCHES:-1,2,3,4,8,16,32}" --iters 100 --rounds "${ROUNDS:-2}" \
  --out "$OUT" --commit "$COMMIT" --warm-cmd "python3 validation/attention/warm_flashinfer.py" "$@" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
tail -5 "$OUT/fi_warm.log" 2>/dev/null
exit $rc
