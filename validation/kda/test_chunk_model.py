"""CPU test of chunk_model.py: the chunked kernel's algorithm with its roundings (f16 operands,
scaled state, fp32 pairwise intra-chunk terms, cumulative decay products) meets the device gate
against the float64 token loop (kda_ref.py) under kernel-fun's harsh raw gates, fla's init
gates and the bounded gate, with GVA, varlen tails and an initial state.

Gate (the same as validation/kda/run.py): rel rms of o against the reference rounded to bf16
<= 2e-3, of the final state against the float64 state <= 2e-3. Also checks the model's
scaled f16 helpers. K = 128 (the kernels' only K), small T (a few seconds in all).
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk_model as cm  # noqa: E402
import kda_ref as ref  # noqa: E402

GATE = 2e-3


def inputs(rng, T, H, HV, V, gates, kda=True):
    K = 128
    q = cm.bf16(rng.standard_normal((1, T, H, K)))
    k = cm.bf16(rng.standard_normal((1, T, H, K)))
    v = cm.bf16(rng.standard_normal((1, T, HV, V)))
    g = cm.bf16(rng.standard_normal((1, T, HV, K) if kda else (1, T, HV)))
    beta = (2 / (1 + np.exp(-rng.standard_normal((1, T, HV))))).astype(np.float32)
    A_log = np.log(rng.uniform(1, 16, HV))
    width = HV * K if kda else HV
    if gates == "harsh":   # kernel-fun: raw g ~ randn, dt_bias ~ 0.5 randn
        dt = 0.5 * rng.standard_normal(width)
    else:                  # fla's init: dt log-uniform in [1e-3, 0.1], dt_bias = softplus^-1(dt)
        d = np.exp(rng.uniform(np.log(1e-3), np.log(0.1), width))
        dt = d + np.log(-np.expm1(-d))
    h0 = rng.standard_normal((1, HV, V, K)).astype(np.float32)
    return q, k, v, g, beta, A_log, dt, h0


class ChunkModelMeetsGate(unittest.TestCase):
    def check(self, gates, T=64, H=1, HV=1, V=128, lb=None, cu=None, kda=True, seed=0):
        rng = np.random.default_rng(seed)
        q, k, v, g, beta, A_log, dt, h0 = inputs(rng, T, H, HV, V, gates, kda)
        N = 1 if cu is None else len(cu) - 1
        h0 = np.repeat(h0, N, 0)
        opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=lb)
        o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, **opts)
        om, hm = cm.forward(ref.prepare(q, k, v, g, beta, None, **opts), init=h0, cu=cu)
        eo = ref.rel_rms(cm.bf16(om), cm.bf16(o.astype(np.float32)))
        eh = ref.rel_rms(hm, ht)
        self.assertLess(eo, GATE, f"o {gates} lb={lb}")
        self.assertLess(eh, GATE, f"state {gates} lb={lb}")
        return eo, eh

    def paths(self, **kw):
        before = dict(cm.PATHS)
        self.check(**kw)
        return {k: cm.PATHS[k] - before[k] for k in before}

    def test_harsh_raw_gate(self):
        # tens of nats per token: the factors leave fp32's range, every chunk goes pair by pair
        self.assertEqual(self.paths(gates="harsh")["tf32"], 0)

    def test_fla_init_gate_gva(self):
        # moderate decays: the tensor-core path
        self.assertEqual(self.paths(gates="init", H=1, HV=2, seed=1)["pairs"], 0)

    def test_lower_bound_gate(self):
        self.check("init", lb=-5.0, seed=2)

    def test_varlen_tails(self):
        # 1-, 15-, 17- and 31-token sequences: every tail length class of a 16-token chunk
        self.check("harsh", cu=[0, 1, 16, 33, 64], seed=3)

    def test_gdn(self):
        self.check("harsh", HV=2, H=2, V=128, kda=False, seed=4)


class ScaledF16(unittest.TestCase):
    def test_scale_maps_max_near_2_14(self):
        for m in (1e-30, 3e-3, 1.0, 7e4, 1e30):
            s = cm.scale_of(np.array([m, -m / 3]))
            self.assertTrue(2 ** 14 <= m * s < 2 ** 15, m)

    def test_f16_rows_keeps_relative_precision_at_any_magnitude(self):
        x = np.array([[1e-20, -3e-21], [5e25, -1e24]], np.float32)
        y = cm.f16_rows(x, rows=1)
        np.testing.assert_allclose(y, x, rtol=2 ** -11)


if __name__ == "__main__":
    unittest.main()
