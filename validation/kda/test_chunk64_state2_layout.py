"""CPU test of the pipelined state step's o store (kernels/kda/kda_chunk64_state2.cu, OutBf16):
a numpy mirror of one consumer warp's path from the wgmma accumulator to the product layout,
- the bf16x2 packs h[2j] (row ra, tokens 8j + 2q + {0,1}) and h[2j + 1] (row rb);
- 4 stmatrix.x4.trans into the warp's [64 tokens][16 values] tile, simulated from the PTX
  definition (register i of lane l holds row l / 4, columns 2 (l % 4) + {0,1} of matrix i;
  lane 8 m + r gives the address of stored row r of matrix m, which receives column r), the
  halves of a token row swapped where bit 2 of the token is set;
- the 16-byte reads (lane l, step k: token 16 k + l / 2, half l % 2) and their global places;
so that every (token, value row) of the warp's accumulator lands once at its product-layout
place, tokens t >= live are not stored, and the stmatrix rows of one matrix and the reads of
one 8-lane phase fall on distinct banks. And the step's v read (chunk64_state_step.cuh): the
producer's places (v_chunk: 16-byte chunk j of token row t at j ^ (t % 8)) and the 4
ldmatrix.x4.trans of each consumer warp give every lane the v values of its accumulator elements,
each 8-lane phase on distinct banks. A second copy of the formulas: a change in the kernel needs
the same change here.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_chunk64_prep_tiles_layout import banks_conflict_free  # noqa: E402

C, ROWS = 64, 16  # tokens per chunk, value rows per warp


def acc_element(lane, i):
    """(token, value row within the warp) of accumulator register o[i] of `lane`."""
    j, e = divmod(i, 4)
    return 8 * j + 2 * (lane % 4) + (e & 1), lane // 4 + (8 if e >= 2 else 0)


def stmatrix_addr(lane, u):
    """OutBf16: the byte offset (in the tile) lane `lane` gives to stmatrix u."""
    mi, ti = lane >> 3, lane & 7
    t = 8 * (2 * u + (mi >> 1)) + ti
    half = (mi & 1) ^ ((t >> 2) & 1)
    return 32 * t + 16 * half


def read_place(lane, k):
    """OutBf16's reads: (token, half, tile byte offset) of lane `lane`, step k."""
    t, half = 16 * k + (lane >> 1), lane & 1
    return t, half, 32 * t + 16 * (half ^ ((t >> 2) & 1))


VT = 128  # value rows of the block's v tile: [64 tokens][128] bf16, 256-byte rows


def v_chunk(j, t):
    """Chunk64Stage::v: where 16-byte chunk j of token row t sits."""
    return j ^ (t & 7)


def ldmatrix_v_addr(lane, u, base):
    """chunk64_step: the tile byte offset lane `lane` of the warp at value row `base` gives to
    ldmatrix u (ra - lane / 4 == base)."""
    m = lane >> 3
    c0 = base >> 3
    t, c = 8 * (2 * u + (m >> 1)) + (lane & 7), c0 + (m & 1)
    return 2 * (VT * t + 8 * v_chunk(c, t))


class State2VRead(unittest.TestCase):
    def test_every_lane_gets_its_accumulator_elements(self):
        # the tile as the producer fills it: byte offset -> (token, value row)
        tile = {}
        for t in range(C):
            for j in range(VT // 8):
                for i in range(8):
                    tile[2 * (VT * t + 8 * v_chunk(j, t) + i)] = (t, 8 * j + i)
        self.assertEqual(len(tile), C * VT)
        for base in range(0, VT, 16):  # the 8 consumer warps
            for u in range(4):
                addr = [ldmatrix_v_addr(lane, u, base) for lane in range(32)]
                for m in range(4):
                    self.assertTrue(banks_conflict_free(addr[8 * m:8 * m + 8], 16))
                for lane in range(32):
                    g, q = lane >> 2, lane & 3
                    for m in range(4):  # .trans: register m holds stored rows 2q, 2q + 1, column g
                        got = [tile[addr[8 * m + 2 * q + e] + 2 * g] for e in range(2)]
                        # v_of(j, e): vp[2j + (e >> 1)], e & 1 the high half
                        j, h = divmod(4 * u + m, 2)
                        ra = base + g
                        for e in range(2):
                            want = (8 * j + 2 * q + e, ra + 8 * h)  # acc element (j, 2h + e)
                            self.assertEqual(got[e], want)


class State2OutLayout(unittest.TestCase):
    def store(self, live):
        """Simulate one warp's OutBf16 for a chunk with `live` tokens: {(token, row): value}
        written to global memory, each value the (token, row) it came from."""
        # packed registers: h[2j + s] holds two accumulator elements (low, high)
        h = {(lane, 2 * j + s): (acc_element(lane, 4 * j + 2 * s), acc_element(lane, 4 * j + 2 * s + 1))
             for lane in range(32) for j in range(8) for s in range(2)}
        tile = {}  # byte offset -> element (token, row)
        for u in range(4):
            addr = [stmatrix_addr(lane, u) for lane in range(32)]
            for m in range(4):
                self.assertTrue(banks_conflict_free(addr[8 * m:8 * m + 8], 16))
            for lane in range(32):
                for m in range(4):
                    for e in range(2):
                        r, c = lane // 4, 2 * (lane % 4) + e  # fragment row, column
                        off = addr[8 * m + c] + 2 * r  # stored row c, column r
                        self.assertNotIn(off, tile)
                        tile[off] = h[(lane, 4 * u + m)][e]
        self.assertEqual(set(tile), set(range(0, 2 * C * ROWS, 2)))
        out = {}
        for k in range(4):
            places = [read_place(lane, k) for lane in range(32)]
            for p0 in range(0, 32, 8):
                self.assertTrue(banks_conflict_free([p[2] for p in places[p0:p0 + 8]], 16))
            for t, half, off in places:
                if t < live:
                    for i in range(8):  # global: token t, value rows 8 half + i
                        self.assertNotIn((t, 8 * half + i), out)
                        out[(t, 8 * half + i)] = tile[off + 2 * i]
        return out

    def test_every_element_lands_at_its_place(self):
        out = self.store(C)
        self.assertEqual(len(out), C * ROWS)
        for place, src in out.items():
            self.assertEqual(place, src)

    def test_tokens_past_T_are_not_stored(self):
        out = self.store(8)  # T = 200: the last chunk has 8 tokens
        self.assertEqual(set(out), {(t, r) for t in range(8) for r in range(ROWS)})
        for place, src in out.items():
            self.assertEqual(place, src)


if __name__ == "__main__":
    unittest.main()
