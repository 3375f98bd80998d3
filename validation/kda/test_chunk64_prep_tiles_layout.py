"""CPU test of the shared tiles of the 64-token chunk's preps (kernels/kda/chunk64_prep4_smem.cuh,
used by kda_chunk64_prep4.cu and, for the pair maps and the solve, kda_chunk64_prep_gdn.cu
through chunk64_prep_shared.cuh): a numpy mirror of the swizzles swz_h / swz_f, the channel
pass's f16x2 / float2 stores, the ldmatrix lane addresses of the off-diagonal (f16) and
diagonal (tf32) mma operands in their swizzle form (test_chunk64_prep4_layout checks that the
kernel's one-XOR addresses equal it), the solve's 16 x 16 f16 blocks (rows of kRowB) and the
pair order of the off-diagonal blocks with the k lb D factor of each tile. ldmatrix is
simulated from the PTX definition (lanes 8m..8m+7 give the rows of matrix m, lane l receives
the 32-bit word l % 4 of row l / 4 of every matrix) and the registers are read back through
the mma.sync fragment layouts (m16n8k16 f16, m16n8k8 tf32), so a wrong row, chunk, word or
register order fails here, as do bank conflicts of the stores and of every ldmatrix phase.
ldmatrix_x4, banks_conflict_free and ldsm_phases_ok serve the other layout tests. The
kernels' arithmetic is checked on the device (check_chunk64.py); this checks only where each
operand lands and is read. A second copy of the formulas: a change in the kernel needs the
same change here. (First written for prep v3, whose tiles prep v4 kept; v3 itself is on git
tag kda6-chunk64-preps-v2-v3.)
"""
import unittest

import numpy as np

K, SUB = 128, 16


def swz_h(t, c):  # f16 tile [16][128], element offset
    return t * K + (c ^ ((t & 7) << 3))


def swz_f(t, c):  # fp32 tile [16][128], element offset
    return t * K + (c ^ ((t & 7) << 2))


