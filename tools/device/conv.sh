#!/usr/bin/env bash
# Device script of the conv family (run on the lent H200 through the `run` tool, from the
# repository root, with `.peer/conv` carried). In this order, each step under a share of a
# fixed time budget (BUDGET seconds, default 235) so the run ends inside the call's limit:
#   1. the carried cubins: built from exactly these sources (the sha256 of every
#      kernels/conv file against cubins/SOURCES.sha256, written by the host build) and
#      pinned in the carried example manifests (sha256 of each cubin); SASS summary;
#   2. check.py: every case (forward, update, verify) on the shipped cubins with fla as the
#      peer, fla's forward on one config (no autotune: one compile per shape), its update
#      kernel autotuned (its W-tap sum follows the config, validation/conv/notes.md run 4);
#      with VARIANTS=1 also every variant cubin carried in variants/ and the shipped fwd at
#      span 256, each against fla too (the register walk first: the fallback default);
#   3. program_io: the pinned examples over the shipped cubins, eager and --graph;
#   4. bench.py: ours vs fla (autotuned) vs floor vs the torch copy of the same bytes; with
#      VARIANTS=1 also the identity cubins, the variants that passed step 2 (a passing
#      persistent `chunk_k8_c528` also at two waves, c1056) and the shipped fwd with one wave
#      of long spans (--extra-ctas $CTAS, default 528);
#   5. the PNG plot, and fla's Triton cache as $OUT/triton_cache.tgz.
# COPY=1 (run 9): before step 2, validation/conv/copy_bench.py times the copy probes carried
# in variants/copy_probe.sm90a.cubin against torch's copy and cuMemcpyDtoDAsync (COPY_S
# seconds at most) into $OUT/copy.{jsonl,log}, and step 5 is left out (8 files in $OUT).
# Everything lands in $OUT (8 files).
# Usage: COMMIT=<sha> [VARIANTS=1 [CHECK_SPANS=256] [CTAS=528]] [COPY=1] bash tools/device/conv.sh
set -o pipefail
OUT=${OUT:-/tmp/conv-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$SECONDS
BUDGET=${BUDGET:-235}
CHECK_S=${CHECK_S:-140}  # the check's share (it runs every variant's cases too with VARIANTS=1)
VARIANTS=${VARIANTS:-0}
# VARIANTS=1 only: the shipped fwd also checked and benched at these spans (comma list), and
# benched with one wave of long spans (CTAS blocks); empty turns either off
CHECK_SPANS=${CHECK_SPANS-256}
CTAS=${CTAS-528}
COPY=${COPY:-0}
COPY_S=${COPY_S:-60}
# lim WANT RESERVE: WANT seconds, or what is left after RESERVE more seconds of later steps.
lim() {
  local l=$((BUDGET - (SECONDS - T0) - $2))
  [ "$l" -lt "$1" ] && echo $((l < 5 ? 5 : l)) || echo "$1"
}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .peer/conv/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD/validation/conv
export TRITON_CACHE_DIR=/tmp/triton-cache
mkdir -p $TRITON_CACHE_DIR
[ -f .peer/conv/triton_cache.tgz ] && tar -xzf .peer/conv/triton_cache.tgz -C $TRITON_CACHE_DIR
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
META="{\"date\": \"$(date -u +%F)\", \"gpu\": \"$GPU\", \"commit\": \"${COMMIT:-unknown}\", \"family\": \"conv\"}"
FLAVER=$(python3 -c "import fla; print(fla.__version__)" 2>/dev/null)
echo "gpu=$GPU fla=$FLAVER"
CUB=.peer/conv/cubins
VAR=.peer/conv/variants
PIO=.peer/conv/program_io

# 1. cubins: built from these sources, and the pinned manifests must name exactly these files.
(cd kernels/conv && sha256sum -c --quiet ../../$CUB/SOURCES.sha256) \
  && echo "cubin sources: match kernels/conv" || echo "cubin sources: STALE (cubins not built from kernels/conv)"
{ for c in $CUB/*.cubin; do
    h=$(sha256sum "$c" | cut -c1-64)
    grep -l "$h" .peer/conv/manifests/*.json >/dev/null && echo "pinned $h $(basename "$c")" \
      || echo "NOT PINNED $(basename "$c")"
  done
  for c in $CUB/*.cubin $([ "$VARIANTS" = 1 ] && echo $VAR/*.cubin); do
    echo "== $(basename "$c")"; cuobjdump -res-usage "$c" | grep -E "Function|REG" | paste - - | \
      sed -E 's/.*Function ([a-z0-9_]+).*REG:([0-9]+).*SHARED:([0-9]+).*/\1 REG \2 SHARED \3/'
  done
  for c in $CUB/conv_fwd.sm90a.cubin; do
    cuobjdump -sass "$c" | grep -oE "(LDG|STG|LDL|STL|LDS|STS|LDGSTS|UBLKCP|SYNCS)[.A-Z0-9]*" | sort | uniq -c
  done; } > "$OUT/sass.txt" 2>&1
grep -E "PINNED|pinned" "$OUT/sass.txt"

# 1b. copy probes: which property of an SM copy sets its rate (run 9).
if [ "$COPY" = 1 ]; then
  cuobjdump -sass $VAR/copy_probe.sm90a.cubin | awk '/Function :/ {f=$3} /(LDG|STG)/ {
    match($0, /(LDG|STG)[.A-Z0-9_]*/); k=f" "substr($0, RSTART, RLENGTH); if (!(k in s)) {s[k]=1; print k}}' \
    | grep -E "_u4$|_u4 " >> "$OUT/sass.txt"
  timeout $(lim $COPY_S 150) python3 validation/conv/copy_bench.py --cubin $VAR/copy_probe.sm90a.cubin \
    --out "$OUT/copy.jsonl" --meta "$META" > "$OUT/copy.log" 2>&1
  echo "copy rc=$? after $((SECONDS - T0)) s"; tail -6 "$OUT/copy.log"
