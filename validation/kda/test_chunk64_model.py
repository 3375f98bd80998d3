"""CPU test of chunk64_model.py (the 64-token-chunk design study for wgmma): without operand
roundings its algebra (off-diagonal sub-blocks through the boundary before the later block,
the blocked solve, one state step per 64 tokens) equals the float64 token loop (kda_ref.py);
with the "f16" plan (kernels/kda/chunk64.md) it meets the device gate under kernel-fun's harsh
raw gates, fla's init gates and the bounded gate, with GVA, varlen tails (1, 63, 65 tokens)
and an initial state; with fla's bf16 operands it does not.

Gate: as test_chunk_model.py (rel rms <= 2e-3 for o against the bf16-rounded reference and the
final state against the float64 state). K = 128, V = 128, T <= 256 (a few seconds).
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk64_model as m  # noqa: E402
import chunk_model as cm  # noqa: E402
import kda_ref as ref  # noqa: E402
from test_chunk_model import GATE, inputs  # noqa: E402


def run(gates, plan, T=128, H=1, HV=1, lb=None, cu=None, kda=True, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, g, beta, A_log, dt, h0 = inputs(rng, T, H, HV, 128, gates, kda)
    N = 1 if cu is None else len(cu) - 1
    h0 = np.repeat(h0, N, 0)
    opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt, lower_bound=lb)
    o, ht = ref.recurrent(q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, **opts)
    om, hm = m.forward(ref.prepare(q, k, v, g, beta, None, **opts), init=h0, cu=cu,
                       plan=m.PLANS[plan])
    return o, ht, om, hm


class Chunk64Algebra(unittest.TestCase):
    """The "fp32" plan (no operand rounding, every diagonal block by fp32 pairs): what is left is
    fp32 rounding, so a wrong factor or block shows as O(1)."""

    def exact(self, **kw):
        o, ht, om, hm = run(plan="fp32", **kw)
        self.assertLess(ref.rel_rms(om, o), 1e-6)
        self.assertLess(ref.rel_rms(hm, ht), 1e-6)

    def test_harsh_gate_no_overflow(self):
        # tens of nats per token: 64-token decays far below fp32's range, all factors <= 1
        self.exact(gates="harsh", T=192)

    def test_varlen_tails(self):
        self.exact(gates="harsh", T=200, cu=[0, 1, 64, 135, 200], seed=3)

    def test_init_gate_gva(self):
        self.exact(gates="init", T=192, H=1, HV=2, seed=1)

    def test_gdn(self):
        self.exact(gates="init", T=128, H=2, HV=2, kda=False, seed=4)


class Chunk64PlanMeetsGate(unittest.TestCase):
    def errors(self, plan="f16", **kw):
        o, ht, om, hm = run(plan=plan, **kw)
        return ref.rel_rms(cm.bf16(om), cm.bf16(o.astype(np.float32))), ref.rel_rms(hm, ht)

    def check(self, **kw):
        eo, eh = self.errors(**kw)
        self.assertLess(eo, GATE, f"o {kw}")
        self.assertLess(eh, GATE, f"state {kw}")

    def test_harsh_raw_gate(self):
        self.check(gates="harsh", T=256)

    def test_fla_init_gate_gva(self):
        self.check(gates="init", T=256, H=1, HV=2, seed=1)

    def test_lower_bound_gate(self):
        self.check(gates="init", T=256, lb=-5.0, seed=2)

    def test_varlen_tails(self):
        self.check(gates="init", T=200, cu=[0, 1, 64, 135, 200], seed=3)

    def test_gdn(self):
        self.check(gates="harsh", T=128, H=2, HV=2, kda=False, seed=4)

    def test_bf16_operands_miss_the_gate(self):
        # fla's operand precision with 64-token chunks (the notes' table: 4-6e-3 on o)
        eo, _ = self.errors(plan="bf16", gates="init", T=256, seed=1)
        self.assertGreater(eo, GATE)


class Tf32RoundToEven(unittest.TestCase):
    """chunk_model.tf32_rn (prep v4's cvt.rn.tf32.f32) against an integer definition, and where it
    differs from the ties-away tf32."""

    def test_against_definition(self):
        rng = np.random.default_rng(3)
        u = rng.integers(0, 0x7f000000, 20000, dtype=np.uint64).astype(np.uint32)
        ties = (rng.integers(0, 0x3f800, 2000, dtype=np.uint64).astype(np.uint32) << 13) | 0x1000
        u = np.concatenate([u, ties, ties ^ 0x80000000]).astype(np.uint32)
        x = u.view(np.float32)
        low, top = u & 0x1fff, (u >> 13).astype(np.uint64)
        up = (low > 0x1000) | ((low == 0x1000) & (top & 1 == 1))
        want = ((top + up) << 13).astype(np.uint32).view(np.float32)
        np.testing.assert_array_equal(cm.tf32_rn(x), want)
        tie = low == 0x1000
        np.testing.assert_array_equal(cm.tf32_rn(x)[~tie], cm.tf32(x)[~tie])
        # at a tie with an even top part ties away rounds up, to even stays
        even = tie & (top & 1 == 0)
        self.assertTrue(even.any())
        self.assertTrue(np.all(np.abs(cm.tf32_rn(x)[even]) < np.abs(cm.tf32(x)[even])))

    def test_prep4_plan_changes_only_the_diagonal_rounding(self):
        self.assertEqual({k: v for k, v in m.PREP4.items() if k != "diag"}, m.PLANS["f16"])
        self.assertEqual(m.PREP4["diag"], "tf32rn")


class Prep4TokenCode(unittest.TestCase):
    """chunk64_model.tokens64 (prep v4's token code in fp32) against kda_ref.prepare's float64
    definition, and the model on its tokens against the float64 loop (check_chunk64.py's prep4
    cases)."""

    def test_token_code_matches_float64(self):
        for gates in ("init", "harsh"):
            rng = np.random.default_rng(5)
            q, k, v, g, beta, A_log, dt, _ = inputs(rng, 96, 1, 2, 128, gates)
            xp = ref.prepare(q, k, v, g, beta, None, l2norm_qk=True, gate_in_kernel=True,
                             A_log=A_log, dt_bias=dt)
            qh, kh, al, bt = m.tokens64(q, k, g, beta, A_log, dt)
            self.assertEqual((qh.shape, al.dtype), (xp[1].shape, np.float32))
            # fp32 roundings of one product and one rsqrt: a few ulps
            self.assertLess(np.max(np.abs(qh - xp[1]) / np.abs(xp[1])), 5e-7, gates)
            self.assertLess(np.max(np.abs(kh - xp[2]) / np.abs(xp[2])), 5e-7, gates)
            # alpha: 1 + 2^xl in fp32 loses the low bits of a small softplus (|log alpha| small
            # then, so alpha's relative error stays ~1e-6); where alpha is in fp32's normal range
            a64 = np.exp(xp[4])
            n = a64 >= 1e-30
            self.assertLess(np.max(np.abs(al[n] - a64[n]) / a64[n]), 2e-5, gates)
            np.testing.assert_array_equal(bt, np.asarray(beta, np.float32))

    def test_bounded_gate_and_beta_logits_match_float64(self):
        for gates in ("init", "harsh"):
            rng = np.random.default_rng(6)
            q, k, v, g, _, A_log, dt, _ = inputs(rng, 96, 1, 2, 128, gates)
            logits = cm.bf16(2 * rng.standard_normal((1, 96, 2)))
            opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt,
                        lower_bound=-5.0, beta_sigmoid=True)
            xp = ref.prepare(q, k, v, g, logits, None, **opts)
            _, _, al, bt = m.tokens64(q, k, g, logits, A_log, dt, lower_bound=-5.0, beta_sigmoid=True)
            a64 = np.exp(xp[4])  # in [e^-5, 1): no underflow
            self.assertGreaterEqual(a64.min(), np.exp(-5.0) * (1 - 1e-12))
            # z = A (g + dt_bias) log2 e reaches ~1e2 (A <= 16): its fp32 rounding (~1e-5 absolute)
            # through lb sigmoid' (<= 5 / 4) is alpha's relative error, as the softplus bound above
            self.assertLess(np.max(np.abs(al - a64) / a64), 2e-5, gates)
            self.assertLess(np.max(np.abs(bt - xp[5]) / xp[5]), 1e-6, gates)
            # the forms are not confused: softplus / direct beta give other values
            _, _, al0, bt0 = m.tokens64(q, k, g, logits, A_log, dt)
            self.assertGreater(np.max(np.abs(al0 - a64)), 0.1)
            self.assertGreater(np.max(np.abs(bt0 - xp[5])), 0.1)

    def test_prep4_cases_meet_gate(self):
        import check_chunk64 as chk
        for gates, lb, sig in (("init", None, False), ("harsh", None, False), ("init", -5.0, True)):
            raw, s, h0, o, ht = chk.raw_case(gates, 128, B=1, T=130, lb=lb, beta_sigmoid=sig)
            self.assertEqual(raw["dt_bias"].shape, (2, 128))
            T, HV = o.shape[1], o.shape[2]
            om = s["o"].transpose(0, 2, 3, 1, 4).reshape(1, -1, HV, 128)[:, :T]
            self.assertLess(ref.rel_rms(cm.bf16(om), cm.bf16(o.astype(np.float32))), GATE, (gates, lb))
            self.assertLess(ref.rel_rms(s["xt"], ht), GATE, (gates, lb))


class GdnScalarPrep(unittest.TestCase):
    """The GDN prep's model (chunk64_model.tokens_gdn, prep64_gdn: one log2 prefix per chunk,
    E = 2^(G_i - G_j), Gram matrices masked by it): unrounded it is the float64 loop; under the
    "f16" plan it meets the gate at check_chunk64's GDN cases (B 2, T 200: a padded tail, HV 2
    over H 1); it agrees with the KDA path fed the gate broadcast over K (products of alphas)."""

    def errs(self, gates, plan="f16", **kw):
        raw, s, h0, o, ht = m.gdn_case(gates, plan=m.PLANS[plan], **kw)
        om = m.tokens_of(s["o"], o.shape[1])
        return (ref.rel_rms(om, o), ref.rel_rms(cm.bf16(om), cm.bf16(o.astype(np.float32))),
                ref.rel_rms(s["xt"], ht))

    def test_unrounded_is_the_loop(self):
        for gates in ("init", "harsh"):
            eo, _, eh = self.errs(gates, "fp32")
            self.assertLess(eo, 1e-6, gates)
            self.assertLess(eh, 1e-6, gates)

    def test_f16_plan_meets_gate(self):
        for gates, kw in (("init", {}), ("harsh", {}), ("init", {"beta_sigmoid": True}),
                          ("harsh", {"g_shift": 88.0})):  # g + dt_bias > 88 somewhere: the clamp
            _, eo, eh = self.errs(gates, **kw)
            self.assertLess(eo, GATE, (gates, kw))
            self.assertLess(eh, GATE, (gates, kw))

    def test_split_decay_meets_gate_as_the_folded_one(self):
        # the shipped GDN path (362fa29): k^, q^ without the decay, a_t / b_t applied in fp32 by
        # the state step, vn Diag(b) rounded with vn's scale; unrounded it is the loop, rounded
        # within 5 % of the former folded operands' errors (the device checks: 1.20-1.37e-3)
        for gates in ("init", "harsh"):
            eo, _, eh = self.errs(gates, "fp32", split=True)
            self.assertLess(eo, 1e-6, gates)
            self.assertLess(eh, 1e-6, gates)
        for gates, kw in (("init", {}), ("harsh", {}), ("init", {"beta_sigmoid": True}),
                          ("harsh", {"g_shift": 88.0})):
            _, eo, eh = self.errs(gates, split=True, **kw)
            _, fo, fh = self.errs(gates, **kw)
            self.assertLess(eo, GATE, (gates, kw))
            self.assertLess(eh, GATE, (gates, kw))
            self.assertLess(eo, 1.05 * fo, (gates, kw, eo, fo))
            self.assertLess(eh, 1.05 * fh, (gates, kw, eh, fh))

    def test_saturating_gate_is_clamped_finite(self):
        raw, s, _, _, _ = m.gdn_case("harsh", g_shift=88.0)
        self.assertGreater(float(np.max(raw["g"] + raw["dt_bias"])), 88.8)  # 2^z overflows fp32 there
        for name in ("kq", "kbt", "tmb", "aqk", "gamma", "o", "xt"):
            self.assertTrue(np.isfinite(s[name]).all(), name)

    def test_matches_kda_path_with_broadcast_gate(self):
        # the KDA path (prep64, kda=False) on alpha = 2^lg broadcast over K: the same operands up
        # to fp32 rounding of the decays (products of alphas there, exp2 of prefix differences here)
        raw, s, h0, _, _ = m.gdn_case("harsh")
        qh, kh, lg, bt = m.tokens_gdn(raw["q"], raw["k"], raw["g"], raw["beta"], raw["a_log"], raw["dt_bias"])
        T = lg.shape[1]
        xp = (None, qh, kh, np.zeros(s["v"].shape[:1] + (T,) + s["v"].shape[1:2] + (128,)), np.log(np.exp2(lg.astype(np.float64)))[..., None], bt)
        # v is only read for the state steps: take the GDN dict's padded values back
        B, HV, NC = s["v"].shape[:3]
        xp = xp[:3] + (s["v"].transpose(0, 2, 3, 1, 4).reshape(B, NC * m.C, HV, -1)[:, :T],) + xp[4:]
        k2 = m.state_inputs(xp, h0, plan=m.F16)
        for name in ("kq", "kbt", "tmb", "aqk", "gamma"):
            self.assertLess(ref.rel_rms(k2[name], s[name]), 1e-3, name)
        self.assertLess(ref.rel_rms(k2["o"], s["o"]), 2e-4)
        self.assertLess(ref.rel_rms(k2["xt"], s["xt"]), 2e-4)


if __name__ == "__main__":
    unittest.main()
