"""The generation the hybrid driver runs, as pure bookkeeping (no torch, no GPU).

Owns: sequences (their tokens fed, KV length, pages, conv and KDA pool slots), the three
allocators (KV pages, conv slots, KDA slots: slot 0 / page 0 never handed out, freed ones
reused first), and the call tables of each step as plain lists: `token`, `slot` (page * 64 +
offset of each row's position), `seq_len`, `cu_seqlens`, `pages`, `conv_lines`,
`kda_lines`, `conv_steps` (verify: a fresh conv slot per token but the last, whose state
stays in the sequence's own line), `accepted`. The schedule: two prompts of different
lengths prefilled together, 64 decode steps with a sequence joining at steps 16 and 32 and
leaving at 32 and 48 (its slots and pages reused), then speculative rounds of `steps` tokens
with partial acceptance (1..steps kept: the anchor always is), then decode again.
`plan()` lists the events; `python3 scenario.py` prints them (the CPU dry run).
Does not run anything; the driver turns each event into kernrt calls and checks.
"""
import random

PAGE = 64


class Pool:
    """Hands out ids 1..n-1, lowest free first (freed ids are reused)."""

    def __init__(self, n, what):
        self.free, self.what = list(range(1, n)), what

    def take(self):
        if not self.free:
            raise RuntimeError(f"out of {self.what}")
        self.free.sort()
        return self.free.pop(0)

    def give(self, i):
        if i in self.free or i <= 0:
            raise RuntimeError(f"{self.what} {i} given back twice")
        self.free.append(i)


class Seq:
    def __init__(self, sid, prompt):
        self.sid, self.prompt = sid, list(prompt)
        self.L = 0                 # tokens whose KV / state is in the pools
        self.last = None           # the next token to feed (the model's last answer)
        self.pages = []
        self.conv = self.kda = 0


class Scheduler:
    def __init__(self, d, conv_slots, kda_slots, kv_pages, seed=7):
        self.d = d
        self.pages = Pool(kv_pages, "KV pages")
        self.conv = Pool(conv_slots, "conv slots")
        self.kda = Pool(kda_slots, "KDA slots")
        self.rng = random.Random(seed)

    def admit(self, seq):
        seq.conv, seq.kda = self.conv.take(), self.kda.take()

    def retire(self, seq):
        self.conv.give(seq.conv)
        self.kda.give(seq.kda)
        for p in seq.pages:
            self.pages.give(p)
        seq.pages, seq.conv, seq.kda = [], 0, 0

    def slot_of(self, seq, pos):
        while len(seq.pages) <= pos // PAGE:
            seq.pages.append(self.pages.take())
        return seq.pages[pos // PAGE] * PAGE + pos % PAGE

    def tables(self, seqs, rows):
        """Tables of one call: rows[i] = the tokens sequence i feeds (its KV goes at
        positions L .. L + len - 1)."""
        d = self.d
        t = {"token": [], "slot": [], "cu_seqlens": [0], "seq_len": [], "pages": [],
             "conv_lines": [s.conv for s in seqs], "kda_lines": [s.kda for s in seqs]}
        for s, r in zip(seqs, rows):
            t["token"] += r
            t["slot"] += [self.slot_of(s, s.L + i) for i in range(len(r))]
            t["cu_seqlens"].append(t["cu_seqlens"][-1] + len(r))
            t["seq_len"].append(s.L + len(r))
            t["pages"].append(s.pages + [0] * (d.cap.max_pages - len(s.pages)))
        return t

    def verify_lines(self, seqs):
        """conv_steps [steps][seqs]: a fresh slot for the state after tokens 0..steps-2; the
        state after the last token stays in the sequence's line (0 = not written)."""
        fresh = [[self.conv.take() for _ in seqs] for _ in range(self.d.steps - 1)]
        return fresh + [[0] * len(seqs)]

    def roll(self, seqs, steps_lines, accepted):
        """After a verify: each sequence keeps the conv line of its last accepted token; the
        other lines go back to the pool."""
        for i, (s, n) in enumerate(zip(seqs, accepted)):
            keep = steps_lines[n - 1][i] if n < self.d.steps else s.conv
            for row in steps_lines[:-1]:
                if row[i] != keep:
                    self.conv.give(row[i])
            if keep != s.conv:
                self.conv.give(s.conv)
                s.conv = keep


def plan(d, decode_steps=64, rounds=3, seed=11):
    """The events: ("prefill", [seq...]), ("decode", [seq...]), ("verify", [seq...], drafts,
    accepted), ("leave", seq). Prompts are random token ids; drafts random too (acceptance is
    the driver's choice: states must be right whatever was accepted)."""
    rng = random.Random(seed)
    prompt = lambda n: [rng.randrange(d.vocab) for _ in range(n)]
    a, b = Seq(0, prompt(37)), Seq(1, prompt(100))
    c, e = Seq(2, prompt(65)), Seq(3, prompt(5))
    ev = [("prefill", [a, b])]
    live = [a, b]
    for step in range(decode_steps):
        if step == 16:
            ev.append(("prefill", [c]))
            live.append(c)
        if step == 32:
            ev.append(("leave", a))
            live.remove(a)
            ev.append(("prefill", [e]))
            live.append(e)
        if step == 48:
            ev.append(("leave", b))
            live.remove(b)
        ev.append(("decode", list(live)))
    acc = [[3, 8], [1, 5], [8, 2]]
    for r in range(rounds):
        drafts = [[rng.randrange(d.vocab) for _ in range(d.steps - 1)] for _ in live]
        ev.append(("verify", list(live), drafts, [min(x, d.steps) for x in acc[r % len(acc)][:len(live)]]))
        ev.append(("decode", list(live)))
    return ev


def dry_run(d, conv_slots=80, kda_slots=80, kv_pages=1024):
    """Walks the plan through the scheduler (tables, slot reuse, rollback) without a GPU;
    returns (events, the last tables) and raises on any bookkeeping error."""
    sch = Scheduler(d, conv_slots, kda_slots, kv_pages)
    log = []
    for e in plan(d):
        kind = e[0]
        if kind == "leave":
            sch.retire(e[1])
            log.append(f"leave seq {e[1].sid}")
            continue
        seqs = e[1]
        if kind == "prefill":
            for s in seqs:
                sch.admit(s)
            t = sch.tables(seqs, [s.prompt for s in seqs])
            for s in seqs:
                s.L = len(s.prompt)
                s.last = 0
        elif kind == "decode":
            t = sch.tables(seqs, [[s.last] for s in seqs])
            for s in seqs:
                s.L += 1
        else:
            drafts, accepted = e[2], e[3]
            t = sch.tables(seqs, [[s.last] + dr for s, dr in zip(seqs, drafts)])
            lines = sch.verify_lines(seqs)
            sch.roll(seqs, lines, accepted)
            for s, n in zip(seqs, accepted):
                s.L += n
        log.append(f"{kind:7s} seqs {[s.sid for s in seqs]} rows {len(t['token'])} "
                   f"seq_len {t['seq_len']} conv {t['conv_lines']} kda {t['kda_lines']}")
    return log


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "runtime", "python"))
    from kernrt.gen import hybrid
    for line in dry_run(hybrid.Desc()):
        print(line)
