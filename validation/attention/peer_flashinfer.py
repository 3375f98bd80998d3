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

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

import torch

from fixture import DIM, HEADS_KV, HEADS_Q, PAGE, SCALE

STUBBED = []


class _Anything:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __getitem__(self, k):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self.prefixes = set()

    def find_spec(self, name, path, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


def import_flashinfer(max_tries=40):
    finder = _StubFinder()
    sys.meta_path.append(finder)
    for _ in range(max_tries):
        try:
            import flashinfer  # noqa: F401
            from flashinfer.decode import BatchDecodeWithPagedKVCacheWrapper  # noqa: F401
            return flashinfer
        except ModuleNotFoundError as e:
            if not e.name or e.name in finder.prefixes:
                raise
            finder.prefixes.add(e.name)
            STUBBED.append(e.name)
            for k in [k for k in sys.modules if k == "flashinfer" or k.startswith("flashinfer.")]:
                del sys.modules[k]
            importlib.invalidate_caches()
    raise RuntimeError("flashinfer import did not converge")


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
