#!/usr/bin/env bash
# Device run for the attention family (H200, via the device tool's `run`, carry .peer/attention):
# builds the decode and KV-append cubins with the pinned flags, disassembles them (HMMA/UTMALDG
# counts, spills), installs the carried FlashInfer peer, then runs the validation + benchmark
# (validation/attention/run_attention.py) and the KV-append check; results land in $OUT.
# Usage: bash tools/device/attention.sh <commit> [extra run_attention.py args...]
# Deliberately does not check: anything about the host build; program_io is exercised by
# validation/attention/program_io_check.py when build/bin/program_io exists.
set -uo pipefail
COMMIT=${1:-unknown}; shift || true
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
CUB=/tmp/cubins; mkdir -p $CUB
FLAGS="-O3 -std=c++17 --use_fast_math -lineinfo -Xptxas=-v -gencode arch=compute_90a,code=sm_90a -Ikernels"
{
  nvcc $FLAGS -cubin -o $CUB/attention_decode.sm90a.cubin kernels/attention/attention_decode.cu
  nvcc $FLAGS -cubin -o $CUB/kv_append.sm90a.cubin kernels/kv_append/kv_append.cu
  nvcc $FLAGS -cubin -o $CUB/decode_v1.sm90a.cubin validation/attention/variants/decode_v1_static_splits.cu
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
AD=$CUB/attention_decode.sm90a.cubin
python3 validation/attention/run_attention.py --variant "v2:$AD:103552:128:66" \
  --variant "v2-s33:$AD:103552:128:33" --variant "v2-s128:$AD:103552:128:128" \
  --variant "v1:$CUB/decode_v1.sm90a.cubin:201792:160:33" --out "$OUT" --commit "$COMMIT" --warm-cmd "python3 validation/attention/warm_flashinfer.py" "$@" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
mkdir -p "$OUT/fi_so"
find /tmp/fiws -name "*.so" -size -16M 2>/dev/null | head -3 | while read -r f; do cp "$f" "$OUT/fi_so/"; done
ls -la "$OUT/fi_so"; tail -5 "$OUT/fi_warm.log" 2>/dev/null
exit $rc
