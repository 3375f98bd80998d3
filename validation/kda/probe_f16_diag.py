"""Probe for kernels/kda/chunk64_prep3.md "Against the budget": would the diagonal 16 x 16
blocks work with f16 operands relative to token 7 (the shipped tf32 form's factors f, 1 / f,
in f16 instead of tf32; in range when every channel's P, F >= 2^-14, else the fp32 pairs)?
Prints, per gate case, the o / final-state error of chunk64_model's "f16" plan with the tf32
diagonal and with the f16 one, and how many 16-token blocks the f16 criterion keeps off the
fp32 pairs (the counts include the chunk-16 model's blocks that errors() also runs).
Usage: python3 validation/kda/probe_f16_diag.py  (T 512, HV 4; about a minute). Not a test.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk64_model as m  # noqa: E402
import chunk_model as cm  # noqa: E402

SHIPPED = cm.intra16
LOW = 2.0 ** -14  # smallest f16 normal: q f and k / f stay within f16's normal range
STAT = {"f16": 0, "pairs": 0}


def intra16_f16(qc, kc, ac, bc, kda=True, tf32_ok=True):
    """chunk_model.intra16 with f16 operands where the f16 criterion holds."""
    C, K = kc.shape
    f, inv = np.ones_like(ac), np.ones_like(ac)
    P, F = np.ones(K, np.float32), np.ones(K, np.float32)
    with np.errstate(over="ignore", divide="ignore"):
        for t in range(6, -1, -1):
            P = P * ac[t + 1]
            inv[t], f[t] = P, np.float32(1) / P
        for t in range(8, C):
            F = F * ac[t]
            f[t], inv[t] = F, np.float32(1) / F
    if kda and tf32_ok and np.all(P >= LOW) and np.all(F >= LOW):
        STAT["f16"] += 1
        ki = cm.f16(kc * inv)
        Aqk = np.tril(cm.mm(cm.f16(qc * f), ki.T))
        Akk = (bc[:, None] * np.tril(cm.mm(cm.f16(kc * f), ki.T), -1)).astype(np.float32)
        return Aqk, Akk
    STAT["pairs"] += 1
    return SHIPPED(qc, kc, ac, bc, kda, tf32_ok)


if __name__ == "__main__":
    for gates, lb in (("init", None), ("harsh", None), ("init", -5.0)):
        for name, fn in (("tf32 diagonal", SHIPPED), ("f16 diagonal", intra16_f16)):
            cm.intra16 = fn
            STAT.update(f16=0, pairs=0)
            e = m.errors(gates, 512, 4, lb, plans={"f16": m.PLANS["f16"]})["f16"]
            extra = f", blocks f16 / pairs {STAT['f16']} / {STAT['pairs']}" if fn is not SHIPPED else ""
            print(f"{gates}{'' if lb is None else f' lb {lb:g}'}: {name}: o {e[0]:.3e}, state {e[1]:.3e}{extra}")
    cm.intra16 = SHIPPED
