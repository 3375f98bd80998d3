"""kernrt.ops conv drop-ins on a GPU: supported calls run kernrt's kernels and match a float64
reference (and fla, when installed, within 1.25x its own error), a call captured in
torch.cuda.graph replays bit-identically to eager and reads the current inputs. Skips without torch and a device. Error = rms(out - round(ref)) / rms(ref), with
round() to x's dtype: the best answer the output dtype can hold (validation/conv's metric)."""
import logging
import unittest

import _env  # noqa: F401  (sys.path)
import kernrt

try:
    import torch
    HAVE = torch.cuda.is_available() and kernrt.device_available()
except ImportError:
    HAVE = False

GATE = 1e-3


def reference(x, weight, bias, activation):
    x64, w64 = x.double(), weight.double()
    B, T, D = x.shape
    W = w64.shape[1]
    pad = torch.nn.functional.pad(x64, (0, 0, W - 1, 0))
    y = sum(pad[:, w:w + T, :] * w64[:, w] for w in range(W))
    if bias is not None:
        y = y + bias.double()
    if activation in ("silu", "swish"):
        y = y * torch.sigmoid(y)
    return y


def error(out, ref, dtype):
    r = ref.to(dtype).double()
    return ((out.double() - r).norm() / ref.norm()).item()


@unittest.skipUnless(HAVE, "needs torch and a CUDA device")
class GpuOpsConv(unittest.TestCase):
    def setUp(self):
        from kernrt import ops
        from kernrt.ops import conv
        conv.FAMILY._logged.clear()  # each test sees the family's first log line again
        conv.UPDATE_PREFERS_FLA = False  # exercise kernrt's update kernel
        self.ops = ops
        ok, why = ops.conv_is_supported(torch.empty(1, 8, 64, device="cuda", dtype=torch.bfloat16),
                                        torch.empty(64, 4, device="cuda"), activation="silu")
        if not ok:
            self.skipTest(f"conv drop-in unsupported here: {why}")
        try:
            from fla.modules.convolution import causal_conv1d as fla_conv
        except ImportError:
            try:
                from fla.modules.causal_conv1d import causal_conv1d as fla_conv
            except ImportError:
                fla_conv = None
        self.fla = fla_conv

    def case(self, B, T, D, W, dtype, wdtype, bias, activation, x_row=None):
        g = torch.Generator(device="cuda").manual_seed(B * 1000 + T + D + W)
        row = x_row or D
        base = torch.randn(B, T, row, device="cuda", generator=g).to(dtype)
        x = base[..., :D]
        weight = (torch.rand(D, W, device="cuda", generator=g) * 2 - 1).div(W ** 0.5).to(wdtype)
        b = (torch.randn(D, device="cuda", generator=g) * 0.5).to(wdtype) if bias else None
        return x, weight, b, activation

    def test_supported_calls_match_the_reference_and_fla(self):
        cases = [(2, 100, 256, 4, torch.bfloat16, torch.float32, False, "silu", None),
                 (2, 333, 1536, 4, torch.bfloat16, torch.float32, True, "silu", 3 * 1536),
                 (1, 1000, 1024, 3, torch.float16, torch.bfloat16, True, None, None),
                 (3, 64, 512, 2, torch.bfloat16, torch.bfloat16, False, "swish", None)]
        with self.assertLogs("kernrt", logging.INFO) as logs:
            for B, T, D, W, dt, wdt, bias, act, row in cases:
                x, w, b, _ = self.case(B, T, D, W, dt, wdt, bias, act, row)
                y, state = self.ops.causal_conv1d(x, w, bias=b, activation=act)
                self.assertIsNone(state)
                self.assertEqual((y.shape, y.dtype), (x.shape, x.dtype))
                ref = reference(x, w, b, act)
                err = error(y, ref, dt)
                msg = f"B{B} T{T} D{D} W{W} {dt} bias={bias} {act}: error {err:.2e}"
                self.assertLess(err, GATE, msg)
                if self.fla is not None:
                    fy, _ = self.fla(x, w, bias=b, activation=act)
                    self.assertLessEqual(err, 1.25 * error(fy, ref, dt) + 1e-6, msg + " (vs fla)")
        self.assertTrue(any("running kernrt's kernels" in line for line in logs.output), logs.output)

    def test_states_residual_and_varlen_match_fla(self):
        if self.fla is None:
            self.skipTest("fla is not installed")
        x, w, b, act = self.case(2, 200, 512, 4, torch.bfloat16, torch.float32, True, "silu")
        h0 = torch.randn(2, 512, 4, device="cuda").to(torch.bfloat16)
        res = torch.randn(2, 200, 512, device="cuda").to(torch.bfloat16)
        y, hT = self.ops.causal_conv1d(x, w, bias=b, residual=res, initial_state=h0,
                                       output_final_state=True, activation=act)
        fy, fhT = self.fla(x, w, bias=b, residual=res, initial_state=h0, output_final_state=True,
                           activation=act)
        self.assertLess(error(y, fy.double(), torch.bfloat16), GATE)
        self.assertTrue(torch.equal(hT, fhT), "final states are copies of inputs: exact")
        xv = torch.randn(1, 300, 512, device="cuda").to(torch.bfloat16)
        cu = torch.tensor([0, 1, 63, 300], device="cuda", dtype=torch.int64)
        y, hT = self.ops.causal_conv1d(xv, w, activation=act, cu_seqlens=cu, output_final_state=True)
        fy, fhT = self.fla(xv, w, activation=act, cu_seqlens=cu, output_final_state=True)
        self.assertLess(error(y, fy.double(), torch.bfloat16), GATE)
        self.assertTrue(torch.equal(hT, fhT))

    def test_update_over_fla_cache_matches_reference_and_fla(self):
        # the errors are a few bf16 rounding flips against the rounded reference (~1.6e-5): at
        # 64 x 1024 outputs (~30 flips) ours / fla's ratio varied by ~20 % between random draws
        # and crossed the 1.25x gate once (1.72e-5 against 1.59e-5 on the H200); 1M seeded
        # outputs make the comparison a measurement, with the gate unchanged
        N, D, W = 256, 4096, 4
        gen = torch.Generator(device="cuda").manual_seed(N + D + W)
        x = torch.randn(N, D, device="cuda", generator=gen).to(torch.bfloat16)
        w = ((torch.rand(D, W, device="cuda", generator=gen) * 2 - 1) / 2).float()
        cache = torch.randn(N, D, W, device="cuda", generator=gen).to(torch.bfloat16)
        want_cache = torch.cat([cache[..., 1:], x[..., None]], dim=-1)
        ref = (want_cache.double() * w.double()).sum(-1)
        ref = ref * torch.sigmoid(ref)
        mine = cache.clone()
        y, out = self.ops.causal_conv1d_update(x, mine, weight=w, activation="silu")
        self.assertIs(out, mine)
        self.assertEqual(y.shape, x.shape)
        self.assertTrue(torch.equal(mine, want_cache), "the cache is the old one slid by x: exact")
        self.assertLess(error(y, ref, torch.bfloat16), GATE)
        if self.fla is not None:
            try:
                from fla.modules.convolution import causal_conv1d_update as fla_update
            except ImportError:
                from fla.modules.causal_conv1d import causal_conv1d_update as fla_update
            theirs = cache.clone()
            fy, _ = fla_update(x, theirs, weight=w, activation="silu")
            self.assertTrue(torch.equal(theirs, mine))
            self.assertLessEqual(error(y, ref, torch.bfloat16),
                                 1.25 * error(fy, ref, torch.bfloat16) + 1e-6)

    def test_graph_capture_replays_bit_identically(self):
        x, w, b, act = self.case(4, 512, 2048, 4, torch.bfloat16, torch.float32, False, "silu")
        eager, _ = self.ops.causal_conv1d(x, w, activation=act)  # warms the shape
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            captured, _ = self.ops.causal_conv1d(x, w, activation=act)
        captured.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(captured.view(torch.int16), eager.view(torch.int16)))
        x.copy_(torch.randn_like(x))  # replays read the current x
        g.replay()
        eager2, _ = self.ops.causal_conv1d(x, w, activation=act)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(captured.view(torch.int16), eager2.view(torch.int16)))


if __name__ == "__main__":
    unittest.main()
