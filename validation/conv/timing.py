"""Timing of the conv candidates through the product path, with fla, kernel-fun and a copy.

Owns the timing method: per shape, one generated manifest holds the rotation sets (so one
round touches > 128 MB, twice the 60 MB L2) and one program per candidate whose K calls
cycle over the sets; ours run as `rt.enqueue(program, stream=s, graph=True)` (the runtime's
cached graph), the peers as the same K calls captured in one torch.cuda.graph on the same
tensors (views of our buffers: the same inputs), torch's device copy of the same bytes
likewise. CUDA events around each replay, the host queue pre-filled behind a GPU sleep,
per call = replay / K, median of R replays. Returns the bytes each call moves; run.py turns
them into floors at the 4 GB copy rate of the same call. The copy is a reference, not a
floor: captured in a graph, torch's copy of 512 MiB tensors (B16 T8192 D2048) ran 397 us
where that rate gives 254 and our conv of the same bytes 272, while its 128 and 256 MiB
copies ran within 2.5 % of the rate.
Does not check results (cases.py does).
"""
import statistics

import torch

import kernrt
import manifests as mf
from kernrt.gen import pin

L2_ROT = 128 << 20
NOMINAL_BW = 4.275e12  # B/s, the H200 copy rate earlier runs measured (notes.md)


def _median_us(launch, reps, calls):
    """launch() enqueues one replay of `calls` calls on the current stream."""
    s = torch.cuda.current_stream()
    launch()
    s.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(20_000_000)  # the host queues every replay before any runs
    for a, b in ev:
        a.record(s)
        launch()
        b.record(s)
    s.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 / calls for a, b in ev)


def torch_graph_us(fn, nsets, calls, reps):
    """fn(i) enqueues one call on set i; warm eagerly (autotune), capture `calls`, time."""
    for i in range(nsets):
        fn(i)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(nsets):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i % nsets)
    return _median_us(graph.replay, reps, calls)


def ours_us(rt, program, calls, reps, **vars_):
    s = torch.cuda.current_stream()
    return _median_us(lambda: rt.enqueue(program, stream=s, graph=True, **vars_), reps, calls)


def _safe(fn, *a, **kw):
    try:
        return fn(*a, **kw), None
    except Exception as e:  # noqa: BLE001 - a peer that fails is recorded, not fatal
        return None, f"{type(e).__name__}: {e}"[:160]


