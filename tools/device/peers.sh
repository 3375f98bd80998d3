#!/usr/bin/env bash
# Makes the peers' Python packages for the GPU machine (no network there): run it where pip
# reaches PyPI, then carry .peer/site with the checkout; tools/device/run.sh puts it on
# PYTHONPATH after runtime/python, so validation/<family>/run.py imports the peers from it.
#
#   tools/device/peers.sh [SITE]         SITE defaults to .peer/site (git-ignored)
#
# Downloads the pinned wheels with `pip download --no-deps` into .peer/wheels and unpacks them
# (a wheel is a zip) into SITE; nothing is installed here. The pure-Python peers only, about
# 6 MiB unpacked: fla-core 0.6.0 (the conv and KDA yardstick), kernel-fun 0.2.0 (its Triton
# conv; its metadata asks fla-core < 0.6, which its conv does not need), flash-qla 0.1.3 (GDN;
# it also needs tilelang, a 50 MB wheel with native libraries that this script leaves out)
# and einops (fla imports it). torch and Triton come with the GPU image. FlashInfer and
# FlashKDA are built from source (validation/attention/prefill_peers.py,
# validation/kda/fixture.py say how they are found); they are not here.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SITE=${1:-$ROOT/.peer/site}
WHEELS=$ROOT/.peer/wheels
PEERS=(fla-core==0.6.0 kernel-fun==0.2.0 flash-qla==0.1.3 einops==0.8.2)

command -v pip > /dev/null || { echo "peers.sh: needs pip" >&2; exit 2; }
mkdir -p "$WHEELS" "$SITE"
if ! pip download --no-deps -q -d "$WHEELS" "${PEERS[@]}"; then
  echo "peers.sh: pip download failed (is PyPI reachable?)" >&2
  exit 2
fi
for spec in "${PEERS[@]}"; do
  name=${spec%%==*}
  version=${spec##*==}
  whl=$(ls "$WHEELS"/"${name//-/_}"-"$version"-*.whl | head -1)
  python3 -m zipfile -e "$whl" "$SITE"
  echo "$spec -> $SITE"
done
