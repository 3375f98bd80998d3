"""The TRTLLM-GEN FMHA parameter block as pack fields: offsets, encodings, and one field builder.

Owns: the byte offsets of the 1280-byte `KernelParams` block that the TRTLLM-GEN attention
cubins read (FlashInfer v0.6.12 .. v0.6.18rc3 layout; our sm90 kernels read the same block),
the integer encodings of its non-trivial scalars (signed fast divisor, f32 bit patterns, the
two-bool word at 1252), and helpers that turn offsets and values into kern schema-v4 pack
fields with the key order kern's writer uses.

Does not check: that a cubin really uses this layout (the struct changes between cubin drops;
the runtime compares param sizes with cuFuncGetParamInfo at load), nor any manifest rule (the
verifier does that). Bytes no field covers are zero in the packed image, so zero-valued
members (the fast divisor's `add`, the high word of `mNumHiddenEltsO`, the Sage/skip-softmax
knobs) get no field.
"""

import math
import struct

SIZE = 1280

# Tensormaps (128 bytes each, 64-byte aligned). 256 (sliding-window pool), 640 and 768 (K/V
# scale factors) stay zero for BF16 paged KV.
TMA_Q = 0
TMA_K = 128
TMA_V = 384
TMA_O = 512

# Pointers (8 bytes).
PTR_O = 912
PTR_CUM_SEQ_LENS_Q = 936
PTR_MULTI_CTAS_KV_COUNTER = 984
PTR_PAGE_IDX_KV = 1000
PTR_PARTIAL_O = 1008
PTR_PARTIAL_STATS = 1016
PTR_SEQ_LENS_KV = 1080

# Scalars (4 bytes unless noted).
ATTENTION_WINDOW_SIZE = 1112
BATCH_SIZE = 1116
MAX_SEQ_LEN_Q = 1144
MAX_SEQ_LEN_KV = 1148
MAX_NUM_CTAS_Q = 1152
MAX_NUM_CTAS_KV = 1156
MAX_NUM_PAGES_PER_SEQ_KV = 1160
NUM_HEADS_KV = 1164
NUM_HEADS_Q = 1168
NUM_HEADS_Q_PER_KV = 1172
NUM_HEADS_Q_PER_KV_DIVISOR = 1176  # 16 bytes: +0 divisor, +4 multiplier, +8 add, +12 shift
NUM_HIDDEN_ELTS_O = 1192  # i64; the low word carries the value
NUM_PAGES_IN_MEM_POOL = 1200
NUM_TOKENS_PER_CTA_Q = 1204
NUM_TOKENS_PER_PAGE_LOG2 = 1208
RESHAPE_FACTOR_KV = 1212
OUTPUT_SCALE = 1216  # f32
SCALE_SOFTMAX_LOG2 = 1220  # f32
SCALE_SF_KV = 1224  # f32
SCALE_SF_O = 1228  # f32
SUM_OF_SEQ_LENS_Q = 1244
USE_BLOCK_SPARSE_ATTENTION = 1252  # bool; 1253 is mUsesSharedPagedKvIdx (bool)

INT32_MAX = 2**31 - 1


class GenError(ValueError):
    """A description the generator cannot turn into an op; the message says what to change."""


def as_i32(value):
    """Reinterpret a 32-bit unsigned or signed value as the signed i32 a pack literal holds."""
    if not -(2**31) <= value < 2**32:
        raise GenError(f"value {value} does not fit 32 bits")
    return value - 2**32 if value >= 2**31 else value


def checked_i32(name, value):
    """A value the kernel reads as a signed int32 must fit one; name it when it does not."""
    if not -(2**31) <= value <= INT32_MAX:
        raise GenError(f"`{name}` = {value} does not fit an i32 field")
    return value


def f32_bits(value):
    """The i32 whose little-endian bytes are the IEEE-754 single closest to `value`."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def fast_divisor(divisor):
    """(divisor, multiplier, shift) of a signed int32 fast divisor; `add` is always 0.

    For d >= 2: shift = ceil(log2 d) - 1 and multiplier = ceil(2^(32 + shift) / d), so that
    q = mulhi(n, multiplier) >> shift for every non-negative int32 n. For d = 6 this gives
    multiplier 0xAAAAAAAB and shift 2.
    """
    if divisor < 2:
        raise GenError(f"fast divisor needs a divisor >= 2, got {divisor}")
    shift = math.ceil(math.log2(divisor)) - 1
    multiplier = -(-(1 << (32 + shift)) // divisor)
    return divisor, as_i32(multiplier), shift


def shared_idx_word(block_sparse, shared_paged_kv_idx):
    """The i32 at 1252 holding the two bools mUseBlockSparseAttention and mUsesSharedPagedKvIdx."""
    return int(bool(block_sparse)) | (int(bool(shared_paged_kv_idx)) << 8)


# Pack field builders, each returning one field with kern's key order ("at" first).

def tensormap(at, param, dims, strides, box, dtype="bf16", swizzle=128, l2_promotion=128):
    return {"at": at, "tensormap": {"param": param, "dtype": dtype, "dims": list(dims),
                                    "strides": list(strides), "box": list(box),
                                    "swizzle": swizzle, "l2_promotion": l2_promotion}}


def param(at, index):
    return {"at": at, "param": index}


def i32(at, value):
    return {"at": at, "i32": value}


def expr(at, expression):
    return {"at": at, "expr": expression}


def scratch(at, name):
    return {"at": at, "scratch": name}
