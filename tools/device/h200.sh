#!/usr/bin/env bash
# The runtime's device run on the lent H200 (the device tool's `run`, from the repository
# root, carrying .deps and .shared): configure and build everything (Release, Ninja,
# -j16, kernels for sm_90a + sm_100a), run the whole ctest suite and check that no GPU
# test was skipped, run the runtime-overhead benchmark, and run compute-sanitizer memcheck
# on program_io over the test manifests (eager and graph). Logs, JSONL and the markdown
# table land in $OUT (7 files).
# Carried folders (git-ignored through .git/info/exclude, made on the dev machine):
#   .deps/prefix  nlohmann-json, CLI11, GoogleTest and OpenSSL (static libcrypto) from the
#                 Debian dev packages, so the build never depends on what the image has;
#   .shared       a copy of ../shared (the corpus the CPU tests read), which does not travel.
# Usage: COMMIT=<sha> bash tools/device/h200.sh
# Exit status: 0 all passed; 1 a test, sanitizer check or benchmark gate failed; 2 the
# build could not be configured. Deliberately does not install anything or touch the GPU's
# settings; other families have their own scripts beside this one.
set -uo pipefail
COMMIT=${COMMIT:-unknown}
OUT=${OUT:-/tmp/kernrt-h200}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
B=${BUILD_DIR:-$ROOT/build-h200}
SUMMARY=$OUT/summary.txt
# The tests read the specification corpus from ../shared, which does not travel with the
# checkout; a carried copy in .shared stands in for it.
if [ ! -d "$ROOT/../shared" ] && [ -d "$ROOT/.shared" ]; then ln -s "$ROOT/.shared" "$ROOT/../shared"; fi
say() { echo "$*" | tee -a "$SUMMARY"; }
status=0
start=$SECONDS

# ---- configure + build ---------------------------------------------------------------------
DEPS=()
if [ -d .deps/prefix ]; then  # Debian dev packages carried from the dev machine
  D=$ROOT/.deps/prefix
  DEPS=(-DCMAKE_PREFIX_PATH="$D" -DOPENSSL_ROOT_DIR="$D" -DOPENSSL_USE_STATIC_LIBS=TRUE)
fi
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
say "gpu: ${GPU:-none}; commit: $COMMIT; date: $(date -u +%FT%TZ); nvcc: $(nvcc --version | tail -1)"
if ! cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKERNRT_WERROR=OFF \
     "${DEPS[@]}" > "$OUT/build.log" 2>&1; then
  say "configure FAILED"; tail -40 "$OUT/build.log"; exit 2
fi
MINE=(kernrt_runtime_tests kernrt_program_io_tests program_io runtime_overhead
      kernrt_test_artifacts)
cmake --build "$B" -j16 --target "${MINE[@]}" >> "$OUT/build.log" 2>&1 \
  || { status=1; say "build of the runtime targets FAILED"; }
cmake --build "$B" -j16 -- -k 0 >> "$OUT/build.log" 2>&1 \
  || say "note: some other targets failed to build (build.log)"
grep -E "FAILED|error:" "$OUT/build.log" | head -20
say "build: $((SECONDS - start)) s"

# ---- ctest: everything; GPU tests must run, not skip -------------------------------------
(cd "$B" && timeout 150 ctest -j12 --timeout 120 --output-on-failure) > "$OUT/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed" "$OUT/ctest.log" | tee -a "$SUMMARY"
(cd "$B" && ctest -L gpu -N) | sed -nE 's/.*Test +#[0-9]+: +([^ ]+).*/\1/p' | sort > /tmp/gpu-tests.txt
sed -nE 's/^\s+[0-9]+ - ([^ ]+) \(Skipped\).*/\1/p' "$OUT/ctest.log" | sort > /tmp/skipped.txt
gpu_total=$(wc -l < /tmp/gpu-tests.txt)
gpu_skipped=$(comm -12 /tmp/gpu-tests.txt /tmp/skipped.txt | wc -l)
say "gpu tests: $gpu_total registered, $gpu_skipped skipped: $(comm -12 /tmp/gpu-tests.txt /tmp/skipped.txt | tr '\n' ' ')"
grep -E "\((Failed|SEGFAULT|Timeout|Not Run|Subprocess aborted)\)" "$OUT/ctest.log" | tee -a "$SUMMARY"
[ "$gpu_skipped" -eq 0 ] || status=1
say "ctest: $((SECONDS - start)) s"

M=$B/manifests/test; C=$B/cubins/run

# ---- runtime-overhead benchmark ----------------------------------------------------------
"$B/bin/runtime_overhead" --manifests "$M" --cubins "$C" --commit "$COMMIT" \
  --jsonl "$OUT/runtime-overhead.jsonl" --markdown "$OUT/runtime-overhead.md" \
  2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# ---- compute-sanitizer memcheck on program_io over the test manifests --------------------
T=/tmp/kernrt-sanitizer; mkdir -p "$T"
python3 - "$T" <<'PY'
import sys, numpy as np
d, rng = sys.argv[1], np.random.default_rng(2026)
for name, n in [("src2", 32 * 80), ("src3", 4 * 16 * 64), ("x80", 80), ("x1000", 1000)]:
    rng.standard_normal(n).astype("<f4").tofile(f"{d}/{name}.bin")
PY
PIO=$B/bin/program_io
RUNS=(
  "--manifest $M/tma_copy.json --in src2=$T/src2.bin --in src3=$T/src3.bin --out dst2=$T/dst2 --out dst3=$T/dst3 --out dst3_shift=$T/dst3s"
  "--manifest $M/pack_echo.json --env n=37 --in x=$T/x80.bin --out out=$T/echo"
  "--manifest $M/pack_echo.json --env n=64 --in x=$T/x80.bin --out out=$T/echo --graph --iters 3"
  "--manifest $M/scratch_pair.json --env n=1000 --in x=$T/x1000.bin --out y=$T/y"
  "--manifest $M/scratch_pair.json --env n=1000 --in x=$T/x1000.bin --out y=$T/y --graph --iters 3"
  "--manifest $M/tiny100.json --dump counter=$T/counter --graph --iters 3"
)
: > "$OUT/sanitizer.log"
san_fail=0
for args in "${RUNS[@]}"; do
  echo "### program_io $args" >> "$OUT/sanitizer.log"
  # shellcheck disable=SC2086
  # API errors are not reported: the runtime's ABI check probes cuFuncGetParamInfo one
  # index past the last param of each function and expects CUDA_ERROR_INVALID_VALUE there.
  ${SANITIZER:-compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 --print-limit 50} \
    "$PIO" --cubins "$C" $args >> "$OUT/sanitizer.log" 2>&1
  rc=$?
  echo "### exit $rc" >> "$OUT/sanitizer.log"
  [ $rc -eq 0 ] || san_fail=$((san_fail + 1))
done
say "sanitizer: ${#RUNS[@]} runs, $san_fail not clean; $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.log") reported 0 errors"
[ $san_fail -eq 0 ] || status=1

say "total: $((SECONDS - start)) s, status $status"
# Keep build.log small enough to come back.
tail -400 "$OUT/build.log" > "$OUT/build.tail" && mv "$OUT/build.tail" "$OUT/build.log"
exit $status
