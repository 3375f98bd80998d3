"""Static instruction count of a kernel's executed path, from its SASS (a calibration aid for
design entries before a device run; kernels/kda/chunk64_prep4.md "Counts").

Usage: python3 validation/kda/sass_path.py CUBIN KERNEL [--by-opcode] [--entry NAME]
       (CUBIN built from the working tree's source: the scopes are read from it)
  KERNEL: one of SCOPES below (prep4 = kda_chunk64_prep4.cu, gdn = kda_chunk64_prep_gdn.cu;
  the tables of preps v2 and v3, with v2's calibration against ncu, are on git tag
  kda6-chunk64-preps-v2-v3).
Method: `nvdisasm -gi` (the cubins are built with -lineinfo) gives every instruction its chain
of inlined source lines; the frame inside the device function named by the table (its line
range in the source) is the instruction's line. The SASS is cut into basic blocks (at labels,
after branches and EXIT). A block executes as often as the innermost scope of the table that
holds most of its data and control instructions' lines (not integer index math; the compiler rematerialises index math of earlier
lines inside a branch's blocks, and predicates short bodies inside the outer block): a scope is a source line range (the body of an `if`, of a
`#pragma unroll 1` loop, ...) with the number of warp executions it has per block and chunk
(warps that enter it x trips), written by hand from the source for the path that the timed
case takes (every sub-block on the tf32 diagonal path). Unrolled loops are separate
instructions in SASS, so each is counted once per copy. Predicated-off instructions count
(they take issue slots); blocks only reached by a branch inside a scope count with it.
Prints warp instructions per block and chunk (= per 64 tokens of one block) by scope and the
total. A scope table names the text its first line must hold, so an edit that moves lines
fails here instead of counting wrongly.
Does not see: dynamic trip counts other than the table's, replays of divergent paths,
instructions of slow paths the table does not name (they count with their scope: the
tables' totals are upper bounds by those).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KDA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "kernels", "kda")

# kernel -> (source, [(anchor, kind, warp executions), ...]).
# A scope is found by its anchor, text that exactly one line of the source holds: kind "open"
# is that line to its matching closing brace (a loop or `if` line that opens a brace), "in"
# that line to the end of the block it is in (the first statement of an `if` body), "line"
# that line alone. The first scope is the device function (its lines are the candidates of
# every instruction's frame).
SCOPES = {
    "prep4": ("kda_chunk64_prep4.cu", [
        ("__device__ void prep64(", "open", 8),
        ("if (tid < kC) {  // kBetaSigmoid", "open", 2),
        # a chunk with tokens past T takes the masked copy of the raw stage, a sub-block past T
        # that of the gate (the timed case has none)
        ("else raw_stage<true>(", "line", 0),
        ("else token_alphas<kGate, true>(", "line", 0),
        ("case 0: channel_pass<0>", "line", 2),
        ("case 1: channel_pass<1>", "line", 2),
        ("case 2: channel_pass<2>", "line", 2),
        ("default: channel_pass<3>", "line", 2),
        ("const int pI = pair_i(warp)", "in", 6),
        ("// the upper blocks (I < J)", "in", 2),
        # the timed case: every sub-block on the tf32 path, so the diagonal blocks by token
        # halves: two rounds on every warp, a half's staging each (stage_half, inlined: its
        # frame is the call line), the mma on 4 warps in round 0 and 8 in round 1
        ("float* const at = aop + kSub * kK * I;", "in", 16),
        ("if (h == 0) stage_half<0>(", "line", 8),
        ("else stage_half<1>(sm, I, cp, rs, a, at,", "line", 8),
        ("if (h || warp < 4) {", "open", 12),
        ("} else if (warp == 4) {  // aqk's", "open", 1),
        # the rounds by sub-block pairs (a chunk with a sub-block off the tf32 path): not timed
        ("for (int r = 0; r < 2; ++r)", "open", 0),
        ("if ((I >> 1) == r) {", "open", 0),
        ("} else {  // fp32 q^, k^, alpha rows", "open", 0),
        ("const bool kk = (warp >> 1) & 1;", "in", 0),
        ("if (!kk) {", "open", 0),
        ("} else {  // Akk rows", "open", 0),
        ("const int w4 = warp & 3;", "in", 0),
        ("if (tid < 4 * kSub) solve_diag(sm, tmb, tid);", "line", 2),
        # the solve's levels (solve_level<L>, inlined: its frame in prep64 is the call line)
        ("solve_level<1>(sm, tmb", "line", 6),
        ("solve_level<2>(sm, tmb", "line", 4),
        ("solve_level<3>(sm, tmb", "line", 2),
    ]),
    "gdn": ("kda_chunk64_prep_gdn.cu", [
        ("__device__ void prep_gdn(", "open", 8),
        ("if (tid < kC) {  // kBetaSigmoid", "open", 2),
        ("else qk_stage<true>(", "line", 0),  # the masked copy: a chunk past T (not timed)
        ("if (warp == 2) gate_scan<", "line", 1),
        ("if (tid < kC) write_tok(", "line", 2),
        # gram_block(sm, aqk, warp, lane) runs on every warp (the function's scope)
        ("if (warp < 2) gram_block(", "line", 2),
        ("else if (warp >= 6) zero_upper(", "line", 2),
        ("if (tid < 4 * kSub) solve_diag(sm, tmb, tid);", "line", 2),
        ("solve_level<1>(sm, tmb", "line", 6),
        ("solve_level<2>(sm, tmb", "line", 4),
        ("solve_level<3>(sm, tmb", "line", 2),
    ]),
}


def scope_lines(lines, anchor, kind):
    """(first, last) 1-based lines of a scope (see SCOPES)."""
    hits = [i for i, t in enumerate(lines) if anchor in t]
    if len(hits) != 1:
        raise SystemExit(f"sass_path: {len(hits)} lines hold {anchor!r} (one expected): the table is stale")
    first = hits[0]
    if kind == "line":
        return first + 1, first + 1
    depth, starts, mins = 0, [], []
    for t in lines:
        code = t.split("//")[0]
        starts.append(depth)
        low = depth
        for ch in code:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            low = min(low, depth)
        mins.append(low)
    # the depth the scope closes to: the line's lowest (a `} else {` line opens its body one
    # level below where it starts)
    d = mins[first] if kind == "open" else starts[first]
    for i in range(first + 1, len(lines)):
        if kind == "open" and mins[i] <= d:  # the line that closes the anchor's brace
            return first + 1, i + 1
        if kind == "in" and mins[i] < d:
            return first + 1, i
    raise SystemExit(f"sass_path: no end of the scope at {anchor!r}")


# kernels whose cubin holds several entries (template instances): the one counted by default
ENTRIES = {"prep4": "kda_chunk64_prep4_sm90a_f16_k128", "gdn": "kda_chunk64_prep_gdn_sm90a_f16_k128"}
INDEX_OPS = {"IMAD", "LOP3", "SHF", "LEA", "IADD3", "VIADD", "MOV", "SEL", "ISETP", "PRMT",
             "ULDC", "UMOV", "UIMAD", "S2R", "S2UR", "CS2R", "LDC", "VIMNMX", "PLOP3", "P2R", "R2P"}
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")
_LABEL = re.compile(r"^(\.L_x_\d+):")


def parse(cubin, source, body, entry=None):
    """[[(address, opcode, line or None), ...], ...]: the basic blocks of the SASS."""
    text = subprocess.run(["nvdisasm", "-gi", "-c", cubin], check=True, capture_output=True,
                          text=True).stdout
    if entry:  # a cubin of several entries: only the section of the one counted
        parts = re.split(r"^\s*\.section\s+", text, flags=re.M)
        mine = [p for p in parts if p.startswith(f".text.{entry}")]
        if len(mine) != 1:
            raise SystemExit(f"sass_path: {cubin} has no section .text.{entry}")
        text = mine[0]
    blocks, cur, frames, line = [], [], [], None
    pending = False
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("//##"):
            if not pending:
                frames, pending = [], True
            frames += [(f, int(n)) for f, n in _FRAME.findall(s)]
            continue
        if pending:
            inside = [n for f, n in frames if os.path.basename(f) == source and body[0] <= n <= body[1]]
            line = inside[0] if inside else None
            pending = False
        if _LABEL.match(s):
            if cur:
                blocks.append(cur)
            cur = []
            continue
        m = _INSTR.match(raw)
        if not m:
            continue
        ins = m.group(2).strip()
        op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
        cur.append((int(m.group(1), 16), op.split(".")[0], line))
        if op.split(".")[0] in ("BRA", "EXIT", "RET", "BRX", "JMP"):
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def count(cubin, kernel, by_opcode=False, entry=None):
    source, anchors = SCOPES[kernel]
    if os.path.getmtime(os.path.join(KDA, source)) > os.path.getmtime(cubin):
        # the scopes are source lines: a cubin from before an edit that moved lines would count
        # its instructions in the wrong scopes without any other error
        raise SystemExit(f"sass_path: {cubin} is older than kernels/kda/{source}: rebuild it")
    lines = open(os.path.join(KDA, source)).read().splitlines()
    scopes = [scope_lines(lines, a, kind) + (w,) for a, kind, w in anchors]
    body = scopes[0][:2]
    totals = collections.Counter()
    ops = collections.Counter()
    static = 0
    for blk in parse(cubin, source, body, entry or ENTRIES.get(kernel)):
        # the scope is read from the block's data and control instructions: the line info of
        # integer index math is unreliable (shared subexpressions of inlined helpers keep the
        # line of one inlining site)
        ls = [n for _, op, n in blk if n is not None and op not in INDEX_OPS]
        ls = ls or [n for _, _, n in blk if n is not None]
        best = scopes[0]
        for sc in scopes:
            inside = sum(sc[0] <= n <= sc[1] for n in ls)
            if ls and 2 * inside > len(ls) and sc[1] - sc[0] <= best[1] - best[0]:
                best = sc
        # a self-loop BRA after the final EXIT, and NOP padding, never issue
        body_ops = [op for _, op, _ in blk if op != "NOP"]
        if blk and blk[-1][1] == "BRA" and len(body_ops) == 1 and ls == []:
            continue
        static += len(body_ops)
        key = best[:3]
        totals[key] += key[2] * len(body_ops)
        for op in body_ops:
            ops[op] += key[2]
    print(f"{kernel}: {static} SASS instructions (static, without NOP)")
    print("| source lines | warp executions | warp instructions |")
    print("|---|---|---|")
    for (first, last, w), n in sorted(totals.items(), key=str):
        print(f"| {first}-{last} | {w} | {n} |")
    print(f"total warp instructions per 64 tokens of one block: {sum(totals.values())}")
    if by_opcode:
        print(", ".join(f"{op} {n}" for op, n in ops.most_common()))
    return sum(totals.values())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cubin")
    ap.add_argument("kernel", choices=sorted(SCOPES))
    ap.add_argument("--by-opcode", action="store_true")
    ap.add_argument("--entry", help="the entry of a cubin of several (default ENTRIES[KERNEL])")
    a = ap.parse_args()
    count(a.cubin, a.kernel, a.by_opcode, a.entry)
    sys.exit(0)
