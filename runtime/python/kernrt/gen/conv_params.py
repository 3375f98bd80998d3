"""The conv kernels' parameter blocks as pack offsets: the Python side of kernels/conv/params.h.

Owns: the byte offset of every field of `ConvFwdParams` and `ConvUpdateParams`, their
sizes, the flag bits of their `flags` word, and `kMaxSteps`. ctest `conv.params_match_header`
(tools/gen/test_conv_params.py) parses the header's static_asserts and constexprs and
compares them with these tables, so the two cannot drift.

Does not check: anything about values (the op generator, kernrt.gen.conv, does); bytes no
field covers are zero in a packed image, which is how an optional pointer reads as null.
"""

FWD_SIZE = 160
FWD = {
    "x": 0, "weight": 8, "bias": 16, "y": 24, "init_state": 32, "final_state": 40,
    "cu_seqlens": 48, "init_lines": 56, "final_lines": 64,
    "x_stride_seq": 72, "x_stride_tok": 80, "y_stride_seq": 88, "y_stride_tok": 96,
    "init_stride": 104, "final_stride": 112,
    "dim": 120, "tokens": 124, "seqs": 128, "flags": 132,
    "residual": 136, "res_stride_seq": 144, "res_stride_tok": 152,
}

UPDATE_SIZE = 144
UPDATE = {
    "x": 0, "weight": 8, "bias": 16, "y": 24, "state": 32, "lines": 40, "step_lines": 48,
    "x_stride_seq": 56, "x_stride_tok": 64, "y_stride_seq": 72, "y_stride_tok": 80,
    "state_stride": 88, "step_lines_stride": 96,
    "dim": 104, "seqs": 108, "steps": 112, "flags": 116,
    "residual": 120, "res_stride_seq": 128, "res_stride_tok": 136,
}

# Scalar widths (bytes) of the non-pointer fields; pointers are 8.
I32_FIELDS = {"dim", "tokens", "seqs", "flags", "steps"}

FLAG_SILU = 1
FLAG_WEIGHT_F32 = 2
FLAG_STATE_FULL = 4

MAX_STEPS = 8

# C++ names of the constants above, for the header check.
CONSTANTS = {"kFlagSilu": FLAG_SILU, "kFlagWeightF32": FLAG_WEIGHT_F32,
             "kFlagStateFull": FLAG_STATE_FULL, "kMaxSteps": MAX_STEPS}
STRUCTS = {"ConvFwdParams": (FWD, FWD_SIZE), "ConvUpdateParams": (UPDATE, UPDATE_SIZE)}


def field(block, name, **value):
    """One pack field of `block` (FWD or UPDATE) at `name`'s offset: field(FWD, "dim", i32=8)."""
    if name not in block:
        raise KeyError(f"no field `{name}` in this parameter block")
    (kind, v), = value.items()
    return {"at": block[name], kind: v}
