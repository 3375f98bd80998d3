#!/usr/bin/env bash
# Device script of the KDA / GDN family (the lent H200, through the device tool's `run`, from
# the repository root, after the build): installs the carried peer wheels into a private
# site, restores a carried Triton cache, summarises the kda cubins' SASS (HMMA, local memory),
# runs validation/kda/run.py under a hard timeout and saves the Triton cache for next time.
# Then examples/kda/run_examples.py runs the pinned example chains through program_io.
# Everything lands in $OUT: kda.jsonl, run.log, program_io.log, sass.txt, triton_cache.tgz.
# Carried (git-ignored): .peer/wheels/*.whl and .peer/kda/*.whl (fla-core 0.6.0, flash-qla
# 0.1.3 with tilelang / apache-tvm-ffi / z3, a FlashKDA wheel built on the device if any),
# optionally .peer/kda/triton_cache.tgz.
# Usage: COMMIT=<sha> BUILD=<build dir, default build> [QUICK=1] [BUDGET=160] bash tools/device/kda.sh
# Exit status: run.py's (0 all checks passed), 124 when the timeout hit.
set -uo pipefail
OUT=${OUT:-/tmp/kda-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
BUDGET=${BUDGET:-160}
export PYTHONUNBUFFERED=1
SITE=/tmp/kda-site
mkdir -p "$SITE"
for w in .peer/wheels/*.whl .peer/kda/*.whl; do
  [ -f "$w" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target "$SITE" "$w" 2>&1 | tail -1
done
export PYTHONPATH=$SITE:$ROOT/runtime/python${PYTHONPATH:+:$PYTHONPATH}
export KERNRT_LIBRARY=${KERNRT_LIBRARY:-$ROOT/$BUILD/lib/libkernrt.so}
export TRITON_CACHE_DIR=/tmp/kda-triton
mkdir -p $TRITON_CACHE_DIR
[ -f .peer/kda/triton_cache.tgz ] && tar -xzf .peer/kda/triton_cache.tgz -C $TRITON_CACHE_DIR

{ for c in "$BUILD"/cubins/kda_*.sm90a.cubin; do
    echo "== $(basename "$c")"
    cuobjdump -res-usage "$c" | grep -E "Function|REG" | paste - - | \
      sed -E 's/.*Function ([a-z0-9_]+).*REG:([0-9]+).*SHARED:([0-9]+).*/\1 REG \2 SHARED \3/'
    cuobjdump -sass "$c" | grep -oE "(HMMA|LDSM|LDL|STL|LDGSTS|BAR)[.A-Z0-9]*" | sort | uniq -c
  done; } > "$OUT/sass.txt" 2>&1

timeout "$BUDGET" python3 validation/kda/run.py --build "$BUILD" --out "$OUT" \
  --commit "${COMMIT:-unknown}" --budget $((BUDGET - 20)) ${QUICK:+--quick} 2>&1 | tee "$OUT/run.log" | \
  grep -E "PASS|FAIL|bench|peer|^\||checks|ceilings" | tail -60
rc=${PIPESTATUS[0]}
# program_io over the pinned example chains (prefill -> decode -> verify -> commit), eager and
# --graph in two processes, bit-identical outputs and state dumps, float64 reference.
if [ -x "$BUILD/bin/program_io" ]; then
  timeout 60 python3 examples/kda/run_examples.py --program-io "$BUILD/bin/program_io" \
    --cubins "$BUILD/cubins/run" --manifests "$BUILD/examples/kda" --work /tmp/kda-pio \
    --jsonl "$OUT/kda.jsonl" --meta "{\"commit\": \"${COMMIT:-unknown}\", \"family\": \"kda\"}" \
    2>&1 | tee "$OUT/program_io.log" | tail -4
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
tar -czf "$OUT/triton_cache.tgz" -C $TRITON_CACHE_DIR . 2>/dev/null
echo "kda.sh: run.py exit $rc"
exit $rc
