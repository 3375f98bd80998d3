"""CPU test of prep v4's own shared-memory layouts and index maps (kernels/kda/kda_chunk64_prep4.cu;
the tiles, the tf32 staging and the solve: test_chunk64_prep_tiles_layout.py): a numpy
mirror of
- the raw stage: the cp.async map (thread tid: row tid / 4, 16-byte chunks tid % 4 + 4 j at
  + 64 j bytes from one base) covers every (token row, chunk) of q and k once, from the token
  row it names (rows of RAW_W words, 4 of them padding), 4 shared wavefronts per copy; the
  channel pass's LDS.32 of word [t][cp] is channels 2 cp, 2 cp + 1, conflict-free per warp;
- the Gram diagonals (the l2 norms): the two ldmatrix.x4 lane address maps over the raw rows
  (A, and B = A^T), conflict-free per 8-lane phase, ldmatrix simulated from its PTX definition
  (test_chunk64_prep_tiles_layout.ldmatrix_x4), the registers read through the m16n8k16 A / B
  fragment layouts (A = (r0, r1, r2, r3); B of n-tile 0 = (b0, b1), of n-tile 1 = (b2, b3) of
  the second load), the products summed over the 8 k-steps, and
  the diagonal element the kernel picks per lane lands in rs[t] (.x for q, .y for k);
- the pair and diagonal mma's ldmatrix columns by one XOR (equal to the swizzle formula of
  test_chunk64_prep_tiles_layout);
- the q, k head of a value head (the fp32 division's exactness);
- the solve's tt rows of the diagonal inverses (STS.128 of f16 pairs, conflict-free);
- the zeros of the upper blocks of aqk and tmb (warps 6, 7);
- the g stage (cp.async of the value head's g rows, rows of K / 2 words, the gate's reads) and
  the fp32 staging of a sub-block off the tf32 path, row stride K as pair_column reads it.
A second copy of the formulas: a change in the kernel needs the same change here.
"""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_chunk64_prep_tiles_layout import banks_conflict_free, ldmatrix_x4, ldsm_phases_ok  # noqa: E402

K, SUB, C, THREADS = 128, 16, 64, 256
RAW_W = K // 2 + 4  # kRawW: a raw-stage row in u32 words (64 bf16 pairs + 4 words of padding)


def bf16_pair(word):
    """The two channels' values a u32 word of the raw stage holds (low half first)."""
    return word & 0xffff, word >> 16


