#!/usr/bin/env python3
"""The quick start's main job: verify every shipped manifest, fragment and example.

Owns: finding the committed JSON under manifests/ and examples/ (`*.json`, `*.json.in`) and
the op manifests kernel folders pin into build/manifests/ (not its test/ fixtures),
classifying each by its top-level keys (a complete manifest has `programs`; a merge fragment
has `modules`/`ops` only; a call binding has `op`/`args` and is listed, not verified), choosing
the file to verify (a template that names local kernels through `@SHA256:<cubin>@` is verified
through its pinned build copy: build/<same path without .in>, with --cubins so the hashes are
checked against the cubins beside it), running build/bin/kernrt-verify and printing one verdict
per file plus a summary. Exit 0 when every verified file passes, 1 when any is rejected or the
verifier could not read a file, 2 when it could not run at all. A template whose pinned
copy was not built (kernels off, or no pin rule for it yet) is listed as not built.

GPU hook: with a CUDA device and build/bin/program_io, every runnable attention example (all
of its modules are local, pinned cubins; example_io.supports() knows its buffers) also runs through program_io on generated inputs, and its
output is compared with a float64 reference (tools/gen/example_io.py). Without a device this
step is skipped and says so.

Does not check: the manifest rules itself (kernrt-verify owns them) or the non-local TRTLLM-GEN
cubins (never mirrored; their modules are verified by hash shape only).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOTS = ("manifests", "examples")
PLACEHOLDER = "@SHA256:"


def committed_json():
    out = []
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, root)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".json") or name.endswith(".json.in"):
                    out.append(os.path.relpath(os.path.join(dirpath, name), REPO))
    return out


def classify(text):
    try:
        top = json.loads(text)
    except ValueError:
        return "manifest"  # let the verifier report the syntax error with line:column
    if not isinstance(top, dict):
        return "other"
    if "programs" in top or "schema_version" in top:
        return "manifest"
    if set(top) & {"modules", "ops"}:
        return "fragment"
    if {"op", "args"} <= set(top):
        return "call"
    return "other"


def plan(build_dir):
    """(rel, kind, path to verify or None, reason) for every committed JSON file."""
    rows = []
    for rel in committed_json():
        with open(os.path.join(REPO, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        kind = classify(text)
        if kind in ("call", "other"):
            rows.append((rel, kind, None, "a call binding, not a manifest" if kind == "call"
                         else "not a manifest"))
            continue
        if PLACEHOLDER in text:
            pinned = os.path.join(build_dir, rel[:-3] if rel.endswith(".in") else rel)
            rows.append((rel, kind + "+pinned", pinned, None))
        else:
            rows.append((rel, kind, rel, None))
    # Op manifests that kernel folders pin straight into build/manifests/ (the test kernels'
    # fixtures under manifests/test/ belong to the runtime's tests and are left to them).
    covered = {os.path.abspath(r[2]) for r in rows if r[2] and os.path.isabs(r[2])}
    pinned_root = os.path.join(build_dir, "manifests")
    for dirpath, dirnames, filenames in os.walk(pinned_root):
        dirnames[:] = sorted(d for d in dirnames if not (dirpath == pinned_root and d == "test"))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not name.endswith(".json") or path in covered:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                kind = classify(f.read())
            if kind in ("manifest", "fragment"):
                rows.append((shown(path), kind + "+pinned", path, None))
    return rows


def shown(path):
    """A path as the user would type it from the repository root."""
    rel = os.path.relpath(path, REPO) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def verify(verifier, cubins, kind, path):
    cmd = [verifier]
    if kind.startswith("fragment"):
        cmd.append("--fragment")
    if kind.endswith("+pinned"):
        cmd += ["--cubins", cubins]
    cmd.append(path)
    print("$ " + " ".join(shown(c) for c in cmd), flush=True)
    return subprocess.call(cmd, cwd=REPO)


def have_gpu():
    if not os.path.exists("/dev/nvidiactl"):
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_examples(build_dir, runnable, device_present=have_gpu):
    """GPU hook: program_io over every runnable attention example, checked against the reference."""
    program_io = os.path.join(build_dir, "bin", "program_io")
    sys.path.insert(0, os.path.join(REPO, "tools", "gen"))
    sys.dont_write_bytecode = True
    import example_io
    runnable = [(rel, path) for rel, path in runnable if example_io.supports(path)]
    if not runnable:
        print("gpu: no attention example names only local kernels; nothing to run")
        return 0
    if not device_present():
        print("gpu: no CUDA device here; skipped running " + ", ".join(r for r, _ in runnable))
        return 0
    if not os.access(program_io, os.X_OK):
        print(f"gpu: {os.path.relpath(program_io, REPO)} not built; skipped running examples")
        return 0
    failed = 0
    for rel, path in runnable:
        with tempfile.TemporaryDirectory(prefix="kernrt-example-") as work:
            case = example_io.write_inputs(path, work)
            cmd = [program_io, "--manifest", path, "--cubins",
                   os.path.join(build_dir, "cubins", "run")]
            for var, value in sorted(case["vars"].items()):
                cmd += ["--vars", f"{var}={value}"]
            for name in example_io.INPUTS:
                cmd += ["--in", f"{name}={os.path.join(work, name + '.bin')}"]
            cmd += ["--out", f"out={os.path.join(work, 'out.bin')}", "--graph", "--iters", "9"]
            print("$ " + " ".join(cmd), flush=True)
            if subprocess.call(cmd) != 0:
                print(f"{rel}: program_io failed")
                failed += 1
                continue
            ok, summary = example_io.check(path, work)
            print(f"{rel}: {'matches' if ok else 'DIFFERS FROM'} the float64 reference ({summary})")
            failed += 0 if ok else 1
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(description="Verify every shipped manifest and example.")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                        help="read kernrt-verify, cubins and pinned copies from this build tree")
    parser.add_argument("--no-gpu", action="store_true", help="skip the program_io GPU hook")
    args = parser.parse_args(argv)
    build_dir = os.path.abspath(args.build_dir)
    verifier = os.path.join(build_dir, "bin", "kernrt-verify")
    if not os.access(verifier, os.X_OK):
        print(f"verify_shipped: {verifier} not found; build first (tools/quickstart.sh)",
              file=sys.stderr)
        return 2
    cubins = os.path.join(build_dir, "cubins", "run")
    results, runnable = [], []
    for rel, kind, path, reason in plan(build_dir):
        if path is None:
            results.append((rel, kind, "listed: " + reason))
        elif not os.path.exists(os.path.join(REPO, path)):
            # No pin rule ran: the kernels are off, or its cubin target does not exist yet.
            # ctest's manifests.*_pinned_verify entries fail if a pin rule exists and breaks.
            results.append((rel, kind, "not built: no " + shown(path)))
        else:
            code = verify(verifier, cubins, kind, path)
            results.append((rel, kind, {0: "verified", 1: "REJECTED"}.get(code, f"ERROR {code}")))
            if code == 0 and kind == "manifest+pinned":
                runnable.append((rel, path))
    print("\nverdicts:")
    width = max(len(r) for r, _, _ in results)
    for rel, kind, verdict in results:
        print(f"  {rel:<{width}}  {kind:<16} {verdict}")
    bad = [r for r in results if r[2].startswith(("REJECTED", "ERROR"))]
    failed_runs = 0 if args.no_gpu else run_examples(build_dir, runnable)
    verified = sum(1 for r in results if r[2] == "verified")
    print(f"\n{verified} verified, {len(bad)} failed, {len(results) - verified - len(bad)} listed"
          + (f", {failed_runs} example run(s) failed" if failed_runs else ""))
    return 1 if bad or failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
