"""Triggers FlashInfer's JIT build of the tensor-core paged decode module (head dim 256, bf16,
page 64) in its own process, so that the build overlaps our kernel's checks, and checks one
small decode against the float32 reference. Exit 0 when FlashInfer ran.
Deliberately does not check: timings (run_attention.py times FlashInfer beside our kernel).
"""
import sys
import time

import torch

import attn_harness as H
import peer_flashinfer as P

t0 = time.time()
fi = P.import_flashinfer()
print("flashinfer", fi.__version__, "stubbed:", P.STUBBED, flush=True)
fx = H.Fixture(pool_pages=64, layers=2, seed=3)
bt = fx.batch([100, 1000], 1, seed=4)
peer = P.FlashInferDecode(fi, bt)
peer.run()
torch.cuda.synchronize()
finite, rel, mx = H.errors(peer.out, bt.reference())
print(f"flashinfer warm decode: rel_l2={rel:.3e} max_abs={mx:.3e} finite={finite} "
      f"in {time.time() - t0:.1f}s", flush=True)
sys.exit(0 if finite and rel < 0.02 else 1)
