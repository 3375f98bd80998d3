"""Device-side harness for kernrt's sm90 paged decode attention (torch + cuda.bindings).

Owns: loading the decode cubin, encoding the Q/K/V tensormaps exactly as the manifest's pack
describes them (reference/attention.md sec. 1.3, dims/strides/box/swizzle 128/L2 128), writing
the 1280-byte TRTLLM-GEN block at FlashInfer's offsets, launching the kernel on torch's current
stream (so torch CUDA graphs capture it), building paged KV fixtures (interleaved layers,
random disjoint pages) and the float32 torch reference.
Deliberately does not check: that the cubin matches the block layout (params.h pins that at
compile time) or that tensormap arguments are legal (the driver rejects them; we raise).
"""

import ctypes
import math
import struct

import torch
from cuda.bindings import driver as cu

HEADS_Q, HEADS_KV, GROUP, DIM, PAGE = 24, 4, 6, 256, 64
LAYER_PAGE_BYTES = PAGE * HEADS_KV * 2 * DIM * 2  # 262144
SCALE = 1.0 / math.sqrt(DIM)
SCALE_LOG2 = SCALE * math.log2(math.e)
MAX_PAGES_PER_SEQ = 4096


def _check(res):
    err = res[0] if isinstance(res, tuple) else res
    if int(err) != 0:
        raise RuntimeError(f"cuda driver error {err}")
    if isinstance(res, tuple):
        return res[1] if len(res) == 2 else res[1:]
    return None


class Kernel:
    """One cubin entry point, launched with a single by-value byte block."""

    def __init__(self, cubin_path, entry, smem):
        torch.cuda.init()
        torch.empty(1, device="cuda")
        _check(cu.cuInit(0))
        try:
            self.module = _check(cu.cuModuleLoad(cubin_path.encode()))
        except TypeError:
            self.module = _check(cu.cuModuleLoad(cubin_path))
        try:
            self.fn = _check(cu.cuModuleGetFunction(self.module, entry.encode()))
        except TypeError:
            self.fn = _check(cu.cuModuleGetFunction(self.module, entry))
        self.smem = smem
        if smem > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(cu.cuFuncSetAttribute(self.fn, attr, smem))

    def launch_block(self, block_bytes, grid, threads):
        """Launch with one by-value parameter (the driver copies the bytes at launch/capture)."""
        raw = ctypes.create_string_buffer(len(block_bytes) + 128)
        base = (ctypes.addressof(raw) + 127) & ~127
        ctypes.memmove(base, block_bytes, len(block_bytes))
        args = (ctypes.c_void_p * 1)(base)
        stream = torch.cuda.current_stream().cuda_stream
        _check(cu.cuLaunchKernel(self.fn, grid[0], grid[1], grid[2], threads, 1, 1, self.smem,
                                 stream, ctypes.addressof(args), 0))
        self._keep = (raw, args)

    def launch_args(self, values, grid, threads):
        """Launch with plain params: `values` is a list of (ctypes type, value)."""
        holders = [t(v) for t, v in values]
        args = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
        stream = torch.cuda.current_stream().cuda_stream
        _check(cu.cuLaunchKernel(self.fn, grid[0], grid[1], grid[2], threads, 1, 1, self.smem,
                                 stream, ctypes.addressof(args), 0))
        self._keep = (holders, args)


def encode_tiled(ptr, dims, strides, box):
    """cuTensorMapEncodeTiled for bf16, swizzle 128B, L2 promotion 128B, OOB fill none."""
    rank = len(dims)
    res = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, ptr,
        [cu.cuuint64_t(d) for d in dims], [cu.cuuint64_t(s) for s in strides],
        [cu.cuuint32_t(b) for b in box], [cu.cuuint32_t(1)] * rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    tmap = _check(res)
    return ctypes.string_at(tmap.getPtr(), 128)


class Fixture:
    """Paged KV state [pool_pages, layers, 64, 4, 2, 256] bf16 plus one decode batch over it.

    With `content_pages` < pool_pages only that many pages are stored and physical page p
    holds content page p % content_pages: the pool program_io builds with `--fill` from a
    pattern file (kv holds the pattern). Such a fixture serves the reference, not Decode."""

    def __init__(self, pool_pages, layers, seed=0, fill=True, content_pages=None):
        self.layers = layers
        self.page_stride = layers * LAYER_PAGE_BYTES
        self.pool_pages = pool_pages
        self.content_pages = content_pages or pool_pages
        self.kv = torch.empty((self.content_pages, layers, PAGE, HEADS_KV, 2, DIM),
                              dtype=torch.bfloat16, device="cuda")
        if fill:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(seed)
            flat = self.kv.view(-1)
            chunk = 1 << 28
            for i in range(0, flat.numel(), chunk):
                flat[i:i + chunk].normal_(generator=gen)

    def batch(self, lens, layer, seed=1, q_scale=1.0, contiguous_pages=False):
        """Random disjoint pages for each sequence; returns a Batch."""
        return Batch(self, lens, layer, seed, q_scale, contiguous_pages)


