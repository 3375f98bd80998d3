"""Manifest generators of the locally built kernel families (Python 3 standard library only).

Each family module builds its ops and complete manifests as plain dicts; `pin` puts the
SHA-256 of the cubins a manifest names into its modules. Importing this package loads no
library and needs no GPU, so generators run anywhere (CI, the CLIs in tools/gen).
"""
import hashlib
import json
import os
import re

_PLACEHOLDER = re.compile(r"@SHA256:([A-Za-z0-9_.\-]+)@")


class PinError(Exception):
    """A placeholder names a cubin that is not in the directory given."""


def cubin_sha256(path):
    """SHA-256 of a file, hex, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pin(manifest, cubin_dir):
    """Returns a copy of `manifest` (a dict or JSON text) with every `@SHA256:<stem>@`
    replaced by the hash of <cubin_dir>/<stem>.cubin, as kernrt_pin_manifest does at build
    time. Raises PinError naming the missing file."""
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    hashes = {}

    def sub(m):
        stem = m.group(1)
        if stem not in hashes:
            path = os.path.join(cubin_dir, stem + ".cubin")
            if not os.path.isfile(path):
                raise PinError(f"cubin `{stem}.cubin` is not in {cubin_dir}: build the kernels "
                               f"(cmake --build) or pass the directory that holds it")
            hashes[stem] = cubin_sha256(path)
        return hashes[stem]

    pinned = _PLACEHOLDER.sub(sub, text)
    return pinned if isinstance(manifest, str) else json.loads(pinned)
