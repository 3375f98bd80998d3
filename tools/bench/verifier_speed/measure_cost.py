#!/usr/bin/env python3
"""Measure what kernrt-verify costs on given files: wall time, CPU time (user + system),
peak RSS (from /usr/bin/time -v) and bytes printed, median of RUNS runs per file.

Each timed run sends stdout to /dev/null; one more run counts the bytes printed (that run
is not timed). Prints one markdown table row per file. Used for
validation/verifier-speed.md (the amplification case of gen_amplification.py and the
50 MB manifest of gen_manifest.py --layers 2800), before and after a change, by running it
once per binary. Python 3 standard library only. Usage:
  measure_cost.py --verifier build/bin/kernrt-verify [--runs 5] FILE...
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
    return r.returncode if r.returncode < 128 else -1, seconds, cpu, rss_mb


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
    ap.add_argument("--verifier", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    print("| file | bytes | exit | wall s (median) | CPU s (median) | peak RSS MB (median) | printed bytes |")
    print("|---|---|---|---|---|---|---|")
    for f in a.files:
        cmd = [a.verifier, f]
        runs = [timed(cmd) for _ in range(a.runs)]
        codes = {r[0] for r in runs}
        med = lambda i: statistics.median(r[i] for r in runs)
        print("| %s | %s | %s | %.3f | %.3f | %.1f | %s |" % (
            os.path.basename(f), format(os.path.getsize(f), ","), "/".join(map(str, sorted(codes))),
            med(1), med(2), med(3), format(printed_bytes(cmd), ",")), flush=True)


if __name__ == "__main__":
    main()
