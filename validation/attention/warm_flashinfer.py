"""Imports FlashInfer (and triggers any JIT build of the tensor-core paged decode module, head
dim 256, bf16, page 64) in its own process, so the build overlaps our checks, and checks one
small decode against the float32 reference. Exit 0 when FlashInfer ran.
Deliberately does not check: timings (run.py times FlashInfer beside our kernel).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import bench  # noqa: E402  (puts runtime/python on sys.path)
import torch  # noqa: E402

import peer_flashinfer as P  # noqa: E402
from fixture import DIM, HEADS_KV, PAGE, Batch, fill_random  # noqa: E402

t0 = time.time()
fi = P.import_flashinfer()
print("flashinfer", fi.__version__, "stubbed:", P.STUBBED, flush=True)
kv = torch.empty((64, 2, PAGE, HEADS_KV, 2, DIM), dtype=torch.bfloat16, device="cuda")
fill_random(kv, seed=3)
bt = Batch(kv, [100, 1000], 1, seed=4)
peer = P.FlashInferDecode(fi, bt)
peer.run()
torch.cuda.synchronize()
finite, rel, mx = bench.errors(peer.out, bt.reference())
print(f"flashinfer warm decode: rel_l2={rel:.3e} max_abs={mx:.3e} finite={finite} "
      f"in {time.time() - t0:.1f}s", flush=True)
sys.exit(0 if finite and rel < 0.02 else 1)