class Prep4Layout(unittest.TestCase):
    def test_raw_stage_cp_async_map(self):
        seen = {}
        H, h, row0 = 3, 1, 5  # any sizes: the source element names the row it lands in
        for tid in range(THREADS):
            t, c = tid >> 2, 8 * (tid & 3)
            b = (row0 * H + h) * K               # the block's base, 64-bit in the kernel
            e = t * (H * K) + c                  # the thread's 32-bit offset from it
            for j in range(4):
                dst = t * RAW_W + c // 2 + 16 * j  # word of &sm.rq[t][c / 2 + 16 j]
                src = b + e + 32 * j               # copy j: + 64 j bytes, an immediate
                self.assertNotIn(dst, seen)
                seen[dst] = src
                self.assertEqual((src // K - h) // H - row0, t)  # token row of the source
                self.assertEqual(src % K, c + 32 * j)
                self.assertEqual((src // K) % H, h)
                self.assertEqual(src % K, 2 * (dst % RAW_W))   # the word holds the pair it names
        # 16-byte chunks, all of every row's 64 pairs (the padding words are never written)
        self.assertEqual(sorted(seen), [t * RAW_W + w for t in range(C) for w in range(0, K // 2, 4)])
        # a warp's copy j: 8 rows x 64 bytes on the 272-byte rows, every bank 4 times (4
        # wavefronts, the minimum for 512 bytes)
        for w in range(8):
            for j in range(4):
                banks = [0] * 32
                for lane in range(32):
                    tid = 32 * w + lane
                    byte = 4 * ((tid >> 2) * RAW_W + 4 * (tid & 3) + 16 * j)
                    for i in range(4):
                        banks[(byte // 4 + i) % 32] += 1
                self.assertEqual(banks, [4] * 32)

    def test_solve_tt_rows(self):
        # the diagonal inverses: thread tid < 64 (block bI = tid / 16, column j = tid % 16) writes
        # halves o + i, i = 0..15, of tt row o + j (o = 16 bI) as 2 STS.128 of f16 pairs; rows of
        # kC + 8 halves (144 bytes): each 8-thread phase on 8 distinct 16-byte bank groups
        row_b = 2 * (C + 8)
        for u in range(2):
            addrs = [(16 * (tid >> 4) + (tid & 15)) * row_b + 2 * 16 * (tid >> 4) + 16 * u for tid in range(64)]
            self.assertTrue(all(a % 16 == 0 for a in addrs))
            for ph in range(0, 64, 8):
                self.assertTrue(banks_conflict_free(addrs[ph:ph + 8], 16))
            # the 8 halves of store u are tt[o + j][o + 8 u + e], e = 0..7: pair e // 2, half e % 2
            for tid in range(64):
                o, j = 16 * (tid >> 4), tid & 15
                cols = [(addrs[tid] - (o + j) * row_b) // 2 + e for e in range(8)]
                self.assertEqual(cols, [o + 8 * u + e for e in range(8)])

    def test_upper_block_zeros(self):
        # warps 6, 7 zero the blocks I < J of aqk and tmb ([64][64] halves): lane (r, h) of warp
        # 6 + w stores uint4 (8 halves) at off, off + 16 and off3; every upper element once, no other
        seen = []
        for w in range(2):
            for lane in range(32):
                r, h = lane >> 1, lane & 1
                off = (SUB * w + r) * C + SUB * (1 + w) + 8 * h
                off3 = off + SUB * C + SUB if w else off + 2 * SUB
                for o in (off, off + SUB, off3):
                    self.assertEqual(o % 8, 0)  # 16-byte aligned in the 128-byte rows
                    seen += [o + e for e in range(8)]
        upper = [R * C + c for R in range(C) for c in range(C) if R // SUB < c // SUB]
        self.assertEqual(sorted(seen), upper)

    def test_channel_pass_reads(self):
        # word [t][cp] holds channels 2 cp, 2 cp + 1 (chunk c / 8 holds channels c..c + 7)
        for cp in range(C):
            word = cp
            self.assertEqual((4 * word) // 16, (2 * cp) // 8)
        for w in range(2):
            addrs = [4 * (7 * RAW_W + 32 * w + lane) for lane in range(32)]
            self.assertTrue(banks_conflict_free(addrs, 4))

    def test_gram_diagonals(self):
        rng = np.random.default_rng(0)
        # raw rows of 64 tokens as words; word value = (row << 8 | pair): decoded symbolically
        # (the padding words hold -1: a read of one fails the decode below)
        words = np.array([(t << 8) | p if p < K // 2 else -1 for t in range(C) for p in range(RAW_W)],
                         np.int64)
        vals = rng.integers(-8, 8, (C, K)).astype(np.float64)  # channel values behind the words
        for I in range(4):
            d = [np.zeros((16, 8)), np.zeros((16, 8))]
            for ks in range(K // 16):
                addr = [((SUB * I + (l & 7) + 8 * ((l >> 3) & 1)) * RAW_W) * 4 + 16 * (l >> 4) + 32 * ks
                        for l in range(32)]
                self.assertTrue(ldsm_phases_ok(addr))  # the padded rows: no bank conflicts
                addr_b = [((SUB * I + (l & 7) + 8 * (l >> 4)) * RAW_W) * 4 + 16 * ((l >> 3) & 1) + 32 * ks
                          for l in range(32)]
                self.assertTrue(ldsm_phases_ok(addr_b))
                r = ldmatrix_x4(words, addr)
                rb = ldmatrix_x4(words, addr_b)
                A = np.zeros((16, 16))
                B = [np.zeros((16, 8)), np.zeros((16, 8))]
                for lane in range(32):
                    g, q = lane >> 2, lane & 3

                    def chan(w):
                        self.assertGreaterEqual(int(w), 0)  # not a padding word
                        t, p = int(w) >> 8, int(w) & 0xff
                        return t, 2 * p

                    for reg, (row, kk) in zip(range(4), ((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8), (g + 8, 2 * q + 8))):
                        t, c = chan(r[lane, reg])
                        A[row, kk], A[row, kk + 1] = vals[t, c], vals[t, c + 1]
                    for nt, (b0, b1) in enumerate(((0, 1), (2, 3))):  # B: the second ldmatrix's pairs
                        for reg, kk in ((b0, 2 * q), (b1, 2 * q + 8)):
                            t, c = chan(rb[lane, reg])
                            B[nt][kk, g], B[nt][kk + 1, g] = vals[t, c], vals[t, c + 1]
                # the fragments are the sub-block's rows and channels 16 ks ..
                rows = vals[SUB * I:SUB * I + 16, 16 * ks:16 * ks + 16]
                np.testing.assert_array_equal(A, rows)
                np.testing.assert_array_equal(B[0], rows[:8].T)
                np.testing.assert_array_equal(B[1], rows[8:].T)
                d[0] += A @ B[0]
                d[1] += A @ B[1]
            rs = np.full((C, 2), np.nan)
            sums = (vals[SUB * I:SUB * I + 16] ** 2).sum(1)
            for lane in range(32):
                g, q = lane >> 2, lane & 3
                if (g >> 1) == q:
                    e = g & 1
                    # d0[e] = D0[g][2q + e], d1[2 + e] = D1[g + 8][2q + e]
                    rs[SUB * I + g, 0] = d[0][g, 2 * q + e]
                    rs[SUB * I + g + 8, 0] = d[1][g + 8, 2 * q + e]
            np.testing.assert_array_equal(rs[SUB * I:SUB * I + 16, 0], sums)

    def test_rs_slots(self):
        # rw = &rs[16 I].x + (warp & 1): floats 2 g (+1 for k) and 2 (g + 8) of the sub-block
        for I in range(4):
            for w in range(2):
                for g in range(8):
                    base = 2 * SUB * I + (w & 1)
                    for f, t in ((base + 2 * g, g), (base + 2 * (g + 8), g + 8)):
                        self.assertEqual((f // 2, f % 2), (SUB * I + t, w & 1))

    def test_diagonal_mma_addresses(self):
        # pa[v][h] = a0 + 4 (ca ^ (16 v + 8 h)), pb[v] = b0 + 4 (cb ^ 16 v): the swz_f columns
        # (16 v + 8 h + 4 ch) ^ 4 (row % 8) of the swizzle form, for every lane and n-tile
        for lane in range(32):
            ar, ach = 8 * ((lane >> 3) & 1) + (lane & 7), lane >> 4
            ca = (4 * ach) ^ ((ar & 7) << 2)
            for v in range(2):
                for h in range(2):
                    self.assertEqual(ca ^ (16 * v + 8 * h), (16 * v + 8 * h + 4 * ach) ^ ((ar & 7) << 2))
            for nt in range(2):
                br, bch = 8 * nt + (lane & 7), lane >> 3
                cb = (4 * bch) ^ ((br & 7) << 2)
                for v in range(2):
                    self.assertEqual(cb ^ (16 * v), (16 * v + 4 * bch) ^ ((br & 7) << 2))

    def test_pair_mma_addresses(self):
        # the off-diagonal pairs' f16 tiles: pa[v] = sa + 2 (ca ^ 16 v), pb[v] likewise, equal to
        # the swz_h columns (16 v + 8 ch) ^ 8 (row % 8)
        for lane in range(32):
            for row, ch in ((8 * ((lane >> 3) & 1) + (lane & 7), lane >> 4),
                            (8 * (lane >> 4) + (lane & 7), (lane >> 3) & 1)):
                c0 = (8 * ch) ^ ((row & 7) << 3)
                for v in range(4):
                    self.assertEqual(c0 ^ (16 * v), (16 * v + 8 * ch) ^ ((row & 7) << 3))

    def test_head_of_value_head(self):
        # h = int(__fdividef(hv + 1/2, group)): exact if a relative error below 2^-21 (__fdividef:
        # 2 ulps) cannot move (hv + 1/2) / group across an integer; every group for HV <= 2048,
        # and the largest grids (HV up to 65535) for a few groups
        def ok(hv, group):
            x = (hv.astype(np.float64) + 0.5) / group
            lo, hi = np.floor(x * (1 - 2.0 ** -21)), np.floor(x * (1 + 2.0 ** -21))
            return np.all(lo == hv // group) and np.all(hi == hv // group)
        for group in range(1, 2049):
            self.assertTrue(ok(np.arange(2048 // group * group), group), group)
        for group in (1, 3, 7, 64, 255, 4096, 65535):
            self.assertTrue(ok(np.arange(65535 // group * group), group), group)

    def test_g_stage_and_fp32_staging(self):
        # the g stage: cp.async of g rows (value head hv of HV) into rows of K / 2 words; the
        # gate of thread (I, cp) reads word t K / 2 from &rg[16 I][cp]: token 16 I + t, channels
        # 2 cp, 2 cp + 1
        HV, hv, row0 = 4, 2, 70
        src_of = {}
        for tid in range(THREADS):
            t0, c = tid >> 4, 8 * (tid & 15)
            g0, gstep = ((row0 + t0) * HV + hv) * K + c, SUB * HV * K
            for u in range(4):
                dst = (t0 + SUB * u) * (K // 2) + c // 2
                self.assertNotIn(dst, src_of)
                for w in range(4):  # the chunk's 4 words: channel pairs of element g0 + u gstep ..
                    src_of[dst + w] = g0 + u * gstep + 2 * w
        self.assertEqual(sorted(src_of), list(range(C * K // 2)))
        for I in range(4):
            for cp in (0, 17, 63):
                for t in range(SUB):
                    word = (SUB * I) * (K // 2) + cp + t * (K // 2)
                    self.assertEqual(src_of[word], ((row0 + SUB * I + t) * HV + hv) * K + 2 * cp)
        for w in range(2):  # a warp's 32 pairs of one row: conflict-free
            self.assertTrue(banks_conflict_free([4 * (5 * (K // 2) + 32 * w + lane) for lane in range(32)], 4))
        # staging float2 at t K + 2 cp; pair_column's lane l reads float4 at j K + 4 l
        for t in range(SUB):
            for lane in range(32):
                writers = {t * K + 2 * cp + i: 2 * cp + i for cp in range(C) for i in range(2)}
                self.assertEqual([writers[t * K + 4 * lane + i] for i in range(4)],
                                 [4 * lane + i for i in range(4)])


if __name__ == "__main__":
    unittest.main()
