#!/usr/bin/env bash
# kernrt quick start, step 1 of 2 (README): install what is missing, configure, build, verify.
#
# Owns: the README's first command. On Debian 12 with the CUDA toolkit in /usr/local/cuda it
#   1. installs the missing Debian packages (apt, only when something is missing; root or sudo),
#   2. configures with the `cpu` preset (CMakePresets.json: Ninja, warnings as errors, build/)
#      and builds everything (2 jobs; KERNRT_JOBS overrides),
#   3. runs the main job, tools/verify_shipped.py: kernrt-verify over every shipped manifest,
#      fragment and example (pinned build copies where they name local kernels), printing the
#      verdicts; with a CUDA device and build/bin/program_io it also runs the runnable examples.
# Does not run the test suite (step 2: ctest --test-dir build --output-on-failure -j2) and
# does not install the CUDA toolkit (nvcc is found in /usr/local/cuda/bin or on PATH).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(nlohmann-json3-dev libcli11-dev libssl-dev libcurl4-openssl-dev libgtest-dev cmake
          ninja-build g++ python3 python3-numpy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "quickstart: installing ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "quickstart: need root or sudo to install ${missing[*]}" >&2; exit 2; }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=${KERNRT_JOBS:-2}
cmake --preset cpu
cmake --build --preset cpu -j "$jobs"
python3 tools/verify_shipped.py --build-dir build
