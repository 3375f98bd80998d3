"""The options of every check case of validation/conv (cases.py runs them; test_manifests.py
verifies the manifests they make on the CPU). Plain data, no torch.

Forward cases cover W 2..4, bf16 and f16, f32 and bf16 weights, bias, no activation, x row
strides wider than D, dense and varlen batches (sequences of 1 .. 1024 rows, shorter than W
included), dense initial/final states and pool lines; decode cases cover padding lines,
chains of steps, and verify with per-step rollback lines; drop-in cases fla's [N, D, W]
states, a residual, and binding torch tensors.
"""

FWD_CASES = [
    dict(B=2, T=512, D=2048, W=4),
    dict(B=2, T=64, D=128, W=3, wdtype="bf16", bias=True, silu=False),
    dict(B=3, T=40, D=256, W=2),
    dict(B=2, T=1000, D=1024, W=4, dtype="f16", bias=True),
    dict(B=2, T=500, D=200, W=3, dtype="f16"),
    dict(B=2, T=512, D=2048, W=4, xpad=32),
    dict(B=2, T=333, D=1536, W=4, xpad=8, bias=True),
    dict(B=2, T=100, D=512, W=4, states=True, bias=True),
    dict(B=3, T=2, D=256, W=4, states=True),
    dict(B=1, T=0, D=512, W=4, lens=[1, 2, 37, 1, 259, 2, 3, 16, 17], states=True),
    dict(B=1, T=0, D=512, W=4, lens=[1, 2, 37, 1, 259, 2, 3, 16, 17]),
    dict(B=1, T=0, D=256, W=3, lens=[5, 1, 2, 30], dtype="f16", states=True, bias=True),
    dict(B=1, T=0, D=256, W=2, lens=[1, 1, 9, 33], states=True, silu=False),
    dict(B=1, T=0, D=1024, W=4, lens=[500, 1024, 700, 801], xpad=16),
    dict(B=1, T=0, D=512, W=4, lens=[3, 2, 70, 1, 18], states=True, pool=True),
    dict(B=1, T=0, D=2048, W=4, lens=[64, 31, 33, 1, 95, 160, 3], states=True),
]
UPDATE_CASES = [
    dict(N=64, D=4096, W=4, chain=3),
    dict(N=5, D=200, W=4, chain=2),  # a partial last warp (the staged loaders' chunk path)
    dict(N=33, D=1024, W=3, dtype="f16", bias=True, chain=2),
    dict(N=16, D=512, W=2, wdtype="bf16", silu=False),
    dict(N=9, D=256, W=4, pad_line=True, chain=2),
    dict(N=100, D=2048, W=4, chain=4),
    dict(N=16, D=512, W=4, steps=4, step_lines=True, chain=2),
    dict(N=7, D=256, W=3, steps=8, dtype="f16", bias=True),
    dict(N=32, D=1024, W=4, steps=2),
]
DROPIN_FWD_CASES = [
    dict(B=2, T=300, D=1024, W=4, bias=True),
    dict(B=1, T=0, D=512, W=4, lens=[1, 2, 3, 40, 5]),
    dict(B=2, T=200, D=512, W=4, residual=True, states=False, xrow=1536),
]
DROPIN_UPDATE_CASES = [
    dict(N=64, D=4096, W=4),
    dict(N=33, D=1024, W=3, bias=True, residual=True),
    dict(N=16, D=512, W=4, bind=True),
]