class Batch:
    def __init__(self, fx, lens, layer, seed, q_scale, contiguous_pages):
        self.fx, self.layer = fx, layer
        self.lens = [int(x) for x in lens]
        self.bsz = len(self.lens)
        pages = [(n + PAGE - 1) // PAGE for n in self.lens]
        total = sum(pages)
        assert total <= fx.pool_pages and max(pages) <= MAX_PAGES_PER_SEQ
        gen = torch.Generator(device="cpu")
        gen.manual_seed(seed)
        pool = (torch.arange(total) if contiguous_pages
                else torch.randperm(fx.pool_pages, generator=gen)[:total])
        self.table = torch.zeros((self.bsz, MAX_PAGES_PER_SEQ), dtype=torch.int32)
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
        self.q = (torch.randn((self.bsz, HEADS_Q, DIM), generator=gq, device="cuda") *
                  q_scale).to(torch.bfloat16)
        self.kv_bytes = sum(self.lens) * HEADS_KV * 2 * DIM * 2

    def k_view(self):
        return self.fx.kv[:, self.layer, :, :, 0, :]  # [P, 64, 4, 256], NHD

    def v_view(self):
        return self.fx.kv[:, self.layer, :, :, 1, :]

    def reference(self):
        """float32 attention per sequence: [B, 24, 256] f32."""
        out = torch.empty((self.bsz, HEADS_Q, DIM), dtype=torch.float32, device="cuda")
        for b in range(self.bsz):
            ids = self.page_lists[b].cuda().long() % self.fx.content_pages
            n = self.lens[b]
            if n == 0:
                out[b] = 0
                continue
            k = self.k_view()[ids].reshape(-1, HEADS_KV, DIM)[:n].float()  # [n, 4, 256]
            v = self.v_view()[ids].reshape(-1, HEADS_KV, DIM)[:n].float()
            q = self.q[b].float().view(HEADS_KV, GROUP, DIM)
            s = torch.einsum("hgd,nhd->hgn", q, k) * SCALE
            pr = torch.softmax(s, dim=-1)
            out[b] = torch.einsum("hgn,nhd->hgd", pr, v).reshape(HEADS_Q, DIM)
            del k, v, s, pr
        return out


class Decode:
    """Our kernel bound to one Batch: scratch, output, the 1280-byte block."""

    def __init__(self, kernel, batch, splits, threads):
        assert batch.fx.content_pages == batch.fx.pool_pages, "a repeating pool has no device KV"
        self.kernel, self.batch, self.splits, self.threads = kernel, batch, splits, threads
        b = batch.bsz
        self.out = torch.empty((b, HEADS_Q, DIM), dtype=torch.bfloat16, device="cuda")
        self.counter = torch.zeros(b * HEADS_Q, dtype=torch.int32, device="cuda")  # seqs x 24
        self.partial = torch.empty((b, HEADS_KV, splits, 8, DIM), dtype=torch.float32,
                                   device="cuda")
        self.stats = torch.empty((b, HEADS_KV, splits, 8, 2), dtype=torch.float32, device="cuda")
        self.block = self._pack()

    def _pack(self):
        bt, fx = self.batch, self.batch.fx
        blk = bytearray(1280)
        layer_base = fx.kv.data_ptr() + bt.layer * LAYER_PAGE_BYTES
        kv_dims = [DIM, PAGE, HEADS_KV, fx.pool_pages]
        kv_strides = [4096, 1024, fx.page_stride]
        blk[0:128] = encode_tiled(bt.q.data_ptr(), [DIM, GROUP, HEADS_KV, bt.bsz],
                                  [512, 3072, 12288], [64, GROUP, 1, 1])
        blk[128:256] = encode_tiled(layer_base, kv_dims, kv_strides, [64, PAGE, 1, 1])
        blk[384:512] = encode_tiled(layer_base + 512, kv_dims, kv_strides, [64, PAGE, 1, 1])

        def put(fmt, at, v):
            struct.pack_into(fmt, blk, at, v)

        put("<Q", 912, self.out.data_ptr())
        put("<Q", 984, self.counter.data_ptr())
        put("<Q", 1000, bt.table.data_ptr())
        put("<Q", 1008, self.partial.data_ptr())
        put("<Q", 1016, self.stats.data_ptr())
        put("<Q", 1080, bt.seq_lens.data_ptr())
        for at, v in [(1112, 2147483647), (1116, bt.bsz), (1144, 1), (1148, 262144), (1152, 1),
                      (1156, self.splits), (1160, MAX_PAGES_PER_SEQ), (1164, 4), (1168, 24),
                      (1172, 6), (1176, 6), (1180, -1431655765), (1188, 2), (1192, 6144),
                      (1200, fx.pool_pages), (1204, 1), (1208, 6), (1212, 1),
                      (1216, 1065353216), (1228, -1082130432), (1244, bt.bsz), (1252, 256)]:
            put("<i", at, v)
        put("<f", 1220, SCALE_LOG2)
        put("<f", 1224, 1.0)
        return bytes(blk)

    def run(self):
        self.kernel.launch_block(self.block, (self.splits, HEADS_KV, self.batch.bsz),
                                 self.threads)


def errors(out, ref):
    """(finite, rel_l2, max_abs) of out vs ref, in float32."""
    o = out.float()
    finite = bool(torch.isfinite(o).all().item())
    diff = (o - ref).double()
    rel = (diff.norm() / ref.double().norm().clamp_min(1e-30)).item()
    mx = diff.abs().max().item()
    return finite, rel, mx
