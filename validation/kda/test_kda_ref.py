"""CPU tests of kda_ref.py (numpy, float64): the token loop against an independent chunked
formulation (kda-conv.md section 2, written here from the algebra, not from kda_ref), a hand
computation, state continuity, layouts and the gate/beta options.

Owns: the only numerics that can be checked without a device. Small sizes (K 8, V 6, chunk
16) so the whole file runs in about a second. Does not run any kernel.
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kda_ref as ref  # noqa: E402


def chunked(q, k, v, g, beta, C, init=None, cu=None):
    """Chunked WY form per sequence and head, on already prepared inputs (q scaled and
    normalized, g log decay [B,T,HV,K|1], beta effective); state [N,HV,K,V]."""
    B, T, HV, K = k.shape
    V = v.shape[3]
    segs = [(b, 0, T) for b in range(B)] if cu is None else [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]
    o = np.zeros((B, T, HV, V))
    finals = np.zeros((len(segs), HV, K, V))
    for n, (b, s0, s1) in enumerate(segs):
        for h in range(HV):
            S = np.zeros((K, V)) if init is None else init[n, h].copy()
            for c0 in range(s0, s1, C):
                c1 = min(c0 + C, s1)
                qc, kc, vc = q[b, c0:c1, h], k[b, c0:c1, h], v[b, c0:c1, h]
                gc = np.broadcast_to(g[b, c0:c1, h], (c1 - c0, K))
                bc = beta[b, c0:c1, h]
                G = np.cumsum(gc, 0)
                n_ = c1 - c0
                diff = G[:, None, :] - G[None, :, :]          # [i, j, c]
                low = np.tril(np.ones((n_, n_)), -1)[..., None] > 0
                lowd = np.tril(np.ones((n_, n_)), 0)[..., None] > 0
                E = np.exp(np.where(low, diff, -np.inf))
                Ed = np.exp(np.where(lowd, diff, -np.inf))
                L = bc[:, None] * np.einsum("ic,jc,ijc->ij", kc, kc, E)
                Tm = np.linalg.inv(np.eye(n_) + L)
                w = Tm @ (bc[:, None] * kc * np.exp(G))
                u = Tm @ (bc[:, None] * vc)
                vnew = u - w @ S
                Aqk = np.einsum("ic,jc,ijc->ij", qc, kc, Ed)
                o[b, c0:c1, h] = (qc * np.exp(G)) @ S + Aqk @ vnew
                S = np.exp(G[-1])[:, None] * S + (kc * np.exp(G[-1] - G)).T @ vnew
            finals[n, h] = S
    return o, finals


def harsh_inputs(rng, B, T, H, HV, K, V, kda=True):
    """kernel-fun's raw gate (g ~ randn, dt_bias 0.5 randn, A_log = log U(1,16)), beta in
    (0, 2), q/k unnormalized (the l2norm option normalizes them)."""
    q = rng.standard_normal((B, T, H, K))
    k = rng.standard_normal((B, T, H, K))
    v = rng.standard_normal((B, T, HV, V))
    g = rng.standard_normal((B, T, HV, K) if kda else (B, T, HV))
    beta = 2 / (1 + np.exp(-rng.standard_normal((B, T, HV))))
    A_log = np.log(rng.uniform(1, 16, HV))
    dt_bias = 0.5 * rng.standard_normal(HV * K if kda else HV)
    return q, k, v, g, beta, A_log, dt_bias


class RecurrenceMatchesChunked(unittest.TestCase):
    def check(self, kda, H, HV, cu=None, T=48, init=True, lower_bound=None, C=16):
        rng = np.random.default_rng(1 + HV + (cu is not None) + kda)
        K, V = 8, 6
        B = 1 if cu is not None else 2
        T = cu[-1] if cu is not None else T
        q, k, v, g, beta, A_log, dt_bias = harsh_inputs(rng, B, T, H, HV, K, V, kda)
        N = len(cu) - 1 if cu is not None else B
        h0 = rng.standard_normal((N, HV, V, K)) if init else None
        opts = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
                    lower_bound=lower_bound)
        o, ht = ref.recurrent(q, k, v, g, beta, scale=0.3, initial_state=h0, cu_seqlens=cu, **opts)
        _, qf, kf, vf, gl, bf = ref.prepare(q, k, v, g, beta, 0.3, **opts)
        init_kv = None if h0 is None else np.swapaxes(h0, -1, -2)
        oc, hc = chunked(qf, kf, vf, gl, bf, C, init_kv, cu)
        self.assertLess(ref.rel_rms(o, oc), 1e-12)
        self.assertLess(ref.rel_rms(ht, np.swapaxes(hc, -1, -2)), 1e-12)
        self.assertTrue(np.all(np.isfinite(o)))
        return o, ht

    def test_kda_dense_with_state(self):
        self.check(kda=True, H=2, HV=2, T=53)

    def test_kda_gva_varlen_short_sequences(self):
        # 1-token and 15/17-token sequences around the chunk of 16, an empty-free varlen batch
        self.check(kda=True, H=1, HV=2, cu=[0, 1, 16, 33, 34, 60])

    def test_gdn_dense_and_varlen(self):
        self.check(kda=False, H=2, HV=4, T=40)
        self.check(kda=False, H=2, HV=2, cu=[0, 17, 18, 50], init=False)

    def test_lower_bound_gate(self):
        self.check(kda=True, H=2, HV=2, T=37, lower_bound=-5.0)


class HandComputed(unittest.TestCase):
    def test_one_channel_two_tokens(self):
        # K = V = 1, no options: S1 = a1*s0 + b1*k1*(v1 - a1*s0*k1), o1 = S1*q1*scale, ...
        s0, q = 0.5, [[[[2.0]]], [[[-1.0]]]]
        q = np.array([[[[2.0]], [[-1.0]]]])       # [B=1, T=2, H=1, K=1]
        k = np.array([[[[1.5]], [[0.5]]]])
        v = np.array([[[[3.0]], [[-2.0]]]])
        g = np.array([[[[-0.1]], [[-0.7]]]])      # [B, T, HV, K]
        beta = np.array([[[0.8], [1.6]]])
        o, ht = ref.recurrent(q, k, v, g, beta, scale=1.0, initial_state=np.full((1, 1, 1, 1), s0))
        S = s0
        want = []
        for t in range(2):
            S = np.exp(g[0, t, 0, 0]) * S
            S = S + beta[0, t, 0] * k[0, t, 0, 0] * (v[0, t, 0, 0] - S * k[0, t, 0, 0])
            want.append(S * q[0, t, 0, 0])
        np.testing.assert_allclose(o[0, :, 0, 0], want, rtol=1e-15)
        np.testing.assert_allclose(ht[0, 0, 0, 0], S, rtol=1e-15)


class Options(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(5)
        self.x = harsh_inputs(rng, 1, 30, 2, 4, 8, 6)
        self.h0 = rng.standard_normal((1, 4, 6, 8))

    def run_ref(self, **kw):
        q, k, v, g, beta, A_log, dt_bias = self.x
        base = dict(l2norm_qk=True, gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
        base.update(kw)
        return ref.recurrent(q, k, v, g, beta, **base)

    def test_state_continuity(self):
        q, k, v, g, beta, A_log, dt_bias = self.x
        o, ht = self.run_ref(initial_state=self.h0)
        cut = 13
        o1, h1 = ref.recurrent(q[:, :cut], k[:, :cut], v[:, :cut], g[:, :cut], beta[:, :cut],
                               initial_state=self.h0, l2norm_qk=True, gate_in_kernel=True,
                               A_log=A_log, dt_bias=dt_bias)
        o2, h2 = ref.recurrent(q[:, cut:], k[:, cut:], v[:, cut:], g[:, cut:], beta[:, cut:],
                               initial_state=h1, l2norm_qk=True, gate_in_kernel=True,
                               A_log=A_log, dt_bias=dt_bias)
        self.assertLess(ref.rel_rms(np.concatenate([o1, o2], 1), o), 1e-14)
        self.assertLess(ref.rel_rms(h2, ht), 1e-14)

    def test_state_layouts_are_transposes(self):
        o_vk, h_vk = self.run_ref(initial_state=self.h0)
        o_kv, h_kv = self.run_ref(initial_state=np.swapaxes(self.h0, -1, -2), state_layout="kv")
        np.testing.assert_array_equal(o_vk, o_kv)
        np.testing.assert_array_equal(np.swapaxes(h_vk, -1, -2), h_kv)

    def test_gate_forms(self):
        q, k, v, g, beta, A_log, dt_bias = self.x
        xp = ref._Xp(g)
        a = np.exp(A_log)[:, None]
        x = g + dt_bias.reshape(4, 8)
        np.testing.assert_allclose(ref.gate(xp, g, A_log, dt_bias), -a * np.log1p(np.exp(x)),
                                   rtol=1e-13)
        lb = ref.gate(xp, g, A_log, dt_bias, lower_bound=-5.0)
        np.testing.assert_allclose(lb, -5.0 / (1 + np.exp(-a * x)), rtol=1e-13)
        self.assertTrue(np.all(lb >= -5.0) and np.all(lb < 0))

    def test_beta_sigmoid_and_neg_eigval(self):
        xp = ref._Xp(np.zeros(1))
        b = np.array([-1.0, 0.0, 2.0])
        np.testing.assert_allclose(ref.beta_eff(xp, b, True), 1 / (1 + np.exp(-b)))
        np.testing.assert_allclose(ref.beta_eff(xp, b, True, True), 2 / (1 + np.exp(-b)))
        np.testing.assert_array_equal(ref.beta_eff(xp, b), b)

    def test_l2norm_eps_inside_sqrt(self):
        xp = ref._Xp(np.zeros(1))
        x = np.array([[3e-4, 4e-4]])
        np.testing.assert_allclose(ref.l2norm(xp, x), x / np.sqrt(25e-8 + 1e-6))

    def test_gva_maps_consecutive_value_heads(self):
        # HV = 4 over H = 2: value heads 0, 1 read q/k head 0 and heads 2, 3 read head 1
        q, k, v, g, beta, A_log, dt_bias = self.x
        _, qf, kf, _, _, _ = ref.prepare(q, k, v, g, beta, l2norm_qk=True)
        np.testing.assert_array_equal(kf[:, :, 1], kf[:, :, 0])
        np.testing.assert_array_equal(kf[:, :, 3], kf[:, :, 2])
        self.assertFalse(np.array_equal(kf[:, :, 1], kf[:, :, 2]))

    def test_rejects_heads_not_dividing(self):
        q, k, v, g, beta, _, _ = self.x
        with self.assertRaisesRegex(ValueError, "HV = 3 is not a multiple of H = 2"):
            ref.recurrent(q, k, v[:, :, :3], g[:, :, :3], beta[:, :, :3])


if __name__ == "__main__":
    unittest.main()
