#!/usr/bin/env python3
"""Causal conv1d op generator: one profile -> kern schema-v4 ops over kernels/conv cubins.

Owns: the conv ops (interface, entry choice, launch geometry, the ConvFwdParams /
ConvUpdateParams packs whose offsets come from conv_params.py) for one profile (x dtype,
width W, channels D, weight dtype, bias, activation, residual, state layout, loader), the
shipped fragment manifests/ops/conv.json.in, `dropin_manifest` (a complete one-call
manifest whose buffers are exactly one fla call's tensors, for kernrt.ops), and `check`,
which refuses conv calls whose buffers cannot be right: weight shape not [D, W], x/y rows
shorter than D, a state line shorter than the layout's, byte offsets not 16-aligned, x and
y overlapping. The complete examples are conv_examples.py.
Refuses at generation: W outside 2..4, D not a positive multiple of 8, strides not multiples
of 8 elements, unknown dtypes / loaders / layouts, steps outside 1..8.

Loaders (kernels/conv/conv_fwd.cu, conv_update.cu): forward `ring8x4h` (block 96 = 64
consumers + a producer warp, 16,448 bytes of dynamic shared memory, grid x = ceil(D / 256),
grid y = 3 ceil(tokens / 72): spans of 16, 24 and 32 rows in turn);
decode `c4s2p` over our lines and `c4p` over fla's cache (block 128, 4 channels per thread,
grid x = ceil(D / 512), grid y = ceil(seqs / 2) and seqs; both prefetch into L2 before
griddepcontrol.wait); verify (block 128, one sequence per thread). The candidates they beat
on the H200 are in git tags conv-candidates-2026-12 .. conv-candidates-2026-12n
(validation/conv/notes.md). Module sha256 =
`@SHA256:<cubin>@`, replaced by cmake's kernrt_pin_manifest or kernrt.gen.pin.

Does not check: kernel behaviour, the manifest rules (kernrt-verify does), or sequences
whose lengths differ from what cu_seqlens says. Python 3 standard library only.
"""

import os
import sys

from . import files as _files
from . import conv_params as cp
from .conv_params import FWD, UPDATE, field

# loader -> (channels per thread, block.x). ring8x4h: x rows streamed into 4 shared-memory
# stages of 8 rows by a producer warp, 64 consumers + the producer, the blocks along grid.y
# taking spans of 16, 24 and 32 rows in turn (FWD_SPAN_CYCLE); 1.2-2.4 % faster than 128
# consumers at uniform spans of 24 at every forward shape on the H200 (kernels/conv/conv_fwd.cu,
# validation/conv/notes.md).
FWD_KERNELS = {"ring8x4h": (4, 96)}
# loader -> dynamic shared memory (conv_fwd.cu's sizeof(RingOf<..>), asserted there)
FWD_RING_SMEM = {"ring8x4h": 16448}
# loader -> (rows, blocks) of one cycle of its spans along grid.y (conv_fwd.cu's Loader:
# 16 + 24 + 32 rows over 3 blocks), so grid.y = blocks * ceil(tokens / rows)
FWD_SPAN_CYCLE = {"ring8x4h": (72, 3)}
FWD_PRODUCER_THREADS = 32  # the forward block's last warp streams x and owns no channels
# loader -> (sequences per thread, block.x, channels per thread, the state layout it
# serves): the fastest over each layout at B64 D4096 and B256 D8192 (notes.md)
UPDATE_KERNELS = {"c4s2p": (2, 128, 4, "lines"), "c4p": (1, 128, 4, "fla")}
FWD_KERNEL = "ring8x4h"  # what the shipped manifests and the drop-ins launch
UPDATE_KERNEL = {"lines": "c4s2p", "fla": "c4p"}  # per state layout
VERIFY_THREADS = 128
CHANNELS = 8             # D and every row stride are multiples of this
LAYOUTS = ("lines", "fla")  # state lines [D, W-1] (ours) or [D, W] (fla's cache)
ESIZE = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))


class GenError(Exception):
    """A profile or manifest the conv kernels cannot serve; message says what and why."""