fi

# 2. correctness, shipped then variants.
rm -f /tmp/conv-passed
VARGS=""
[ "$VARIANTS" = 1 ] && VARGS="--variants $VAR --extra-spans=$CHECK_SPANS --passed /tmp/conv-passed --variant-peer"
timeout $(lim $CHECK_S 90) python3 validation/conv/check.py --cubins $CUB --out "$OUT/check.jsonl" --fla \
  --meta "$META" $VARGS 2>&1 | tee "$OUT/check.log" | grep -E "FAIL|passed|Error|error|single config"
echo "check rc=$? after $((SECONDS - T0)) s; passing variants: $(tr '\n' ' ' 2>/dev/null < /tmp/conv-passed)"

# 3. program_io over the shipped cubins.
if [ -x $PIO/program_io ]; then
  LD_LIBRARY_PATH=$PIO/lib:${LD_LIBRARY_PATH:-} PATH=$PIO:$PATH timeout $(lim 30 60) python3 \
    examples/conv/run_examples.py --program-io $PIO/program_io --cubins $CUB \
    --manifests .peer/conv/manifests --work /tmp/pio --jsonl "$OUT/check.jsonl" --meta "$META" \
    2>&1 | tee "$OUT/program_io.log" | tail -8
  echo "program_io rc=$? after $((SECONDS - T0)) s"
fi

# 4. bench: with VARIANTS=1 the identity cubins, and the variants that passed step 2.
rm -rf /tmp/benchvar && mkdir -p /tmp/benchvar
[ "$VARIANTS" = 1 ] && cp $VAR/conv_fwd_id_*.sm90a.cubin /tmp/benchvar/ 2>/dev/null
SPANS=""
[ "$VARIANTS" = 1 ] || CTAS=""
for t in $(cat /tmp/conv-passed 2>/dev/null); do
  case $t in
    ours_s*) SPANS="$SPANS,${t#ours_s}" ;;
    update_*) t=${t#update_}; cp $VAR/conv_update_${t%b128}.sm90a.cubin /tmp/benchvar/ ;;
    *) cp $VAR/conv_fwd_$t.sm90a.cubin /tmp/benchvar/ ;;
  esac
  [ "$t" = chunk_k8_c528 ] && cp $VAR/conv_fwd_$t.sm90a.cubin /tmp/benchvar/conv_fwd_chunk_k8_c1056.sm90a.cubin
done
timeout $(lim 130 5) python3 validation/conv/bench.py --cubins $CUB --out "$OUT/bench.jsonl" --fla \
  --variants /tmp/benchvar --extra-spans "${SPANS#,}" --extra-ctas "$CTAS" --peer "fla $FLAVER" --meta "$META" \
  2>&1 | tee "$OUT/bench.log" | tail -9
echo "bench rc=$? after $((SECONDS - T0)) s"
if [ "$COPY" != 1 ]; then
  python3 validation/conv/plot.py "$OUT/bench.jsonl" "$OUT/conv_bench.png" >/dev/null 2>&1 || echo "plot failed"
  tar -czf "$OUT/triton_cache.tgz" -C $TRITON_CACHE_DIR . 2>/dev/null
fi
grep -E "passed|FAIL" "$OUT/check.log" "$OUT/program_io.log" 2>/dev/null | tail -24
