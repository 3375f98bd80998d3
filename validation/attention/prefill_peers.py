"""Peers of the H200 prefill / verify validation, run in the same process as ours.

Owns: importing FlashInfer lazily (the infra's carried peer: .peer/flashinfer/install.sh into a
site directory, offline; or any flashinfer on the path; optional dependencies the prefill path
never calls are replaced by inert stub modules, and JIT compilation is off unless asked for,
so a module that was not prebuilt is an error rather than minutes of nvcc), FlashInfer's BatchPrefillWithPagedKVCacheWrapper (fa3 and
fa2 backends, NHD, page 64, causal, CUDA-graph mode) over the same paged K/V views our kernel
reads, and torch SDPA restricted to cuDNN over contiguous copies (bottom-right causal).
Every constructor raises PeerUnavailable with the reason instead of crashing the run.

Deliberately does not check: the peers' numerics (the caller compares them with the reference).
"""

import glob
import os
import subprocess
import sys

from prefill_cases import DIM, HEADS_KV, HEADS_Q, PAGE, SCALE, kv_views

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from stub_imports import import_with_stubs  # noqa: E402


class PeerUnavailable(Exception):
    pass


_FI = None
STUBBED = []


def install_peer(peer_dir, site):
    """The infra's carried FlashInfer (.peer/flashinfer/install.sh: the trimmed package with
    prebuilt sm_90a modules; apache-tvm-ffi from .peer/wheels) into `site`, offline, once."""
    marker = os.path.join(site, ".kernrt-installed")
    if os.path.exists(marker):
        return
    wheels = sorted(glob.glob(os.path.join(os.path.dirname(peer_dir), "wheels",
                                           "apache_tvm_ffi-*.whl")))
    steps = []
    if wheels:
        steps.append([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                      "--no-compile", "--target", site] + wheels)
    steps.append(["bash", os.path.join(peer_dir, "install.sh"), site])
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise PeerUnavailable(f"{' '.join(cmd[:3])}...: {(done.stderr or done.stdout)[-300:]}")
    open(marker, "w").close()


def flashinfer(peer_dir, allow_jit=False, site="/tmp/kernrt-flashinfer-site"):
    """The flashinfer module, or PeerUnavailable: the carried peer under `peer_dir` when it
    has install.sh (installed into `site`), else whatever flashinfer is importable."""
    global _FI
    if _FI is not None:
        return _FI
    if peer_dir and os.path.exists(os.path.join(peer_dir, "install.sh")):
        try:
            install_peer(peer_dir, site)
        except (OSError, subprocess.SubprocessError) as e:
            raise PeerUnavailable(f"installing the carried flashinfer failed: {e}") from e
        if site not in sys.path:
            sys.path.insert(0, site)
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/fiws")
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    if not allow_jit:
        os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")
    try:
        fi, stubbed = import_with_stubs("flashinfer", [("", "BatchPrefillWithPagedKVCacheWrapper")])
    except Exception as e:  # noqa: BLE001 - any import-time failure is a reason, not a crash
        raise PeerUnavailable(f"flashinfer import failed: {type(e).__name__}: {e}") from e
    STUBBED.extend(stubbed)
    _FI = fi
    return fi


class FlashInferPrefill:
    """FlashInfer paged prefill over our K/V buffer view, captured as a CUDA graph."""

    def __init__(self, fi, backend, case, inputs, kv):
        import torch
        self.name = f"flashinfer-{backend}"
        pages = case.pages_per_seq
        self.indptr = torch.zeros(case.seqs + 1, dtype=torch.int32, device="cuda")
        self.indptr[1:] = torch.cumsum(torch.tensor(pages, dtype=torch.int32), 0).cuda()
        self.indices = torch.cat([inputs["table"][b, :n] for b, n in enumerate(pages)])
        self.last = torch.tensor([k - (n - 1) * PAGE for k, n in zip(case.kv_lens, pages)],
                                 dtype=torch.int32, device="cuda")
        self.qo = inputs["cuq"].clone()
        self.q = inputs["q"]
        self.kv = kv_views(kv, case.layer)
        self.out = torch.empty(case.tokens, HEADS_Q, DIM, dtype=torch.bfloat16, device="cuda")
        self.workspace = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
        try:
            self.wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(
                self.workspace, "NHD", use_cuda_graph=True, qo_indptr_buf=self.qo,
                paged_kv_indptr_buf=self.indptr, paged_kv_indices_buf=self.indices,
                paged_kv_last_page_len_buf=self.last, backend=backend)
            self.wrapper.plan(self.qo, self.indptr, self.indices, self.last, HEADS_Q, HEADS_KV,
                              DIM, PAGE, causal=True, sm_scale=SCALE,
                              q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
            self.run()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            raise PeerUnavailable(f"{self.name}: {type(e).__name__}: {str(e)[:300]}") from e

    def run(self):
        self.wrapper.run(self.q, self.kv, out=self.out)


class CudnnSdpa:
    """torch SDPA with only the cuDNN backend over contiguous [B, H, L, D] copies; equal
    query lengths and equal KV lengths across the batch (its best case: no paging)."""

    def __init__(self, case, inputs, kv):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.name = "cudnn-sdpa"
        if len(set(case.q_lens)) != 1 or len(set(case.kv_lens)) != 1:
            raise PeerUnavailable("cudnn-sdpa: needs equal lengths across the batch")
        b, ql, kl = case.seqs, case.q_lens[0], case.kv_lens[0]
        if b * kl * HEADS_KV * DIM * 2 * 2 > (8 << 30):
            raise PeerUnavailable("cudnn-sdpa: the contiguous K/V copy would exceed 8 GiB")
        k_all, v_all = kv_views(kv, case.layer)
        pages = inputs["table"][:, :case.pages_per_seq[0]].long()
        self.k = k_all[pages].reshape(b, -1, HEADS_KV, DIM)[:, :kl].transpose(1, 2).contiguous()
        self.v = v_all[pages].reshape(b, -1, HEADS_KV, DIM)[:, :kl].transpose(1, 2).contiguous()
        self.q = inputs["q"].view(b, ql, HEADS_Q, DIM).transpose(1, 2).contiguous()
        self.ctx = lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
        if ql == kl:
            self.mask, self.causal = None, True
        else:
            from torch.nn.attention.bias import causal_lower_right
            self.mask, self.causal = causal_lower_right(ql, kl), False
        self.sdpa = torch.nn.functional.scaled_dot_product_attention
        self.gqa = True
        try:
            self.o = self.call()
            torch.cuda.synchronize()
        except Exception as first:  # noqa: BLE001 - cuDNN without GQA: 24-head copies
            self.gqa = False
            self.k = self.k.repeat_interleave(HEADS_Q // HEADS_KV, dim=1)
            self.v = self.v.repeat_interleave(HEADS_Q // HEADS_KV, dim=1)
            try:
                self.o = self.call()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                raise PeerUnavailable(f"cudnn-sdpa: {type(first).__name__}: {str(first)[:150]}"
                                      f"; without GQA: {type(e).__name__}: {str(e)[:150]}") from e

    def call(self):
        with self.ctx():
            if self.gqa:
                return self.sdpa(self.q, self.k, self.v, attn_mask=self.mask,
                                 is_causal=self.causal, scale=SCALE, enable_gqa=True)
            return self.sdpa(self.q, self.k, self.v, attn_mask=self.mask, is_causal=self.causal,
                             scale=SCALE)

    def run(self):
        self.o = self.call()

    def output(self):
        b, h, ql, d = self.o.shape
        return self.o.transpose(1, 2).reshape(b * ql, h, d)
