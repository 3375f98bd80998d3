"""kernrt.ops routing on any machine: which calls run kernrt, which are forwarded to fla,
the reason strings, arguments forwarded verbatim, one log line per family and outcome, and
the error when fla is absent. Fake tensors stand in for torch's (no torch, no GPU needed)."""
import logging
import unittest

import _env  # noqa: F401  (sys.path)
from kernrt.ops import _dispatch
from kernrt.ops import conv


class FakeTensor:
    def __init__(self, shape, dtype="torch.bfloat16", stride=None, ptr=0x10000, cuda=True,
                 grad=False, capability=(9, 0)):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._stride = stride or self._contiguous(shape)
        self._ptr, self.is_cuda, self.requires_grad = ptr, cuda, grad
        self.capability = capability
        self.device = type("Device", (), {"index": 0})()

    @staticmethod
    def _contiguous(shape):
        s, out = 1, []
        for n in reversed(shape):
            out.append(s)
            s *= n
        return tuple(reversed(out))

    def stride(self, dim=None):
        return self._stride if dim is None else self._stride[dim]

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._stride == self._contiguous(self.shape)


def call(**over):
    args = dict(x=FakeTensor((2, 64, 256)), weight=FakeTensor((256, 4), "torch.float32"),
                activation="silu")
    args.update(over)
    return conv.is_supported(**args)


class ConvRouting(unittest.TestCase):
    def test_mainline_call_is_supported(self):
        self.assertEqual(call(), (True, ""))
        self.assertEqual(call(bias=FakeTensor((256,), "torch.float32")), (True, ""))
        self.assertEqual(call(activation=None, weight=FakeTensor((256, 3), "torch.bfloat16")),
                         (True, ""))
        strided = FakeTensor((2, 64, 256), stride=(64 * 768, 768, 1))  # a slice of [B, T, 3D]
        self.assertEqual(call(x=strided), (True, ""))
        self.assertEqual(call(residual=FakeTensor((2, 64, 256))), (True, ""))
        self.assertEqual(call(initial_state=FakeTensor((2, 256, 4)), output_final_state=True), (True, ""))
        self.assertEqual(call(x=FakeTensor((1, 64, 256)), cu_seqlens=FakeTensor((4,), "torch.int64")),
                         (True, ""))

    def test_every_unsupported_call_says_why(self):
        cases = [
            (dict(x=FakeTensor((2, 64, 256), grad=True)), "requires grad"),
            (dict(x=FakeTensor((2, 64, 256), cuda=False)), "not a CUDA tensor"),
            (dict(x=FakeTensor((2, 64, 256), capability=(8, 0))), "below sm90"),
            (dict(x=FakeTensor((2, 64, 256), capability=(10, 0))), "sm_90a (Hopper) only"),
            (dict(x=FakeTensor((2, 64, 256), "torch.float32")), "x dtype"),
            (dict(weight=FakeTensor((256, 5), "torch.float32")), "W = 5"),
            (dict(weight=FakeTensor((128, 4), "torch.float32")), "is not [D=256, W]"),
            (dict(weight=FakeTensor((256, 4), "torch.float16")), "weight dtype"),
            (dict(bias=FakeTensor((256,), "torch.bfloat16")), "bias must be"),
            (dict(activation="gelu"), "activation `gelu`"),
            (dict(backend="cuda"), "backend `cuda`"),
            (dict(residual=FakeTensor((2, 64, 128))), "residual shape"),
            (dict(initial_state=FakeTensor((2, 256, 3))), "fla's [N, D, W] layout"),
            (dict(cu_seqlens=FakeTensor((3,), "torch.int32")), "cu_seqlens needs x of batch 1"),
            (dict(x=FakeTensor((1, 64, 256)), cu_seqlens=FakeTensor((3,), "torch.float32")),
             "int32 or int64"),
            (dict(cp_context=object()), "context parallel"),
            (dict(weight=None), "weight is None"),
            (dict(new_flag=1), "unknown keyword argument `new_flag`"),
            (dict(x=FakeTensor((2, 64, 256), ptr=0x10004)), "16-byte alignment"),
            (dict(x=FakeTensor((2, 64, 256), stride=(64 * 260, 260, 1))), "multiples of 8"),
            (dict(x=FakeTensor((2, 256))), "expected [B, T, D]"),
        ]
        for over, reason in cases:
            ok, why = call(**over)
            self.assertFalse(ok, over)
            self.assertIn(reason, why, over)

    def test_derived_fla_arguments_do_not_block(self):
        self.assertEqual(call(chunk_indices=FakeTensor((4,), "torch.int64")), (True, ""))


