"""FlashInfer as the decode peer on the H200 (carried wheel, no network on the device).

Owns: importing a trimmed flashinfer-python (kernels JIT-compiled by the device's nvcc on first
use) and running its tensor-core paged decode (BatchDecodeWithPagedKVCacheWrapper,
use_tensor_cores=True, NHD, page 64) over the same paged K/V views our kernel reads.
Optional dependencies that the image lacks and that the decode path never calls (CuTe DSL,
cuDNN frontend, NCCL helpers...) are replaced by inert stub modules, discovered one failed
import at a time, so that `import flashinfer` succeeds; the stubbed names are reported.
Deliberately does not check: FlashInfer's own numerics (the validation compares it with the
float32 reference like ours).
"""

import torch

from fixture import DIM, HEADS_KV, HEADS_Q, PAGE, SCALE
from stub_imports import import_with_stubs

STUBBED = []


def import_flashinfer():
    fi, stubbed = import_with_stubs("flashinfer", [(".decode", "BatchDecodeWithPagedKVCacheWrapper")])
    STUBBED.extend(stubbed)
    return fi


class FlashInferDecode:
    """FlashInfer tensor-core paged decode over a harness Batch, CUDA-graph ready."""

    def __init__(self, fi, batch):
        self.batch = batch
        b = batch.bsz
        pages = [len(p) for p in batch.page_lists]
        indptr = torch.zeros(b + 1, dtype=torch.int32)
        indptr[1:] = torch.cumsum(torch.tensor(pages, dtype=torch.int32), 0)
        indices = torch.cat(batch.page_lists).to(torch.int32)
        last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(batch.lens, pages)],
                            dtype=torch.int32)
        self.indptr = indptr.cuda()
        self.indices = indices.cuda()
        self.last = last.cuda()
        self.workspace = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
        self.wrapper = fi.decode.BatchDecodeWithPagedKVCacheWrapper(
            self.workspace, "NHD", use_tensor_cores=True, use_cuda_graph=True,
            paged_kv_indptr_buffer=self.indptr, paged_kv_indices_buffer=self.indices,
            paged_kv_last_page_len_buffer=self.last)
        self.wrapper.plan(self.indptr, self.indices, self.last, HEADS_Q, HEADS_KV, DIM, PAGE,
                          q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16,
                          sm_scale=SCALE)
        self.out = torch.empty((b, HEADS_Q, DIM), dtype=torch.bfloat16, device="cuda")
        self.kv = (batch.k_view(), batch.v_view())

    def run(self):
        self.wrapper.run(self.batch.q, self.kv, out=self.out)