def fwd_shape(cubins, cands, peers, B, T, D, W=4, calls=8, reps=20):
    """cands: {label: loader}; peers: {name: fn(x, w)}. Returns ({label: us},
    {label: why it has no time}, bytes per call: x read + y written)."""
    xb = B * T * D * 2
    nsets = max(2, -(-L2_ROT // (2 * xb)))
    m = mf.fwd_bench(cands, B, T, D, W, nsets, calls)
    rt = kernrt.load(pin(m, cubins), cubins=[cubins])
    xs = [rt.buffer(f"x{i}") for i in range(nsets)]
    ys = [rt.buffer(f"y{i}") for i in range(nsets)]
    gen = torch.Generator(device="cuda").manual_seed(B * T + D)
    for x in xs:
        x.copy_(torch.randn(x.shape, device="cuda", generator=gen).to(torch.bfloat16))
    w = rt.buffer("weight")
    w.copy_((torch.rand(D, W, device="cuda", generator=gen) * 2 - 1) / W ** 0.5)
    res, notes = {}, {}
    first = None
    for label in cands:
        ys[0].fill_(float("nan"))
        res[label], why = _safe(ours_us, rt, label, calls, reps, tokens=T, seqs=B)
        if why:
            notes[label] = why
        elif first is None:
            first = (label, ys[0].clone())
        elif not torch.equal(ys[0], first[1]):  # a candidate's y must equal the first's bit for bit
            notes[label] = f"y differs from {first[0]}'s: time dropped"
            res[label] = None
    res["copy"], _ = _safe(torch_graph_us, lambda i: ys[i].copy_(xs[i]), nsets, calls, reps)
    _sm_copies(res, notes, [x.view(-1) for x in xs], [y.view(-1) for y in ys], nsets, calls, reps)
    for name, fn in peers.items():
        if fn is None:
            continue
        res[name], why = _safe(torch_graph_us, lambda i, fn=fn: fn(xs[i], w), nsets, calls, reps)
        if why:
            notes[name] = why
    return res, notes, 2 * xb  # the caller empties torch's cache once these views are gone


def _sm_copies(res, notes, srcs, dsts, nsets, calls, reps):
    """res["sm_copy:<config>"]: sm_copy.py's copy of srcs[i] -> dsts[i], K calls in a graph."""
    try:
        import sm_copy
    except Exception as e:  # noqa: BLE001 - a missing Triton is recorded, not fatal
        notes["sm_copy"] = f"unavailable: {type(e).__name__}: {e}"[:160]
        return
    for cfg in sm_copy.CONFIGS:
        res[f"sm_copy:{cfg}"], why = _safe(torch_graph_us, lambda i, c=cfg: sm_copy.copy(srcs[i], dsts[i], c),
                                           nsets, calls, reps)
        if why:
            notes[f"sm_copy:{cfg}"] = why


def update_shape(cubins, cands, fla_update, N, D, W=4, calls=64, reps=20):
    """Decode timing: cands {label: (layout, loader)} over our pool lines (layout "lines") or
    fla's cache as a carry buffer (layout "fla", the drop-in's form), each also at one
    sequence (`<label>@1`, `fla@1`: the per-call latency floor), and sm_copy.py's copy of our
    lines' bytes. Returns ({label: us}, notes, bytes per call of our lines, of fla's)."""
    ours_line = D * (W - 1) * 2
    per_call = 2 * N * D * 2 + 2 * N * ours_line
    nsets = min(calls, max(2, -(-L2_ROT // per_call)))
    m, slots = mf.update_bench(cands, N, D, W, nsets, calls)
    rt = kernrt.load(pin(m, cubins), cubins=[cubins], seq_slots=slots)
    gen = torch.Generator(device="cuda").manual_seed(N + D)
    st = rt.state("conv")
    st.view(torch.bfloat16).copy_(torch.randn(st.numel() // 2, device="cuda", generator=gen).to(torch.bfloat16))
    perm = torch.randperm(slots - 1, device="cuda", generator=gen) + 1
    for i in range(nsets):
        rt.buffer(f"lines{i}").copy_(perm[i * N:(i + 1) * N].int())
        rt.buffer(f"x{i}").copy_(torch.randn(N, D, device="cuda", generator=gen).to(torch.bfloat16))
        if f"cache{i}" in m["buffers"]:
            rt.buffer(f"cache{i}").copy_(torch.randn(N, D, W, device="cuda", generator=gen).to(torch.bfloat16))
    w = rt.buffer("weight")
    w.copy_((torch.rand(D, W, device="cuda", generator=gen) * 2 - 1) / W ** 0.5)
    res, notes = {}, {}
    for label in cands:
        res[label], why = _safe(ours_us, rt, label, calls, reps, seqs=N)  # noqa: B023
        if why:
            notes[label] = why
        # the same program at one sequence: the call's latency floor on this launch path
        res[f"{label}@1"], _ = _safe(ours_us, rt, label, calls, reps, seqs=1)
    if fla_update is not None:
        caches = [torch.randn(N, D, W, device="cuda", generator=gen).to(torch.bfloat16) for _ in range(nsets)]
        xs = [rt.buffer(f"x{i}") for i in range(nsets)]
        res["fla"], why = _safe(torch_graph_us, lambda i: fla_update(xs[i], caches[i], weight=w, activation="silu"),
                                nsets, calls, reps)
        if why:
            notes["fla"] = why
        res["fla@1"], _ = _safe(torch_graph_us, lambda i: fla_update(xs[i][:1], caches[i][:1], weight=w,
                                                                     activation="silu"), nsets, calls, reps)
    # the same bytes through the SMs: our lines' state + x read, state + y written
    nb = N * D * W * 2  # (W - 1) slots + the token per channel, 2 bytes each
    srcs = [torch.empty(nb // 2, dtype=torch.bfloat16, device="cuda") for _ in range(nsets)]
    dsts = [torch.empty_like(t) for t in srcs]
    _sm_copies(res, notes, srcs, dsts, nsets, calls, reps)
    return res, notes, per_call, 2 * N * D * 2 + 2 * N * D * W * 2
