"""CPU test of the GDN prep's index maps (kernels/kda/kda_chunk64_prep_gdn.cu): a numpy mirror of
- gram_block: for each of the 10 blocks u (u < 4 the diagonal (u, u), else pair u - 4 in prep
  v4's order), the three ldmatrix.x4 lane address maps over the raw rows (q and k rows of block
  I as A, k rows of block J as B), conflict-free per 8-lane phase, ldmatrix simulated from its
  PTX definition, the registers read through the m16n8k16 A / B fragment layouts, the products
  summed over the 8 k-steps, then the epilogue per lane and accumulator element (rows 16 I + g,
  + 8, columns 16 J + 8 nt + 2 qd, + 1: the scales, E = 2^min(G_i - G_j, 0), the diagonal masks)
  into aqk, akd and akh: together they are chunk64_model.prep64_gdn's Aqk and Akk (before the
  f16 rounding) for random raw rows, scales, decays and betas;
- gate_scan: the pair scan's G (G_{2l+1} = the inclusive scan of pair sums, G_{2l} = it minus
  lg_{2l+1}) is the prefix sum, gamma's float4 per lane covers the 128 channels.
(state_rows writes no kbt since the GDN state entry reads k^ transposed; its former pack test
is in git history.)
A second copy of the formulas: a change in the kernel needs the same change here.
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_chunk64_prep_tiles_layout import ldmatrix_x4, ldsm_phases_ok  # noqa: E402

K, SUB, C = 128, 16, 64
RAW_W = K // 2 + 4


def pair_i(p):
    return p + 1 if p < 3 else (p - 1 if p < 5 else 3)


def pair_j(p):
    return p if p < 3 else (p - 3 if p < 5 else 0)


class PrepGdnLayout(unittest.TestCase):
    def test_gram_blocks_are_the_model(self):
        rng = np.random.default_rng(1)
        words = np.array([(t << 8) | p if p < K // 2 else -1 for t in range(C) for p in range(RAW_W)],
                         np.int64)
        qv = rng.integers(-8, 8, (C, K)).astype(np.float64)  # the raw rows behind the words
        kv = rng.integers(-8, 8, (C, K)).astype(np.float64)
        rs = rng.uniform(0.5, 2, (C, 2))                     # (q's scale, k's), per token
        G = np.cumsum(-rng.uniform(0, 0.3, C))               # nonincreasing prefix
        beta = rng.uniform(0, 2, C)
        aqk = np.full((C, C), np.nan)
        akd = np.full((4, SUB, SUB), np.nan)
        akh = np.full((6, SUB, SUB), np.nan)

        def chan(w):
            self.assertGreaterEqual(int(w), 0)  # not a padding word
            return int(w) >> 8, 2 * (int(w) & 0xff)

        for u in range(10):
            diag, p = u < 4, u - 4
            bI, bJ = (u, u) if diag else (pair_i(p), pair_j(p))
            sq, sk = [np.zeros((16, 8)), np.zeros((16, 8))], [np.zeros((16, 8)), np.zeros((16, 8))]
            for ks in range(K // 16):
                ra = [SUB * bI + (l & 7) + 8 * ((l >> 3) & 1) for l in range(32)]
                rb = [SUB * bJ + (l & 7) + 8 * (l >> 4) for l in range(32)]
                addr_a = [ra[l] * RAW_W * 4 + 16 * (l >> 4) + 32 * ks for l in range(32)]
                addr_b = [rb[l] * RAW_W * 4 + 16 * ((l >> 3) & 1) + 32 * ks for l in range(32)]
                self.assertTrue(ldsm_phases_ok(addr_a) and ldsm_phases_ok(addr_b))
                r, rbr = ldmatrix_x4(words, addr_a), ldmatrix_x4(words, addr_b)  # rq / rk: same map
                for vals, acc in ((qv, sq), (kv, sk)):
                    A = np.zeros((16, 16))
                    B = [np.zeros((16, 8)), np.zeros((16, 8))]
                    for lane in range(32):
                        g, q = lane >> 2, lane & 3
                        for reg, (row, kk) in zip(range(4), ((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8),
                                                             (g + 8, 2 * q + 8))):
                            t, c = chan(r[lane, reg])
                            self.assertEqual((t, c), (SUB * bI + row, 16 * ks + kk))
                            A[row, kk], A[row, kk + 1] = vals[t, c], vals[t, c + 1]
                        for nt, (b0, b1) in enumerate(((0, 1), (2, 3))):
                            for reg, kk in ((b0, 2 * q), (b1, 2 * q + 8)):
                                t, c = chan(rbr[lane, reg])
                                self.assertEqual((t, c), (SUB * bJ + 8 * nt + g, 16 * ks + kk))
                                B[nt][kk, g], B[nt][kk + 1, g] = kv[t, c], kv[t, c + 1]
                    acc[0] += A @ B[0]
                    acc[1] += A @ B[1]
            for lane in range(32):  # the epilogue, as the kernel writes it
                g, qd = lane >> 2, lane & 3
                i0 = SUB * bI + g
                si, Gi = (rs[i0], rs[i0 + 8]), (G[i0], G[i0 + 8])
                kb = (si[0][1] * beta[i0], si[1][1] * beta[i0 + 8])
                for nt in range(2):
                    jl = 8 * nt + 2 * qd
                    j = SUB * bJ + jl
                    vq, vk = [0.0] * 4, [0.0] * 4
                    for e in range(4):
                        h, c = e >> 1, e & 1
                        il = g + 8 * h
                        acc_q = sq[nt][il, 2 * qd + c]  # accumulator element e of the lane
                        acc_k = sk[nt][il, 2 * qd + c]
                        w = rs[j + c][1] * 2.0 ** min(Gi[h] - G[j + c], 0.0)
                        vq[e] = acc_q * si[h][0] * w
                        vk[e] = acc_k * kb[h] * w
                        if diag:
                            vq[e] = vq[e] if il >= jl + c else 0.0
                            vk[e] = vk[e] if il > jl + c else 0.0
                    aqk[i0, j:j + 2], aqk[i0 + 8, j:j + 2] = vq[:2], vq[2:]
                    dst = akd[bI] if diag else akh[p]
                    dst[g, jl:jl + 2], dst[g + 8, jl:jl + 2] = vk[:2], vk[2:]
        qh, kh = qv * rs[:, :1], kv * rs[:, 1:]
        low = np.tri(C, dtype=bool)
        E = np.where(low, 2.0 ** np.minimum(G[:, None] - G[None, :], 0), 0)
        Aqk = (qh @ kh.T) * E
        Akk = beta[:, None] * np.tril((kh @ kh.T) * E, -1)
        for I in range(4):
            for J in range(I + 1):
                blk = (slice(SUB * I, SUB * I + SUB), slice(SUB * J, SUB * J + SUB))
                np.testing.assert_allclose(aqk[blk], Aqk[blk], rtol=1e-12, atol=1e-12)
                got = akd[I] if I == J else akh[[p for p in range(6) if (pair_i(p), pair_j(p)) == (I, J)][0]]
                np.testing.assert_allclose(got, Akk[blk], rtol=1e-12, atol=1e-12)

    def test_gate_scan_is_the_prefix(self):
        rng = np.random.default_rng(2)
        lg = -rng.uniform(0, 3, C)
        lg[50:] = 0.0  # past T
        s = lg[0::2] + lg[1::2]
        inc = np.cumsum(s)  # the shuffle-up scan's result per lane (exact in float64 here)
        G = np.empty(C)
        G[1::2], G[0::2] = inc, inc - lg[1::2]
        np.testing.assert_allclose(G, np.cumsum(lg), rtol=0, atol=1e-12)
        self.assertEqual(sorted(4 * lane + i for lane in range(32) for i in range(4)), list(range(K)))


if __name__ == "__main__":
    unittest.main()
