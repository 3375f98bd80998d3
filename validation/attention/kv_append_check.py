"""KV append on the device through the product path: new K/V rows land in their page slots at
the layer's offset (2-layer and 16-layer page strides), i32 and i64 slot mappings, a negative
slot is skipped, and every other byte of the state is untouched. Exact comparison (a copy).
The manifest is kernrt.gen.kv_append's, loaded by kernrt.load; inputs and the state are
written in place through the runtime's views. One JSONL line per case.
Deliberately does not check: speed (a few KB per token; it is launch-bound).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import bench  # noqa: E402  (puts runtime/python on sys.path)
import torch  # noqa: E402

import kernrt  # noqa: E402
from fixture import DIM, HEADS_KV, PAGE, kv_view  # noqa: E402
from kernrt.gen import kv_append, pin  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    args = ap.parse_args()
    cubins = bench.use_build(args.build)
    rec = bench.Recorder(args.out, "attention", args.commit)
    ok = True
    pages, tokens = 40, 300
    for layers, layer, index in [(2, 1, "i32"), (16, 15, "i64"), (2, 0, "i64")]:
        m = pin(kv_append.manifest(layers, tokens), cubins)
        with kernrt.load(m, cubins=[cubins], tokens=pages * PAGE) as rt:
            state = kv_view(rt, layers)
            state.copy_(torch.randn(state.shape, device="cuda").to(torch.bfloat16))
            before = state.clone()
            gen = torch.Generator().manual_seed(layers * 10 + layer)
            dtype = torch.int32 if index == "i32" else torch.int64
            slots = torch.randperm(pages * PAGE, generator=gen)[:tokens].to(dtype)
            slots[7] = -1  # a padding token: skipped
            k_new = torch.randn((tokens, HEADS_KV, DIM), device="cuda").to(torch.bfloat16)
            v_new = torch.randn((tokens, HEADS_KV, DIM), device="cuda").to(torch.bfloat16)
            rt.buffer("k").copy_(k_new)
            rt.buffer("v").copy_(v_new)
            rt.buffer(f"slots_{index}").copy_(slots.cuda())
            rt.enqueue(f"append_{index}_l{layer}", tokens=tokens)
            torch.cuda.synchronize()
            expect = before.clone()
            valid = slots >= 0
            s = slots[valid].long()
            pg, off = s // PAGE, s % PAGE
            expect[pg.cuda(), layer, off.cuda(), :, 0, :] = k_new[valid.cuda()]
            expect[pg.cuda(), layer, off.cuda(), :, 1, :] = v_new[valid.cuda()]
            same = torch.equal(state.view(torch.int16), expect.view(torch.int16))
            ok &= rec.check(f"kv_append layers={layers} layer={layer} {index} slots, {tokens} tokens "
                            f"(one padding slot), every other byte untouched", same)
    print("KV APPEND ALL PASS" if ok else "KV APPEND FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
