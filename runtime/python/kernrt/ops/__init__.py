"""fla-compatible drop-in ops over kernrt's kernels (see each module; _dispatch.py holds the
contract: supported calls run kernrt, every other call goes to fla with a logged reason)."""
from .conv import causal_conv1d, causal_conv1d_update  # noqa: F401
from .conv import is_supported as conv_is_supported  # noqa: F401
from .conv import warmup as conv_warmup  # noqa: F401
from .kda import chunk_kda, fused_recurrent_kda  # noqa: F401
from .kda import is_supported as kda_is_supported  # noqa: F401