class UpdateRouting(unittest.TestCase):
    def test_fla_cache_shapes(self):
        w = FakeTensor((256, 4), "torch.float32")
        for x in (FakeTensor((8, 256)), FakeTensor((1, 8, 256)), FakeTensor((8, 1, 256))):
            self.assertEqual(conv.update_is_supported(x, FakeTensor((8, 256, 4)), weight=w,
                                                      activation="silu"), (True, ""), x.shape)
        cases = [
            (dict(x=FakeTensor((2, 8, 256))), "is not [N, D], [1, N, D] or [N, 1, D]"),
            (dict(cache=FakeTensor((8, 256, 4), "torch.float32")), "cache dtype"),
            (dict(cache=FakeTensor((8, 4, 256))), "cache shape"),
            (dict(residual=FakeTensor((8, 128))), "residual shape"),
            (dict(x=FakeTensor((8, 256), grad=True)), "requires grad"),
        ]
        for over, reason in cases:
            args = dict(x=FakeTensor((8, 256)), cache=FakeTensor((8, 256, 4)), weight=w, activation="silu")
            args.update(over)
            ok, why = conv.update_is_supported(**args)
            self.assertFalse(ok, over)
            self.assertIn(reason, why, over)


class Forwarding(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.family = conv.FAMILY
        self.saved = self.family.fla_function
        self.family._logged.clear()

        def fake_fla(name):
            def fn(*a, **k):
                self.calls.append((name, a, k))
                return "fla-result"
            return fn
        self.family.fla_function = fake_fla

    def tearDown(self):
        self.family.fla_function = self.saved
        self.family._logged.clear()

    def test_unsupported_calls_reach_fla_verbatim_and_log_once(self):
        x = FakeTensor((2, 64, 256), grad=True)
        w = FakeTensor((256, 4), "torch.float32")
        with self.assertLogs("kernrt", logging.INFO) as logs:
            r1 = conv.causal_conv1d(x, w, activation="silu", new_flag=7)
            r2 = conv.causal_conv1d(x, w, activation="silu")
        self.assertEqual((r1, r2), ("fla-result", "fla-result"))
        name, args, kwargs = self.calls[0]
        self.assertEqual(name, "causal_conv1d")
        self.assertIs(args[0], x)
        self.assertIs(kwargs["weight"], w)
        self.assertEqual(kwargs["new_flag"], 7)
        self.assertEqual(kwargs["activation"], "silu")
        self.assertEqual(len(logs.output), 1, logs.output)  # one line per family and outcome
        self.assertIn("forwarding to fla: unknown keyword argument `new_flag`", logs.output[0])

    def test_a_cold_shape_under_capture_is_forwarded(self):
        saved = conv._capturing
        conv._capturing = lambda: True
        try:
            with self.assertLogs("kernrt", logging.INFO) as logs:
                conv.causal_conv1d(FakeTensor((2, 64, 256)), FakeTensor((256, 4), "torch.float32"),
                                   activation="silu")
        finally:
            conv._capturing = saved
        self.assertEqual(self.calls[0][0], "causal_conv1d")
        self.assertIn("a CUDA graph capture of a shape that has not run eagerly yet", logs.output[0])

    def test_a_supported_update_goes_to_fla_when_fla_is_faster(self):
        x, cache = FakeTensor((8, 256)), FakeTensor((8, 256, 4))
        with self.assertLogs("kernrt", logging.INFO) as logs:
            conv.causal_conv1d_update(x, cache, weight=FakeTensor((256, 4), "torch.float32"),
                                      activation="silu")
        self.assertEqual(self.calls[0][0], "causal_conv1d_update")
        self.assertIn("fla's update is faster on the H200", logs.output[0])

    def test_update_is_forwarded_with_fla_signature(self):
        x, cache = FakeTensor((8, 256)), FakeTensor((8, 256, 3))  # a cache one slot short
        conv.causal_conv1d_update(x, cache, weight=FakeTensor((256, 4), "torch.float32"),
                                  activation="silu")
        name, args, kwargs = self.calls[0]
        self.assertEqual(name, "causal_conv1d_update")
        self.assertIs(args[1], cache)
        self.assertEqual(kwargs["activation"], "silu")


class WithoutFla(unittest.TestCase):
    def test_unsupported_call_raises_with_the_reason(self):
        family = _dispatch.Family("test", ("kernrt_no_such_module",))
        with self.assertRaises(NotImplementedError) as cm:
            family.forward("f", "a reason")
        self.assertIn("a reason", str(cm.exception))
        self.assertIn("fla is not installed", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