def ldmatrix_x4(words, byte_addr):
    """words: the shared memory as 32-bit words (np array); byte_addr[l]: lane l's row address.
    Returns regs [32 lanes][4]: matrix m's row r is at byte_addr[8 m + r] (16 bytes)."""
    regs = np.zeros((32, 4), words.dtype)
    for lane in range(32):
        for m in range(4):
            row = byte_addr[8 * m + lane // 4]
            assert row % 16 == 0, "ldmatrix rows are 16-byte aligned"
            regs[lane, m] = words[row // 4 + lane % 4]
    return regs


def banks_conflict_free(byte_addrs, width):
    """Each address accesses `width` bytes; the accesses together touch distinct banks."""
    banks = []
    for a in byte_addrs:
        banks += [(a // 4 + i) % 32 for i in range(width // 4)]
    return len(banks) == len(set(banks))


def ldsm_phases_ok(byte_addr):
    return all(banks_conflict_free(byte_addr[8 * m:8 * m + 8], 16) for m in range(4))


class PrepTiles(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(0)

    def test_swizzles_are_bijections_and_keep_pairs(self):
        for swz in (swz_h, swz_f):
            offs = {swz(t, c) for t in range(SUB) for c in range(K)}
            self.assertEqual(offs, set(range(SUB * K)))
            for t in range(SUB):
                for c in range(0, K, 2):
                    self.assertEqual(swz(t, c + 1), swz(t, c) + 1)  # f16x2 / float2 stores

    def test_channel_pass_stores_conflict_free(self):
        # warp of one sub-block: cp = 32 w + lane, channels 2 cp, 2 cp + 1
        for w in range(2):
            for t in range(SUB):
                h = [2 * swz_h(t, 2 * (32 * w + lane)) for lane in range(32)]
                self.assertTrue(banks_conflict_free(h, 4), (w, t))
                f = [4 * swz_f(t, 2 * (32 * w + lane)) for lane in range(32)]
                # 64-bit stores go in two phases of 16 lanes
                self.assertTrue(banks_conflict_free(f[:16], 8) and banks_conflict_free(f[16:], 8))

    def test_offdiag_fragments(self):
        # tiles as written: A (q la or k la) and B (k lb D), logical [16 tokens][128 channels]
        A = self.rng.standard_normal((SUB, K)).astype(np.float16)
        B = self.rng.standard_normal((SUB, K)).astype(np.float16)
        mem = np.zeros(2 * SUB * K, np.float16)
        for t in range(SUB):
            for c in range(K):
                mem[swz_h(t, c)] = A[t, c]
                mem[SUB * K + swz_h(t, c)] = B[t, c]
        words = mem.view(np.uint32)
        base_b = 2 * SUB * K  # bytes
        pa, pb = [], []
        for lane in range(32):
            ar, ach = 8 * ((lane >> 3) & 1) + (lane & 7), lane >> 4
            br, bch = 8 * (lane >> 4) + (lane & 7), (lane >> 3) & 1
            pa.append([2 * (ar * K + ((16 * v + 8 * ach) ^ ((ar & 7) << 3))) for v in range(4)])
            pb.append([base_b + 2 * (br * K + ((16 * v + 8 * bch) ^ ((br & 7) << 3))) for v in range(4)])
        D = np.zeros((SUB, SUB), np.float64)
        for ks in range(K // 16):
            u = 128 * (ks >> 2)
            fa = ldmatrix_x4(words, [pa[l][ks & 3] + u for l in range(32)])
            fb = ldmatrix_x4(words, [pb[l][ks & 3] + u for l in range(32)])
            self.assertTrue(ldsm_phases_ok([pa[l][ks & 3] + u for l in range(32)]))
            self.assertTrue(ldsm_phases_ok([pb[l][ks & 3] + u for l in range(32)]))
            a_sl = A[:, 16 * ks:16 * ks + 16]
            b_sl = B[:, 16 * ks:16 * ks + 16]  # B operand [k = channel][n = token] = b_sl.T
            for lane in range(32):
                g, q = lane >> 2, lane & 3
                h = lambda r: r.view(np.float16)  # noqa: E731 - two halves of a register
                # A fragment m16n8k16: a0 (g, 2q..), a1 (g + 8, 2q..), a2 (g, 2q + 8..), a3
                want = [a_sl[g, 2 * q:2 * q + 2], a_sl[g + 8, 2 * q:2 * q + 2],
                        a_sl[g, 2 * q + 8:2 * q + 10], a_sl[g + 8, 2 * q + 8:2 * q + 10]]
                for i in range(4):
                    np.testing.assert_array_equal(h(fa[lane, i:i + 1]), want[i])
                # B fragments of n-tiles 0, 1: b0 (k = 2q.., n = g), b1 (k = 2q + 8.., n = g)
                for nt in range(2):
                    np.testing.assert_array_equal(h(fb[lane, 2 * nt:2 * nt + 1]), b_sl[8 * nt + g, 2 * q:2 * q + 2])
                    np.testing.assert_array_equal(h(fb[lane, 2 * nt + 1:2 * nt + 2]), b_sl[8 * nt + g, 2 * q + 8:2 * q + 10])
            D += a_sl.astype(np.float64) @ b_sl.T.astype(np.float64)
        np.testing.assert_allclose(D, A.astype(np.float64) @ B.T.astype(np.float64), rtol=1e-12, atol=1e-12)

    def test_diag_tf32_fragments(self):
        A = self.rng.standard_normal((SUB, K)).astype(np.float32)   # q f or k f
        Bt = self.rng.standard_normal((SUB, K)).astype(np.float32)  # k / f
        mem = np.zeros(2 * SUB * K, np.float32)
        for t in range(SUB):
            for c in range(K):
                mem[swz_f(t, c)] = A[t, c]
                mem[SUB * K + swz_f(t, c)] = Bt[t, c]
        words = mem.view(np.uint32)
        base_b = 4 * SUB * K
        for nt in range(2):
            pa, pb = [], []
            for lane in range(32):
                ar, ach = 8 * ((lane >> 3) & 1) + (lane & 7), lane >> 4
                br, bch = 8 * nt + (lane & 7), lane >> 3
                pa.append([[4 * (ar * K + ((16 * v + 8 * h + 4 * ach) ^ ((ar & 7) << 2))) for h in range(2)]
                           for v in range(2)])
                pb.append([base_b + 4 * (br * K + ((16 * v + 4 * bch) ^ ((br & 7) << 2))) for v in range(2)])
            for s in range(K // 16):
                u = 128 * (s >> 1)
                fb_addr = [pb[l][s & 1] + u for l in range(32)]
                fb = ldmatrix_x4(words, fb_addr).view(np.float32)
                self.assertTrue(ldsm_phases_ok(fb_addr))
                for h in range(2):  # k-step 2 s + h: channels 16 s + 8 h ..
                    fa_addr = [pa[l][s & 1][h] + u for l in range(32)]
                    fa = ldmatrix_x4(words, fa_addr).view(np.float32)
                    self.assertTrue(ldsm_phases_ok(fa_addr))
                    c0 = 16 * s + 8 * h
                    for lane in range(32):
                        g, q = lane >> 2, lane & 3
                        # A m16n8k8 tf32: a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4)
                        self.assertEqual(list(fa[lane]), [A[g, c0 + q], A[g + 8, c0 + q],
                                                          A[g, c0 + q + 4], A[g + 8, c0 + q + 4]])
                        # B: b0 (k = q, n = g), b1 (k = q + 4, n = g), B[k][n] = Bt[8 nt + n][k]
                        self.assertEqual(fb[lane, 2 * h], Bt[8 * nt + g, c0 + q])
                        self.assertEqual(fb[lane, 2 * h + 1], Bt[8 * nt + g, c0 + q + 4])

    def test_solve_block_fragments(self):
        row = SUB + 8  # kRowB: f16 rows of 48 bytes
        A = self.rng.standard_normal((SUB, SUB)).astype(np.float16)
        mem = np.zeros(SUB * row, np.float16)
        for i in range(SUB):
            mem[i * row:i * row + SUB] = A[i]
        words = mem.view(np.uint32)
        addr = [2 * ((8 * ((l >> 3) & 1) + (l & 7)) * row + 8 * (l >> 4)) for l in range(32)]
        self.assertTrue(ldsm_phases_ok(addr))
        fa = ldmatrix_x4(words, addr)
        for lane in range(32):
            g, q = lane >> 2, lane & 3
            want = [A[g, 2 * q:2 * q + 2], A[g + 8, 2 * q:2 * q + 2], A[g, 2 * q + 8:2 * q + 10],
                    A[g + 8, 2 * q + 8:2 * q + 10]]
            for i in range(4):
                np.testing.assert_array_equal(fa[lane, i:i + 1].view(np.float16), want[i])

    def test_pairs_and_their_tiles(self):
        pair_i = lambda p: p + 1 if p < 3 else (p - 1 if p < 5 else 3)  # noqa: E731
        pair_j = lambda p: p if p < 3 else (p - 3 if p < 5 else 0)  # noqa: E731
        pair_of = lambda I, M: M if I - M == 1 else (3 + M if I - M == 2 else 5)  # noqa: E731
        pairs = [(pair_i(p), pair_j(p)) for p in range(6)]
        self.assertEqual(sorted(pairs), [(I, J) for I in range(4) for J in range(I)])
        for p, (I, J) in enumerate(pairs):
            self.assertEqual(pair_of(I, J), p)
        # the tile of pair p (k lb D, written by sub-block J): D = prod dec_{J+1..I-1}, and
        # channel_pass<J> writes tile 6 + p with exactly that factor (prep v4; the zeros of the
        # upper blocks: test_chunk64_prep4_layout)
        factor = {0: (), 1: (), 2: (), 3: (1,), 4: (2,), 5: (2, 1)}
        for p, (I, J) in enumerate(pairs):
            self.assertEqual(sorted(factor[p]), list(range(J + 1, I)))


if __name__ == "__main__":
    unittest.main()
