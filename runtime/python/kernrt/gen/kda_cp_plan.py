"""Context-parallel geometry of the 64-token chunk prefill: how many segments, how long.

Owns: `segments` (the chunks of each segment of one sequence, the rule
kernels/kda/chunk64_seqs.cuh's cp_segment states: segments of L chunks from the sequence's end,
the first taking the rest) and `plan` (the cp_segs and seg_chunks that a model of the state
step's block schedule finds fastest, or none where the one pass is as fast). Python 3
standard library only.

The model counts time in chunk steps of a state block with o (3.83 us on the H200 at B8 T4096
H16 V128, call f6). Each state block holds one SM (1 block per SM: 182 KB of shared memory)
and runs its chunks serially; blocks start in launch order (x the value tile, y the value
head, z = sequence x cp_segs + segment) as SMs free up; exact context parallel's phase 1 in
the longest blocks first (kernels/kda/chunk64_cp_order.cuh). Phase 1 runs segment 0 for real and
the middle segments from zero and from X = I (a step without o: PHASE1_STEP of one with);
the combine multiplies the transitions serially (COMBINE_STEP each), one wave of blocks (V/16
value rows x the value heads x Z) walking sequences z, z + Z, .. (`combine_z`), so a block's
sequences' transitions add up; phase 3 runs segments 1.. with o. Calibration, call f6 at CP
8 x 64 chunks (B1 T32768 H16): phases 1 + 3 took 578.2 us and
the dense one pass's step 245 us for 64 chunks, so phase 1's 333 us over two waves of 64-chunk
blocks is 0.68 a step; the model then gave 159.5 steps for CP 8 x 64 in the old layout
(measured 610.5 us / 3.83 = 159.4). The combine: 24.3 us for CP 9 x 55's 7 transitions in call
j3 (its 8-warp form), 0.9 steps a transition; a sequence without one (two segments: only the
last one's initial state written) costs little (the varlen bench's 8 such sequences and one
transition: 13.1 us on the H100), which the model does not count.

Decay-bounded context parallel (`bounded`, GDN: kernels/kda/kda_chunk64_state2.cu warm_start):
phase 1 runs each segment but the last from zero over its trailing chunks alone, one tile, and
phase 3 runs every segment with o. The model takes WARM_CHUNKS chunks a phase-1 block (at most
the segment), what the longest-lived heads of fla's init gates need at B1 T32768 H16 (32 at the
bound 2^-24, scaled to its 2^-16: a head's chunks go as the bound's log); heads whose decay
never gets there run exact, as without the bound, which the model does not count. Its combine
skips the dropped transitions (kda_cp_combine_bounded: 7.1 us for 7 segments,
COMBINE_STEP_BOUNDED a segment after the first), and of the plans within TIE of the best the one
with the fewest segments is taken:
the model ranks 9 x 63 over 8 x 64 by 1 %, the device the other way (537.2 against 541.3 us,
one process).
"""

import functools
import heapq

PHASE1_STEP = 0.68   # a phase-1 block's chunk step (no o) against a phase-3 block's
COMBINE_STEP = 0.9   # the combine's time a transition multiplied, in chunk steps (call j3)
WARM_CHUNKS = 21     # a decay-bounded phase-1 block's chunks (notes.md: the longest-lived head)
COMBINE_STEP_BOUNDED = 0.27  # the bounded combine's time a segment after the first
TIE = 0.01           # bounded: plans within 1 % of the best, the fewest segments
SMS = 132            # H200 (and H100 SXM) multiprocessors
COMBINE_ROWS = 16    # value rows of a combine block (kernels/kda/cp_combine.cuh kCombineRows)
VTILE = 128          # value rows of a state block (v_tiles = V / VTILE)


