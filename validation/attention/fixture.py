"""Paged-KV fixtures for the attention checks: the pool inside a runtime's `kv` state, one
batch over it (random disjoint pages, ragged lengths, bf16 queries), the batch written into
the runtime's buffers in place, and the float32 torch reference.

Owns no launch and no binary layout: the KV layout [pages, layers, 64, 4, 2 (K/V), 256] bf16
is the generator's (kernrt.gen.attention: page stride layers x 262144 bytes), read here only
to build views over the same memory the kernel and FlashInfer read.
Deliberately does not check: anything (run.py and program_io_check.py gate the outputs).
"""
import math

import torch

from kernrt.gen import attention as ao

HEADS_Q, HEADS_KV, GROUP, DIM, PAGE = ao.HEADS_Q, ao.HEADS_KV, ao.GROUP, ao.HEAD_DIM, ao.PAGE
SCALE = 1.0 / math.sqrt(DIM)


def kv_view(rt, layers):
    """The runtime's KV state as [pages, layers, 64, 4, 2, 256] bf16 (zero-copy)."""
    raw = rt.state("kv")
    per_page = layers * ao.LAYER_PAGE_BYTES
    pages = raw.numel() // per_page
    return raw[:pages * per_page].view(torch.bfloat16).view(pages, layers, PAGE, HEADS_KV, 2, DIM)


def fill_random(kv, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    flat = kv.view(-1)
    chunk = 1 << 28
    for i in range(0, flat.numel(), chunk):
        flat[i:i + chunk].normal_(generator=gen)


class Batch:
    """lens[b] tokens of sequence b over random disjoint pages of `kv` at KV layer `layer`.
    With pool_pages > len(kv), the pool repeats kv: physical page p holds kv[p % len(kv)]
    (program_io's --fill of a pattern over a large state)."""

    def __init__(self, kv, lens, layer, seed=1, q_scale=1.0, contiguous_pages=False, max_pages=4096,
                 pool_pages=None):
        self.kv, self.layer = kv, layer
        self.lens = [int(x) for x in lens]
        self.bsz = len(self.lens)
        pool_pages = pool_pages or kv.shape[0]
        pages = [(n + PAGE - 1) // PAGE for n in self.lens]
        total = sum(pages)
        assert total <= pool_pages and max(pages) <= max_pages, (total, pool_pages)
        gen = torch.Generator(device="cpu")
        gen.manual_seed(seed)
        pool = torch.arange(total) if contiguous_pages else torch.randperm(pool_pages, generator=gen)[:total]
        self.table = torch.zeros((self.bsz, max_pages), dtype=torch.int32)
        self.page_lists = []
        off = 0
        for b, n in enumerate(pages):
            ids = pool[off:off + n].to(torch.int32)
            self.table[b, :n] = ids
            self.page_lists.append(ids)
            off += n
        self.table = self.table.cuda()
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device="cuda")
        gq = torch.Generator(device="cuda")
        gq.manual_seed(seed + 7)
        self.q = (torch.randn((self.bsz, HEADS_Q, DIM), generator=gq, device="cuda") * q_scale).to(torch.bfloat16)
        self.kv_bytes = sum(self.lens) * HEADS_KV * 2 * DIM * 2

    def k_view(self):
        return self.kv[:, self.layer, :, :, 0, :]  # [P, 64, 4, 256], NHD

    def v_view(self):
        return self.kv[:, self.layer, :, :, 1, :]

    def write(self, rt):
        """The batch's inputs into the runtime's buffers, in place (no host copy)."""
        b = self.bsz
        rt.buffer("q")[:b].copy_(self.q)
        table = rt.buffer("table")
        table[:b].copy_(self.table[:, :table.shape[1]])
        rt.buffer("seq")[:b].copy_(self.seq_lens)
        rt.buffer("cuq")[:b + 1].copy_(torch.arange(b + 1, dtype=torch.int32, device="cuda"))

    def vars(self):
        return {"seqs": self.bsz, "tokens": self.bsz}

    def reference(self):
        """float32 attention per sequence: [B, 24, 256] f32."""
        out = torch.empty((self.bsz, HEADS_Q, DIM), dtype=torch.float32, device="cuda")
        for b in range(self.bsz):
            ids = self.page_lists[b].cuda().long() % self.kv.shape[0]
            n = self.lens[b]
            if n == 0:
                out[b] = 0
                continue
            k = self.k_view()[ids].reshape(-1, HEADS_KV, DIM)[:n].float()
            v = self.v_view()[ids].reshape(-1, HEADS_KV, DIM)[:n].float()
            q = self.q[b].float().view(HEADS_KV, GROUP, DIM)
            s = torch.einsum("hgd,nhd->hgn", q, k) * SCALE
            p = torch.softmax(s, dim=-1)
            out[b] = torch.einsum("hgn,nhd->hgd", p, v).reshape(HEADS_Q, DIM)
            del k, v, s, p
        return out
