"""Checks kernels/kv_append on the device: new K/V rows land in their page slots at the
layer's offset (2-layer and 16-layer page strides), i32 and i64 slot mappings, a negative slot
is skipped, and every other byte of the state is untouched. Exact comparison (a copy).
Deliberately does not check: speed (a few KB per token; it is launch-bound).
"""
import argparse
import ctypes
import sys

import torch

import attn_harness as H

ap = argparse.ArgumentParser()
ap.add_argument("--cubin", required=True)
args = ap.parse_args()

ok = True
for layers, layer, idx_dtype in [(2, 1, torch.int32), (16, 15, torch.int64), (2, 0, torch.int64)]:
    entry = "kv_append_sm90a_bf16_kv4d256p64_" + ("i32" if idx_dtype == torch.int32 else "i64")
    k = H.Kernel(args.cubin, entry, 0)
    pages, tokens = 40, 300
    state = torch.randn((pages, layers, 64, 4, 2, 256), device="cuda").to(torch.bfloat16)
    before = state.clone()
    gen = torch.Generator().manual_seed(layers * 10 + layer)
    slots = torch.randperm(pages * 64, generator=gen)[:tokens].to(idx_dtype)
    slots[7] = -1  # padding token: skipped
    k_new = torch.randn((tokens, 4, 256), device="cuda").to(torch.bfloat16)
    v_new = torch.randn((tokens, 4, 256), device="cuda").to(torch.bfloat16)
    slots_d = slots.cuda()
    page_stride = layers * H.LAYER_PAGE_BYTES
    k.launch_args([(ctypes.c_uint64, k_new.data_ptr()), (ctypes.c_uint64, v_new.data_ptr()),
                   (ctypes.c_uint64, state.data_ptr() + layer * H.LAYER_PAGE_BYTES),
                   (ctypes.c_uint64, slots_d.data_ptr()), (ctypes.c_int32, tokens),
                   (ctypes.c_int32, page_stride)], (tokens, 1, 1), 256)
    torch.cuda.synchronize()
    expect = before.clone()
    valid = slots >= 0
    s = slots[valid].long()
    pg, off = s // 64, s % 64
    expect[pg.cuda(), layer, off.cuda(), :, 0, :] = k_new[valid.cuda()]
    expect[pg.cuda(), layer, off.cuda(), :, 1, :] = v_new[valid.cuda()]
    same = torch.equal(state.view(torch.int16), expect.view(torch.int16))
    ok &= same
    print(f"{'PASS' if same else 'FAIL'} kv_append layers={layers} layer={layer} "
          f"{entry} tokens={tokens} (one padding slot)")
print("KV APPEND ALL PASS" if ok else "KV APPEND FAILED")
sys.exit(0 if ok else 1)
