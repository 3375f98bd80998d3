#!/usr/bin/env bash
# The one device run (the lent H200 through the device tool's `run`, from the repository root):
#
#   tools/device/run.sh FAMILY...        FAMILY: runtime attention prefill conv kda hybrid nccl
#
#   1. configures with the `h200` preset (CMakePresets.json: Release, Ninja, build-h200,
#      dependencies from the carried .deps/prefix that tools/device/deps.sh makes) and builds
#      everything; with KERNRT_DECODE_BASE=<a kernels/ folder> also the base decode kernel
#      (KERNRT_BUILD_VARIANTS, kernels/attention/CMakeLists.txt) for a side-by-side timing;
#   2. runs the GPU tests (`ctest --preset h200 -L gpu`);
#   3. runs each FAMILY in the order given. `runtime`: no GPU test may have skipped, the
#      runtime-overhead benchmark, and compute-sanitizer memcheck of program_io over the test
#      manifests (eager and graph). Every other family:
#        python3 validation/<family>/run.py --build build-h200 --out $OUT/<family> --commit <sha>
#      when that file exists (otherwise the summary says it is absent); `prefill` runs
#      validation/attention/prefill_run.py the same way; with KERNRT_DECODE_BASE the attention
#      family also gets --base attention_decode_base.sm90a (timed beside ours).
#
# Env: OUT (results and logs, default /tmp/kernrt-out); BUDGET_S (seconds for the whole run,
# default 540: every step runs under `timeout` with what is left, the build keeps 60 s per
# later step, and each family gets an equal share of what is left at its turn); COMMIT (the sha
# recorded in results, default git's HEAD or "unknown"; pass it from the dev machine: the device
# tool carries the working tree, and the .git it finds there can name an older commit); KERNRT_DECODE_BASE (above);
# ARGS_<family> (more arguments for that family's script, e.g. ARGS_attention="--variant
# mine=<entry>"); BUDGET_<family> (its seconds instead of an equal share of what is left);
# SKIP_BUILD=1 and SKIP_CTEST=1 (a second call on a warm machine whose build-h200 is current);
# CALL (a label of this device call, e.g. d7: every validation row records it as `call`).
# Carried, git-ignored folders: .deps/prefix (tools/device/deps.sh), .shared (a copy of
# ../shared, which the corpus tests read), .peer/site (peers' wheels unpacked on the dev machine
# by tools/device/peers.sh; it goes on PYTHONPATH after runtime/python).
# Writes under $OUT: summary.txt (also printed), build.log (its last 400 lines), sass.txt (every
# runnable cubin's registers, shared and local bytes, LDL/STL count), ctest-gpu.log,
# runtime/ (bench JSONL and markdown, bench.log, sanitizer.log), <family>.log and <family>/.
# Exit status: 0 every step passed; 1 a step failed or ran out of time; 2 bad usage or the
# configure failed. Deliberately never installs anything and never touches the GPU's settings.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
FAMILIES=(runtime attention prefill conv kda hybrid nccl)
usage() {
  echo "usage: tools/device/run.sh FAMILY... (families: ${FAMILIES[*]})" >&2
  exit 2
}
[ $# -ge 1 ] || usage
for f in "$@"; do
  [[ " ${FAMILIES[*]} " == *" $f "* ]] || { echo "run.sh: unknown family \`$f\`" >&2; usage; }
done

OUT=${OUT:-/tmp/kernrt-out}
BUDGET_S=${BUDGET_S:-540}
COMMIT=${COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
B=$ROOT/build-h200
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
T0=$SECONDS
status=0
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET_S - (SECONDS - T0))); }
# within SECONDS LOG CMD...: CMD under a time limit, its output appended to LOG; CMD's status
# (124 or 137: it ran out of time).
within() {
  local s=$1 log=$2
  shift 2
  if [ "$s" -lt 5 ]; then
    echo "run.sh: no time left for: $*" >> "$log"
    return 124
  fi
  timeout -k 10 "$s" "$@" >> "$log" 2>&1
}

# The corpus tests read ../shared, which does not travel with the checkout.
if [ ! -e "$ROOT/../shared" ] && [ -d "$ROOT/.shared" ]; then ln -s "$ROOT/.shared" "$ROOT/../shared"; fi
export PYTHONPATH="$ROOT/runtime/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d "$ROOT/.peer/site" ] && export PYTHONPATH="$PYTHONPATH:$ROOT/.peer/site"
[ -n "${CALL:-}" ] && export KERNRT_CALL="$CALL"  # the rows' `call` (validation/common/bench.py)

GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
say "run.sh $*: commit $COMMIT; gpu ${GPU:-none}; $(date -u +%FT%TZ); budget ${BUDGET_S} s"

# ---- 1. configure + build --------------------------------------------------------------------
VARIANTS=(-DKERNRT_BUILD_VARIANTS=OFF)
[ -n "${KERNRT_DECODE_BASE:-}" ] &&
  VARIANTS=(-DKERNRT_BUILD_VARIANTS=ON "-DKERNRT_DECODE_BASE=$KERNRT_DECODE_BASE")
: > "$OUT/build.log"
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -f "$B/build.ninja" ]; then
  say "build: skipped (SKIP_BUILD=1, $B exists)"
elif ! within $(($(left) - 30)) "$OUT/build.log" cmake --preset h200 "${VARIANTS[@]}"; then
  say "configure FAILED (build.log)"
  tail -30 "$OUT/build.log"
  exit 2
fi
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -f "$B/build.ninja" ]; then
  rc=0
else
  within $(($(left) - 60 * ($# + 1))) "$OUT/build.log" cmake --build --preset h200
  rc=$?
fi
if [ "${SKIP_BUILD:-0}" = 1 ] && [ -f "$B/build.ninja" ]; then
  :
elif [ $rc -eq 0 ]; then
  say "build: ok after $((SECONDS - T0)) s"
elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  status=1
  say "build: out of time after $((SECONDS - T0)) s (BUDGET_S keeps 60 s per later step)"
else
  status=1
  say "build FAILED after $((SECONDS - T0)) s: $(grep -E 'FAILED|error' "$OUT/build.log" | head -3)"
fi

# Resources of every runnable cubin (registers, shared and local bytes per entry) and the
# local-memory instructions in its SASS: a spill shows here before any timing.
if command -v cuobjdump > /dev/null; then
  for c in "$B"/cubins/run/*.cubin; do
    echo "== $(basename "$c") LDL/STL: $(cuobjdump --dump-sass "$c" | grep -cE '(LDL|STL)[. ]')"
    cuobjdump -res-usage "$c" | grep -E "Function|REG" | paste - - |
      sed -E 's/.*Function ([A-Za-z0-9_]+).*REG:([0-9]+).*SHARED:([0-9]+).*LOCAL:([0-9]+).*/  \1 REG \2 SHARED \3 LOCAL \4/'
  done > "$OUT/sass.txt" 2>&1
  say "sass: $(grep -c '^==' "$OUT/sass.txt") cubins (sass.txt); with local memory:" \
    "$(grep -E 'LDL/STL: [1-9]' "$OUT/sass.txt" | cut -d' ' -f2 | tr '\n' ' ')" \
    "$(grep -E 'LOCAL [1-9]' "$OUT/sass.txt" | awk '{print $1}' | tr '\n' ' ')"
else
  say "sass: cuobjdump not on PATH; no resource summary"
fi

# ---- 2. GPU tests ------------------------------------------------------------------------------
: > "$OUT/ctest-gpu.log"
if [ "${SKIP_CTEST:-0}" = 1 ]; then
  say "ctest -L gpu: skipped (SKIP_CTEST=1)"
else
  within $(($(left) - 30 * $#)) "$OUT/ctest-gpu.log" ctest --preset h200 -L gpu || status=1
  say "ctest -L gpu: $(grep -E 'tests passed|tests failed|No tests were found' "$OUT/ctest-gpu.log" | tail -1)"
  grep -E "\((Failed|SEGFAULT|Timeout|Not Run|Subprocess aborted)\)" "$OUT/ctest-gpu.log" | tee -a "$SUMMARY"
fi

# ---- 3. families -------------------------------------------------------------------------------
# runtime SECONDS: the runtime's checks (formerly tools/device/h200.sh).
runtime_family() {
  local s=$1 t_end=$((SECONDS + $1)) R=$OUT/runtime rc=0
  mkdir -p "$R"
  # Every registered GPU test must have run: a skip means the device was not seen.
  ctest --preset h200 -L gpu -N 2>/dev/null | sed -nE 's/.*Test +#[0-9]+: +([^ ]+).*/\1/p' |
    sort > "$R/gpu-tests.txt"
  sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(Skipped\).*/\1/p' "$OUT/ctest-gpu.log" |
    sort > "$R/skipped.txt"
  local skipped
  skipped=$(comm -12 "$R/gpu-tests.txt" "$R/skipped.txt" | tr '\n' ' ')
  say "runtime: $(wc -l < "$R/gpu-tests.txt") GPU tests registered, skipped: ${skipped:-none}"
  [ -z "$skipped" ] && [ -s "$R/gpu-tests.txt" ] || rc=1

  local M=$B/manifests/test C=$B/cubins/run
  : > "$R/bench.log"
  within $(((t_end - SECONDS) / 2)) "$R/bench.log" "$B/bin/runtime_overhead" --manifests "$M" \
    --cubins "$C" --commit "$COMMIT" --jsonl "$R/runtime-overhead.jsonl" \
    --markdown "$R/runtime-overhead.md" || rc=1
  say "runtime: overhead bench $(tail -1 "$R/bench.log")"

  # compute-sanitizer memcheck on program_io over the test manifests. API errors are not
  # reported: the runtime's ABI check probes cuFuncGetParamInfo one index past the last
  # param of each function and expects CUDA_ERROR_INVALID_VALUE there.
  : > "$R/sanitizer.log"
  if ! command -v compute-sanitizer > /dev/null; then
    say "runtime: compute-sanitizer not found on PATH; memcheck not run"
    return 1
  fi
  local T=/tmp/kernrt-sanitizer
  mkdir -p "$T"
  python3 - "$T" >> "$R/sanitizer.log" 2>&1 <<'PY'
import sys, numpy as np
d, rng = sys.argv[1], np.random.default_rng(2026)
for name, n in [("src2", 32 * 80), ("src3", 4 * 16 * 64), ("x80", 80), ("x1000", 1000)]:
    rng.standard_normal(n).astype("<f4").tofile(f"{d}/{name}.bin")
PY
  local runs=(
    "--manifest $M/tma_copy.json --in src2=$T/src2.bin --in src3=$T/src3.bin --out dst2=$T/dst2 --out dst3=$T/dst3 --out dst3_shift=$T/dst3s"
    "--manifest $M/pack_echo.json --env n=37 --in x=$T/x80.bin --out out=$T/echo"
    "--manifest $M/pack_echo.json --env n=64 --in x=$T/x80.bin --out out=$T/echo --graph --iters 3"
    "--manifest $M/scratch_pair.json --env n=1000 --in x=$T/x1000.bin --out y=$T/y"
    "--manifest $M/scratch_pair.json --env n=1000 --in x=$T/x1000.bin --out y=$T/y --graph --iters 3"
    "--manifest $M/tiny100.json --dump counter=$T/counter --graph --iters 3"
  )
  local args fails=0
  for args in "${runs[@]}"; do
    echo "### program_io $args" >> "$R/sanitizer.log"
    # shellcheck disable=SC2086
    within $((t_end - SECONDS)) "$R/sanitizer.log" compute-sanitizer --tool memcheck \
      --report-api-errors no --error-exitcode 3 --print-limit 50 \
      "$B/bin/program_io" --cubins "$C" $args || fails=$((fails + 1))
  done
  say "runtime: sanitizer ${#runs[@]} runs, $fails not clean," \
    "$(grep -c 'ERROR SUMMARY: 0 errors' "$R/sanitizer.log") reported 0 errors"
  [ "$fails" -eq 0 ] || rc=1
  return $rc
}

n=$#
for family in "$@"; do
  share=$(($(left) / n))
  budget_var="BUDGET_$family"
  [ -n "${!budget_var:-}" ] && share=${!budget_var}
  n=$((n - 1))
  start=$SECONDS
  script="validation/$family/run.py"
  [ "$family" = prefill ] && script=validation/attention/prefill_run.py
  if [ "$family" = runtime ]; then
    runtime_family "$share" || status=1
  elif [ -f "$script" ]; then
    extra=()
    [ "$family" = attention ] && [ -n "${KERNRT_DECODE_BASE:-}" ] &&
      extra=(--base attention_decode_base.sm90a)
    args_var="ARGS_$family"
    read -r -a more <<< "${!args_var:-}"
    : > "$OUT/$family.log"
    within "$share" "$OUT/$family.log" python3 "$script" --build "$B" \
      --out "$OUT/$family" --commit "$COMMIT" "${extra[@]}" "${more[@]}"
    rc=$?
    [ $rc -eq 0 ] || status=1
    say "$family: $script exit $rc after $((SECONDS - start)) s; last lines:"
    tail -12 "$OUT/$family.log" | tee -a "$SUMMARY"
  else
    say "$family: $script is absent; nothing to run"
  fi
done

say "total: $((SECONDS - T0)) s of $BUDGET_S, status $status"
tail -400 "$OUT/build.log" > "$OUT/build.tail" && mv "$OUT/build.tail" "$OUT/build.log"
exit $status