def combine_z(dim_v, value_heads, sms=SMS):
    """The combine's grid.z (cp_combine.cuh: block z walks sequences z, z + Z, ..): one wave of
    blocks at one block per SM (at least one z), not a block a sequence (16 waves for 16
    sequences at V128 HV16; cp_combine.cuh has the numbers)."""
    return max(1, sms // (dim_v // COMBINE_ROWS * value_heads))


def segments(chunks, segs, seg_chunks):
    """Chunks of each populated segment of a sequence of `chunks` 64-token chunks (cp_segment's
    rule, kernels/kda/chunk64_seqs.cuh): min(segs, ceil(chunks / L)) segments, the later ones L
    chunks each counted from the end, segment 0 the rest."""
    nseg = 1 if chunks <= 0 else min(segs, -(-chunks // seg_chunks))
    return [chunks - (nseg - 1) * seg_chunks] + [seg_chunks] * (nseg - 1)


def _makespan(durations, sms):
    free = [0.0] * sms
    end = 0.0
    for d in durations:
        t = heapq.heappop(free) + d
        heapq.heappush(free, t)
        end = max(end, t)
    return end


def steps(lens, value_heads, v_tiles, segs, seg_chunks, sms=SMS, bounded=False):
    """Modelled chunk steps of the state work (phase 1, combine, phase 3) for sequences of
    `lens` chunks; segs 0: the one pass; bounded: decay-bounded (the module's comment)."""
    if not segs:
        return _makespan([float(c) for c in lens for _ in range(value_heads * v_tiles)], sms)
    p1, p3 = [], []  # durations in the grids' launch order; exiting blocks left out
    zs = combine_z(VTILE * v_tiles, value_heads, sms)
    walks = [0.0] * zs  # combine steps of the blocks of each z
    for i, chunks in enumerate(lens):
        sg = segments(chunks, segs, seg_chunks)
        if bounded:
            walks[i % zs] += (len(sg) - 1) * COMBINE_STEP_BOUNDED
        else:
            walks[i % zs] += max(0, len(sg) - 2) * COMBINE_STEP
        for s, n in enumerate(sg):
            for _ in range(value_heads):
                if bounded and len(sg) > 1:
                    if s < len(sg) - 1:
                        p1.append(min(n, WARM_CHUNKS) * PHASE1_STEP)
                    p3 += [float(n)] * v_tiles
                    continue
                if s == 0:
                    p1 += [float(n)] * v_tiles
                    continue
                if s < len(sg) - 1:  # the last segment has no phase-1 block
                    p1 += [n * PHASE1_STEP] * (v_tiles + 1)
                p3 += [float(n)] * v_tiles
    if not bounded:  # exact: phase 1's longest blocks first (chunk64_cp_order.cuh)
        p1.sort(reverse=True)
    waves = -(-VTILE * v_tiles // COMBINE_ROWS * value_heads * zs // sms)
    return _makespan(p1, sms) + waves * max(walks) + _makespan(p3, sms)


@functools.lru_cache(maxsize=256)
def plan(lens, value_heads, v_tiles, sms=SMS, max_segs=32, bounded=False):
    """(cp_segs, seg_chunks in 64-token chunks) for sequences of `lens` (a tuple of chunk
    counts), or (0, 0) where no geometry beats the one pass by 5 %; bounded: decay-bounded
    context parallel (GDN's)."""
    longest = max(lens) if lens else 0
    cands = [(steps(lens, value_heads, v_tiles, 0, 0, sms) / 1.05, 0, 0)]
    for segs in range(2, max_segs + 1):
        lo, hi = max(1, longest // (segs + 2)), max(1, longest // (segs - 1))
        for L in range(lo, hi + 1):
            if len(segments(longest, segs, L)) < segs:
                continue  # fewer populated segments: the same as a smaller segs
            cands.append((steps(lens, value_heads, v_tiles, segs, L, sms, bounded), segs, L))
    best = min(cands)  # the earliest of equal times: the fewest segments, the shortest L
    if bounded and best[1]:
        near = (c for c in cands if c[1] and c[0] <= best[0] * (1 + TIE))
        best = min(near, key=lambda c: (c[1], c[0]))
    return best[1], best[2]
