"""kernrt.ops.kda routing on any machine: which chunk_kda / fused_recurrent_kda calls kernrt
runs and which it forwards to fla, with the reason. Fake tensors (test_ops_routing's) stand in
for torch's: no torch, no GPU, no library call (only the verdict is computed)."""
import unittest

import _env  # noqa: F401  (sys.path)
from kernrt.ops import kda
from test_ops_routing import FakeTensor

B, T, H, HV, K, V = 2, 64, 4, 8, 128, 128


def fake(shape, dtype="torch.bfloat16", **kw):
    return FakeTensor(shape, dtype, **kw)


def base(**over):
    a = dict(q=fake((B, T, H, K)), k=fake((B, T, H, K)), v=fake((B, T, HV, V)),
             g=fake((B, T, HV, K), "torch.float32"), beta=fake((B, T, HV), "torch.float32"),
             use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
             A_log=fake((HV,), "torch.float32"), dt_bias=fake((HV * K,), "torch.float32"))
    a.update(over)
    return a


def spec_of(**a):
    """The manifest key _spec computes for a chunk_kda call (fla's keyword names)."""
    spec, why = kda._spec(a["q"], a["k"], a["v"], a["g"], a["beta"], a.get("A_log"), a.get("dt_bias"),
                          None, None, False, a.get("use_qk_l2norm_in_kernel", False),
                          a.get("use_gate_in_kernel", False), False, False, None, False, None, None,
                          {}, step=False)
    assert spec is not None, why
    return spec


class KdaContextParallel(unittest.TestCase):
    """The segments a long sequence gets: kernrt.gen.kda_cp_plan's where the 64-token kernels
    serve (bf16 g), about two blocks an SM of >= 1024-token segments on c16 (f32 g)."""

    def long_call(self, g_dtype):
        L, Hh = 32768, 16
        return base(q=fake((1, L, Hh, K)), k=fake((1, L, Hh, K)), v=fake((1, L, Hh, V)),
                    g=fake((1, L, Hh, K), g_dtype), beta=fake((1, L, Hh), "torch.float32"),
                    A_log=fake((Hh,), "torch.float32"), dt_bias=fake((Hh * K,), "torch.float32"))

    def test_c64_takes_the_plan(self):
        cp, seg = spec_of(**self.long_call("torch.bfloat16"))[18:20]
        self.assertEqual((cp, seg), (9, 4 * 55))

    def test_c16_keeps_its_split(self):
        cp, seg = spec_of(**self.long_call("torch.float32"))[18:20]
        self.assertEqual((cp, seg), (16, 4 * 32))

    def test_full_gpu_runs_one_pass(self):
        self.assertEqual(spec_of(**base())[18:20], (0, 0))


class KdaRouting(unittest.TestCase):
    def test_mainline_calls_are_supported(self):
        self.assertEqual(kda.is_supported(**base()), (True, ""))
        self.assertEqual(kda.is_supported(**base(g=fake((B, T, HV, K)), beta=fake((B, T, HV)))), (True, ""))
        self.assertEqual(kda.is_supported(**base(v=fake((B, T, HV, 256)))), (True, ""))
        self.assertEqual(kda.is_supported(**base(initial_state=fake((B, HV, K, V), "torch.float32"),
                                                 output_final_state=True)), (True, ""))
        self.assertEqual(kda.is_supported(**base(lower_bound=-5.0, use_beta_sigmoid_in_kernel=True,
                                                 allow_neg_eigval=True)), (True, ""))

    def test_every_unsupported_call_says_why(self):
        cases = [
            (dict(q=fake((B, T, H, K), grad=True)), "requires grad"),
            (dict(q=fake((B, T, H, K), capability=(8, 0))), "below sm90"),
            (dict(q=fake((B, T, H, 64)), k=fake((B, T, H, 64)), g=fake((B, T, HV, 64), "torch.float32"),
                  dt_bias=fake((HV * 64,), "torch.float32")), "K = 64 is not supported"),
            (dict(v=fake((B, T, HV, 64))), "V = 64 is not supported"),
            (dict(v=fake((B, T, 6, V)), g=fake((B, T, 6, K), "torch.float32"),
                  beta=fake((B, T, 6), "torch.float32"), A_log=fake((6,), "torch.float32"),
                  dt_bias=fake((6 * K,), "torch.float32")), "HV = 6 is not a multiple of H = 4"),
            (dict(q=fake((B, T, H, K), "torch.float16")), "must be bf16"),
            (dict(beta=fake((B, T, HV, V), "torch.float32")), "head-wise beta"),
            (dict(g=fake((B, T, HV, K), "torch.float16")), "g and beta must be bf16 or f32"),
            (dict(v=fake((B, T, HV, 256)), initial_state=fake((B, HV, 256, K), "torch.float32")),
             "initial_state must be f32 [2, 8, 128, 256]"),
            (dict(A_log=None), "needs A_log"),
            (dict(allow_neg_eigval=True), "needs use_beta_sigmoid_in_kernel"),
            (dict(q=fake((B, T, H, K), ptr=0x10008)), "16-byte aligned"),
            (dict(new_flag=1), "unknown keyword argument `new_flag`"),
        ]
        for over, reason in cases:
            ok, why = kda.is_supported(**base(**over))
            self.assertFalse(ok, reason)
            self.assertIn(reason, why)

    def test_state_v_first_takes_our_layout(self):
        self.assertEqual(kda.is_supported(**base(v=fake((B, T, HV, 256)), state_v_first=True,
                                                 initial_state=fake((B, HV, 256, K), "torch.float32"))),
                         (True, ""))


if __name__ == "__main__":
    unittest.main()
