#!/usr/bin/env bash
# Device script of the conv family (run on the lent H200 through the `run` tool, from the
# repository root, with `.peer/conv` carried): installs the fla peer from its carried
# wheel, runs validation/conv/check.py (correctness vs float64 reference and fla) and
# validation/conv/bench.py (ours vs fla vs floor), the PNG plot, a SASS summary, and, when
# build/bin/program_io and the pinned manifests were carried, the examples in eager and
# graph mode. Everything lands in $OUT. Cubins come prebuilt by the cmake build in
# .peer/conv/cubins, program_io and the pinned example manifests in .peer/conv/{program_io,
# manifests}, bench variants in .peer/conv/variants (validation/conv/notes.md says how).
# Every variant cubin in .peer/conv/variants is checked (without the peer) and benched too.
# Usage: COMMIT=<sha> bash tools/device/conv.sh
set -o pipefail
OUT=${OUT:-/tmp/conv-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .peer/conv/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD/validation/conv
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
META="{\"date\": \"$(date -u +%F)\", \"gpu\": \"$GPU\", \"commit\": \"${COMMIT:-unknown}\", \"family\": \"conv\"}"
FLAVER=$(python3 -c "import fla; print(fla.__version__)" 2>/dev/null)
echo "gpu=$GPU fla=$FLAVER"
CUB=.peer/conv/cubins
python3 validation/conv/check.py --cubins $CUB --out "$OUT/check.jsonl" --fla --meta "$META" \
  2>&1 | tee "$OUT/check.log"
VAR=""
[ -d .peer/conv/variants ] && VAR="--variants .peer/conv/variants"
python3 validation/conv/bench.py --cubins $CUB --out "$OUT/bench.jsonl" --fla $VAR \
  --peer "fla $FLAVER" --meta "$META" 2>&1 | tee "$OUT/bench.log"
python3 validation/conv/plot.py "$OUT/bench.jsonl" "$OUT/conv_bench.png" || echo "plot failed"
# program_io: the pinned example manifests over the same cubins, eager and graph.
PIO=.peer/conv/program_io
if [ -x $PIO/program_io ]; then
  LD_LIBRARY_PATH=$PIO/lib:${LD_LIBRARY_PATH:-} PATH=$PIO:$PATH python3 examples/conv/run_examples.py \
    --program-io $PIO/program_io --cubins $CUB --manifests .peer/conv/manifests --work /tmp/pio \
    --jsonl "$OUT/check.jsonl" --meta "$META" 2>&1 | tee "$OUT/program_io.log"
fi
# Correctness of every bench variant (no peer), so any of them may become the default.
for v in .peer/conv/variants/conv_fwd_c*.sm90a.cubin; do
  [ -f "$v" ] || continue
  t=$(basename "$v" .sm90a.cubin); span=${t##*s}
  python3 validation/conv/check.py --cubins .peer/conv/variants --fwd "$(basename "$v")" --span "$span" \
    --only fwd --tag "[$t] " --out "$OUT/check.jsonl" --meta "$META" 2>&1 | grep -E "FAIL|passed" | tee -a "$OUT/check.log"
done
for v in .peer/conv/variants/conv_update_s*.sm90a.cubin; do
  [ -f "$v" ] || continue
  t=$(basename "$v" .sm90a.cubin); spt=${t##*_s}; [ "$spt" = 2 ] && continue  # = the default cubin
  python3 validation/conv/check.py --cubins .peer/conv/variants --update "$(basename "$v")" --spt "$spt" \
    --only update --tag "[$t] " --out "$OUT/check.jsonl" --meta "$META" 2>&1 | grep -E "FAIL|passed" | tee -a "$OUT/check.log"
done
{ for c in $CUB/*.cubin; do cuobjdump -res-usage "$c"; cuobjdump -sass "$c" | grep -oE "(LDG|STG|LDL|STL|LDS|STS)[.A-Z0-9]*" | sort | uniq -c; done; } > "$OUT/sass.txt" 2>&1
grep -E "passed|FAIL" "$OUT/check.log" "$OUT/program_io.log" 2>/dev/null | tail -20
tail -8 "$OUT/bench.log"