class Profile:
    """What one family of conv ops computes, how its activations are laid out, and which
    loaders run it."""

    def __init__(self, dim, width=4, dtype="bf16", weight="f32", bias=False, act="silu",
                 x_row=None, y_row=None, residual=False, state_layout="lines",
                 fwd_kernel=FWD_KERNEL, update_kernel=None):
        if dtype not in ("bf16", "f16"):
            raise GenError(f"x dtype `{dtype}` is not supported: expected bf16 or f16")
        if weight not in ("f32", "bf16"):
            raise GenError(f"weight dtype `{weight}` is not supported: expected f32 or bf16")
        if act not in ("silu", "none"):
            raise GenError(f"activation `{act}` is not supported: expected silu or none")
        if not isinstance(width, int) or not 2 <= width <= 4:
            raise GenError(f"conv width W = {width} is not supported: the kernels have entries "
                           f"for W in 2..4 only")
        if not isinstance(dim, int) or dim <= 0 or dim % CHANNELS:
            raise GenError(f"channels D = {dim} must be a positive multiple of {CHANNELS} "
                           f"(one 16-byte vector per thread)")
        if state_layout not in LAYOUTS:
            raise GenError(f"state layout `{state_layout}` is not supported: expected "
                           f"{' or '.join(LAYOUTS)}")
        if fwd_kernel not in FWD_KERNELS:
            raise GenError(f"forward loader `{fwd_kernel}` is unknown: expected one of "
                           f"{', '.join(FWD_KERNELS)}")
        if update_kernel is None:
            update_kernel = UPDATE_KERNEL[state_layout]
        if update_kernel not in UPDATE_KERNELS:
            raise GenError(f"decode loader `{update_kernel}` is unknown: expected one of "
                           f"{', '.join(UPDATE_KERNELS)}")
        if UPDATE_KERNELS[update_kernel][3] != state_layout:
            raise GenError(f"decode loader `{update_kernel}` has entries for the "
                           f"`{UPDATE_KERNELS[update_kernel][3]}` state layout only, not "
                           f"`{state_layout}`")
        self.dim, self.width, self.dtype, self.weight = dim, width, dtype, weight
        self.bias, self.act, self.residual = bias, act, residual
        self.state_layout, self.fwd_kernel, self.update_kernel = state_layout, fwd_kernel, update_kernel
        self.fwd_threads = FWD_KERNELS[fwd_kernel][1]
        self.x_row = dim if x_row is None else x_row
        self.y_row = dim if y_row is None else y_row
        for name, row in (("x_row", self.x_row), ("y_row", self.y_row)):
            if row < dim or row % CHANNELS:
                raise GenError(f"`{name}` = {row} must be >= D = {dim} and a multiple of "
                               f"{CHANNELS} elements (16-byte aligned rows)")

    @property
    def tag(self):
        return f"{self.dtype}_w{self.width}_d{self.dim}"

    @property
    def slots(self):
        """State slots per channel: W-1 in our lines, W in fla's."""
        return self.width if self.state_layout == "fla" else self.width - 1

    @property
    def line_bytes(self):
        """Bytes of one conv state line: [D, slots] in x's dtype."""
        return self.dim * self.slots * ESIZE[self.dtype]

    @property
    def flags(self):
        return ((cp.FLAG_SILU if self.act == "silu" else 0)
                | (cp.FLAG_WEIGHT_F32 if self.weight == "f32" else 0)
                | (cp.FLAG_STATE_FULL if self.state_layout == "fla" else 0))

    def entry(self, kind):
        """The cubin entry of `kind` (fwd | update | verify) for this profile."""
        suffix = f"sm90a_{self.dtype}_w{self.width}"
        if kind == "fwd":
            return f"conv_fwd_{self.fwd_kernel}_{suffix}"
        if kind == "update":
            fla = "_fla" if self.state_layout == "fla" else ""
            return f"conv_update_{self.update_kernel}{fla}_{suffix}"
        if self.state_layout == "fla":
            raise GenError("the verify entries keep our [D, W-1] lines only")
        return f"conv_verify_{suffix}"

    def grid_x(self, kind):
        if kind == "fwd":
            ch, threads = FWD_KERNELS[self.fwd_kernel][0], self.fwd_threads
            threads -= FWD_PRODUCER_THREADS
        elif kind == "update":
            _, threads, ch, _ = UPDATE_KERNELS[self.update_kernel]
        else:
            ch, threads = CHANNELS, VERIFY_THREADS
        return -(-self.dim // (ch * threads))

    def head(self):
        """Interface params every op starts with: x, weight, [bias,] y, [residual]."""
        p = [f"in buffer<{self.dtype}>", f"in buffer<{self.weight}>"]
        if self.bias:
            p.append(f"in buffer<{self.weight}>")
        p.append(f"out buffer<{self.dtype}>")
        if self.residual:
            p.append(f"in buffer<{self.dtype}>")
        return p

    def head_fields(self, block):
        """Pack fields of x, weight, bias, y, residual (block: FWD or UPDATE)."""
        names = ["x", "weight"] + (["bias"] if self.bias else []) + ["y"] + (
            ["residual"] if self.residual else [])
        return [field(block, n, param=i) for i, n in enumerate(names)]


def _launch(module, entry, size, fields, grid, threads, shared_mem=0):
    launch = {"module": module, "entry": entry, "params": [f"bytes<{size}>"],
              "block": [threads, 1, 1], "grid": grid, "pdl": True,
              "args": [{"pack": {"size": size, "fields": sorted(fields, key=lambda f: f["at"])}}]}
    if shared_mem:
        launch["shared_mem"] = shared_mem
    return launch


def _strides(block, prefix, seq, tok):
    return [field(block, f"{prefix}_stride_seq", i64=seq), field(block, f"{prefix}_stride_tok", i64=tok)]


def fwd_op(p, *, x_strides, y_strides, res_strides=None, varlen=False, states=None,
           tokens="tokens", seqs="seqs"):
    """The forward. Dense: x/y/res [seqs, tokens, .] with (seq, token) element strides,
    grid z = seqs. varlen: x/y/res packed rows (token strides only) and a cu_seqlens param.
    states: None, or a set of "init" / "final" (dense [N, D, slots] buffers, row n: an `in`
    and an `out` param, in that order), or "pool" (final states into a state at line-table
    rows: `inout state`, `in buffer<i32>`; our serving prefill), or "pool_init" (the same,
    and initial states from that state at a second line table, `in buffer<i32>`)."""
    states = set() if states is None else {states} if isinstance(states, str) else set(states)
    if not states <= {"init", "final"} and states not in ({"pool"}, {"pool_init"}):
        raise GenError(f"forward states {sorted(states)}: expected init and/or final, pool or pool_init")
    params = p.head()
    fields = p.head_fields(FWD) + [
        field(FWD, "dim", i32=p.dim), field(FWD, "tokens", var=tokens), field(FWD, "flags", i32=p.flags)]
    fields += _strides(FWD, "x", *x_strides) + _strides(FWD, "y", *y_strides)
    if p.residual:
        fields += _strides(FWD, "res", *(res_strides or y_strides))
    if varlen:
        params.append("in buffer<i32>")
        fields += [field(FWD, "cu_seqlens", param=len(params) - 1), field(FWD, "seqs", var=seqs)]
    if "init" in states:
        params.append(f"in buffer<{p.dtype}>")
        fields += [field(FWD, "init_state", param=len(params) - 1), field(FWD, "init_stride", i64=p.line_bytes)]
    if "final" in states:
        params.append(f"out buffer<{p.dtype}>")
        fields += [field(FWD, "final_state", param=len(params) - 1),
                   field(FWD, "final_stride", i64=p.line_bytes)]
    if states & {"pool", "pool_init"}:
        params += ["inout state", "in buffer<i32>"]
        fields += [field(FWD, "final_state", param=len(params) - 2),
                   field(FWD, "final_lines", param=len(params) - 1),
                   field(FWD, "final_stride", i64=p.line_bytes)]
    if "pool_init" in states:
        params.append("in buffer<i32>")
        fields += [field(FWD, "init_state", param=len(params) - 3),
                   field(FWD, "init_lines", param=len(params) - 1),
                   field(FWD, "init_stride", i64=p.line_bytes)]
    rows, blocks = FWD_SPAN_CYCLE[p.fwd_kernel]
    gy = {"mul": [{"ceil_div": [tokens, rows]}, blocks]}
    grid = [p.grid_x("fwd"), gy, 1 if varlen else seqs]
    return {"params": params, "impl": {"launches": [
        _launch("conv_fwd", p.entry("fwd"), cp.FWD_SIZE, fields, grid, p.fwd_threads,
                FWD_RING_SMEM[p.fwd_kernel])]}}


def fwd_dense_op(p, max_tokens):
    """Dense batch: x/y buffers [seqs, tokens, row] sized at the vars' maxima."""
    return fwd_op(p, x_strides=(max_tokens * p.x_row, p.x_row), y_strides=(max_tokens * p.y_row, p.y_row))


def prefill_op(p):
    """Packed varlen prefill; final states into the pool lines (fresh sequences: no initial)."""
    return fwd_op(p, x_strides=(0, p.x_row), y_strides=(0, p.y_row), varlen=True, states="pool")


def update_op(p, steps=1, step_lines=False, max_seqs=None, state="pool", x_strides=None,
              y_strides=None, res_strides=None, seqs="seqs"):
    """Decode (steps 1) or verify (steps 2..8): x/y [seqs, steps, row]. state "pool": a
    state at line-table rows; "buffer": an `inout` buffer [seqs, D, slots], row n (the
    drop-in's cache)."""
    if not isinstance(steps, int) or not 1 <= steps <= cp.MAX_STEPS:
        raise GenError(f"steps = {steps} is not supported: expected 1..{cp.MAX_STEPS}")
    if step_lines and max_seqs is None:
        raise GenError("step lines need `max_seqs` (the row stride of the [steps, seqs] table)")
    verify = steps > 1 or step_lines
    kind = "verify" if verify else "update"
    n = len(p.head())
    params = p.head()
    fields = p.head_fields(UPDATE) + [
        field(UPDATE, "state", param=n), field(UPDATE, "state_stride", i64=p.line_bytes),
        field(UPDATE, "dim", i32=p.dim), field(UPDATE, "seqs", var=seqs),
        field(UPDATE, "steps", i32=steps), field(UPDATE, "flags", i32=p.flags)]
    fields += _strides(UPDATE, "x", *(x_strides or (steps * p.x_row, p.x_row)))
    fields += _strides(UPDATE, "y", *(y_strides or (steps * p.y_row, p.y_row)))
    if p.residual:
        fields += _strides(UPDATE, "res", *(res_strides or (steps * p.y_row, p.y_row)))
    if state == "pool":
        params += ["inout state", "in buffer<i32>"]
        fields.append(field(UPDATE, "lines", param=n + 1))
    elif state == "buffer":
        params.append(f"inout buffer<{p.dtype}>")
    else:
        raise GenError(f"decode state `{state}`: expected pool or buffer")
    if step_lines:
        params.append("in buffer<i32>")
        fields += [field(UPDATE, "step_lines", param=len(params) - 1),
                   field(UPDATE, "step_lines_stride", i64=max_seqs)]
    per = 1 if verify else UPDATE_KERNELS[p.update_kernel][0]
    threads = VERIFY_THREADS if verify else UPDATE_KERNELS[p.update_kernel][1]
    grid = [p.grid_x(kind), {"ceil_div": [seqs, per]} if per > 1 else seqs, 1]
    return {"params": params, "impl": {"launches": [
        _launch("conv_update", p.entry(kind), cp.UPDATE_SIZE, fields, grid, threads)]}}


MODULES = {
    "conv_fwd": {"source": "conv_fwd.sm90a.cubin", "sha256": "@SHA256:conv_fwd.sm90a@"},
    "conv_update": {"source": "conv_update.sm90a.cubin", "sha256": "@SHA256:conv_update.sm90a@"},
}


def modules_of(ops):
    """The MODULES entries the ops launch."""
    used = {ln["module"] for o in ops.values() for ln in o["impl"]["launches"]}
    return {k: v for k, v in MODULES.items() if k in used}


def fragment():
    """The shipped ops: KDA's short convolutions (q/k D 2048, v D 4096; W 4, silu, f32
    weight, bf16 x) read from a fused projection row [q | k | v] of 8192 elements."""
    ops = {}
    for d in (2048, 4096):
        p = Profile(d, x_row=8192)
        ops[f"conv_prefill_{p.tag}"] = prefill_op(p)
        ops[f"conv_decode_{p.tag}"] = update_op(p)
        ops[f"conv_verify4_{p.tag}"] = update_op(p, steps=4)
    return {"modules": MODULES, "ops": ops}


from .conv_dropin import dropin_manifest, view_elements  # noqa: E402,F401  (uses the above)
from .conv_check import check  # noqa: E402,F401

# ---- files -------------------------------------------------------------------------------


dump = _files.dump


def outputs():
    """Every generated file, path relative to the repository -> text."""
    from .conv_examples import examples
    files = {"manifests/ops/conv.json.in": dump(fragment())}
    files.update(_files.checked_examples(examples(), check, "examples/conv", GenError))
    return files


def main(argv=None):
    return _files.main(argv, prog="conv_op.py", description=__doc__.split("\n")[0], outputs=outputs,
                       check=check, error=GenError, repo=REPO, what="the fragment and the examples")


if __name__ == "__main__":
    sys.exit(main())
