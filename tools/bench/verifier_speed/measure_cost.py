#!/usr/bin/env python3
"""Measure what kernrt-verify costs on given files: wall time, CPU time (user + system),
peak RSS (from /usr/bin/time -v) and bytes printed, median of RUNS runs per file.

Several verifiers (before and after a change) are run interleaved, one run of each in
turn, so a shared machine's changing load falls on all of them alike. Each timed run sends
stdout to /dev/null; one more run counts the bytes printed (not timed). Prints one
markdown table row per file and verifier. Used for validation/verifier-speed.md (the
amplification case of gen_amplification.py and the 50 MB manifest of gen_manifest.py
--layers 2800). Python 3 standard library only. Usage:
  measure_cost.py --verifier before=OLD/bin/kernrt-verify --verifier after=build/bin/kernrt-verify \
    [--runs 5] FILE...
"""
import argparse
import os
import re
import statistics
import subprocess


def timed(cmd):
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, errors="replace")
    field = lambda name: re.search(re.escape(name) + r": (.*)", r.stderr).group(1).strip()
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
    seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    rss_mb = int(field("Maximum resident set size (kbytes)")) / 1024.0
    status = re.search(r"Exit status: (\d+)", r.stderr)
    return int(status.group(1)) if status else -1, seconds, cpu, rss_mb


def printed_bytes(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = 0
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        n += len(chunk)
    p.wait()
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verifier", action="append", required=True, metavar="LABEL=PATH")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    verifiers = [v.split("=", 1) if "=" in v else (v, v) for v in a.verifier]
    print("| file | bytes | verifier | exit | wall s | CPU s | peak RSS MB | printed bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for f in a.files:
        runs = {label: [] for label, _ in verifiers}
        for _ in range(a.runs):
            for label, path in verifiers:
                runs[label].append(timed([path, f]))
        for label, path in verifiers:
            rs = runs[label]
            med = lambda i: statistics.median(r[i] for r in rs)
            codes = "/".join(str(c) for c in sorted({r[0] for r in rs}))
            print("| %s | %s | %s | %s | %.3f | %.3f | %.1f | %s |" % (
                os.path.basename(f), format(os.path.getsize(f), ","), label, codes, med(1), med(2),
                med(3), format(printed_bytes([path, f]), ",")), flush=True)


if __name__ == "__main__":
    main()
