#!/usr/bin/env python3
"""The hostile catalogue of issue 16: every case of hostile/catalogue.json through the built CLIs.

Owns: turning each catalogue case into a file in a folder (--keep DIR keeps it), running
kernrt-verify (text and --json), program_io and kernrt-fetch on it as a user would, and
checking that each case is refused as the catalogue says (exit code, the JSON pointer of
one refusal and a phrase of its message). On every manifest case it also checks what must
hold for any hostile input: a location on every reported problem, one verdict line only
(no name can print a forged `FILE: verified` line), no control byte in the text output,
at most --max-errors problems listed, < 64 KiB of output, < 5 s and < 100 MB per run.
Usage errors (bad option values holding escapes) are printed escaped too, and memory
that runs out (an address-space limit) ends every CLI with exit 2 naming the file, never
with a signal.
Does not check: the C ABI (runtime/tests/test_c_api.cpp has those cases) or what a
verified manifest does on a device.

Usage: hostile_catalogue.py --verify BIN [--program-io BIN] [--fetch BIN] [--keep DIR]
Exit 0 when every case holds, 1 with one line per failed check otherwise.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
TIMEOUT_S = 20          # a run that blocks (a FIFO read) is killed and reported
MAX_SECONDS = 5.0       # the audit's amplification case took 17.7 s
MAX_RSS_KIB = 100 * 1024
MAX_OUTPUT = 64 << 10
MAX_ERRORS = 100        # kernrt-verify's default --max-errors

failures = []


def fail(case, what):
    failures.append(f"{case}: {what}")


def expand(value, lets):
    """${name} in every string of `value` (keys too) replaced by its generated string."""
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+)\}", lambda m: lets[m.group(1)], value)
    if isinstance(value, list):
        return [expand(v, lets) for v in value]
    if isinstance(value, dict):
        return {expand(k, lets): expand(v, lets) for k, v in value.items()}
    return value


def tokens(pointer):
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def parent_of(doc, pointer):
    ts = tokens(pointer)
    node = doc
    for t in ts[:-1]:
        node = node[int(t)] if isinstance(node, list) else node[t]
    return node, ts[-1]



def apply(doc, edit):
    op, pointer = edit[0], edit[1]
    if op == "set":
        node, key = parent_of(doc, pointer)
        if isinstance(node, list):
            node[int(key)] = edit[2]
        else:
            node[key] = edit[2]
    elif op == "remove":
        node, key = parent_of(doc, pointer)
        del node[int(key) if isinstance(node, list) else key]
    elif op == "append":  # ["append", pointer, value, count]
        node, key = parent_of(doc, pointer)
        target = node[int(key)] if isinstance(node, list) else node[key]
        target.extend(json.loads(json.dumps(edit[2])) for _ in range(edit[3]))
    elif op == "rename":  # ["rename", object pointer, old key, new key]: keeps key order
        node, _ = parent_of(doc, pointer + "/-")  # the object itself
        items = [(edit[3] if k == edit[2] else k, v) for k, v in node.items()]
        node.clear()
        node.update(items)
    elif op == "copy":  # ["copy", from, to]
        src, skey = parent_of(doc, pointer)
        dst, dkey = parent_of(doc, edit[2])
        dst[dkey] = json.loads(json.dumps(src[skey]))
    else:
        raise ValueError(f"unknown edit {op}")


def run(argv, env=None, timeout=TIMEOUT_S, address_space=None):
    """(exit code or 'timeout', stdout, stderr, seconds, peak RSS KiB) of one child, with an
    optional address-space limit (bytes)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             env=dict(os.environ, **(env or {})),
                             preexec_fn=limit if address_space else None)
        code, rss = None, 0
        while code is None:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                code, rss = os.waitstatus_to_exitcode(status), usage.ru_maxrss
            elif time.monotonic() - start > timeout:
                p.kill()
                os.wait4(p.pid, 0)
                code = "timeout"
            else:
                time.sleep(0.01)
        p.returncode = code  # reaped above: Popen must not wait again
        took = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read(), took, rss


def check_costs(case, took, rss, out):
    if took > MAX_SECONDS:
        fail(case, f"took {took:.1f} s (limit {MAX_SECONDS} s)")
    if rss > MAX_RSS_KIB:
        fail(case, f"peak RSS {rss // 1024} MiB (limit {MAX_RSS_KIB // 1024} MiB)")
    if len(out) > MAX_OUTPUT:
        fail(case, f"printed {len(out)} bytes (limit {MAX_OUTPUT})")


def check_text(case, path, out, expect):
    """The human-readable form: one verdict line, a location on every problem, no controls."""
    text = out.decode("utf-8", "replace")
    if any(b < 0x20 and b != 0x0A or b == 0x7F for b in out):
        fail(case, "text output holds a control byte")
    lines = text.splitlines()
    verdicts = [l for l in lines if not l.startswith("  ")]
    if len(verdicts) != 1 or not verdicts[0].endswith(": manifest failed verification:"):
        fail(case, f"expected one `FILE: manifest failed verification:` line, got {verdicts[:3]!r}")
    problems = [l for l in lines if l.startswith("  - ")]
    if not problems or len(problems) > MAX_ERRORS:
        fail(case, f"{len(problems)} problem lines (expected 1..{MAX_ERRORS})")
    for l in problems:
        if not re.match(r"  - (/|\d+:\d+: )", l):
            fail(case, f"problem without a location: {l[:120]!r}")
            break
    if "omitted" in expect and f"\u2026 and {expect['omitted']:,} more" not in text:
        fail(case, f"no `\u2026 and {expect['omitted']:,} more` line")
    if "text" in expect and expect["text"] not in text:
        fail(case, f"text output lacks {expect['text'][:120]!r}")


def at(path, expect):
    if "pointer_prefix" in expect:
        return path.startswith(expect["pointer_prefix"])
    return path == expect["pointer"]


def check_json(case, out, expect):
    try:
        result = json.loads(out)
    except ValueError as e:
        return fail(case, f"--json output is not one JSON object: {e}")
    if result.get("verdict") != "rejected":
        return fail(case, f"verdict {result.get('verdict')!r}, expected 'rejected'")
    errors = result.get("errors", [])
    if "line" in expect:
        if not any(e.get("line") == expect["line"] and expect["message"] in e.get("message", "") for e in errors):
            fail(case, f"no syntax error at line {expect['line']} with {expect['message']!r}: {errors[:2]}")
    elif not any(at(e.get("path", ""), expect) and expect["message"] in e.get("message", "") for e in errors):
        where = expect.get("pointer", expect.get("pointer_prefix", ""))
        shown = [(e.get("path", "")[:100], e.get("message", "")[:160]) for e in errors[:3]]
        fail(case, f"no error at {where[:100]!r} with {expect['message'][:100]!r}; got {shown}")
    if "omitted" in expect and result.get("omitted") != expect["omitted"]:
        fail(case, f"omitted {result.get('omitted')}, expected {expect['omitted']}")


def manifest_cases(cat, lets, folder, verify):
    base_text = open(os.path.join(ROOT, cat["base"]), encoding="utf-8").read()
    base = json.loads(base_text)
    for case in cat["manifests"]:
        name = case["name"]
        if "text" in case:
            text = expand(case["text"], lets)
        elif "replace" in case:
            text = base_text
            for old, new in case["replace"]:
                if old not in text:
                    fail(name, f"`replace` does not find {old!r} in the base")
                text = text.replace(old, expand(new, lets))
        else:
            doc = json.loads(json.dumps(base))
            for edit in case["edits"]:
                apply(doc, expand(edit, lets))
            text = json.dumps(doc, ensure_ascii=False)
        path = os.path.join(folder, expand(case.get("file", name + ".json"), lets))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        expect = expand(case["expect"], lets)
        code, out, err, took, rss = run([verify, path])
        if code != expect["exit"]:
            fail(name, f"exit {code}, expected {expect['exit']}: {err[:200]!r}")
        check_costs(name, took, rss, out)
        check_text(name, path, out, expect)
        code, out, err, took, rss = run([verify, "--json", path])
        if code != expect["exit"]:
            fail(name + " --json", f"exit {code}, expected {expect['exit']}")
        check_costs(name + " --json", took, rss, out)
        check_json(name, out, expect)
    return len(cat["manifests"])


def file_cases(cat, folder, tools):
    fifo = os.path.join(folder, "pipe.json")
    os.mkfifo(fifo)
    big = os.path.join(folder, "big.json")
    with open(big, "w") as f:
        f.write("{" + " " * 4096 + "}")
    paths = {"fifo": fifo, "/dev/zero": "/dev/zero", "dir": folder,
             "missing": os.path.join(folder, "absent.json"), "big": big}
    n = 0
    for tool, argv in tools.items():
        for c in cat["inputs"]:
            path = paths[c["input"]]
            args = argv + c.get("args", "").split() + (["--manifest"] if tool == "program_io" else []) + [path]
            name = f"{tool} on {c['input']}"
            code, out, err, took, _ = run(args, env={"CUDA_VISIBLE_DEVICES": "-1"})
            if code != 2:
                fail(name, f"exit {code}, expected 2 (stderr {err[:200]!r})")
            message = c["message"].replace("${path}", path)
            if message not in err.decode("utf-8", "replace"):
                fail(name, f"stderr lacks {message!r}: {err[:300]!r}")
            n += 1
    return n


def program_io_cases(cat, folder, program_io):
    text = open(os.path.join(ROOT, "kernels/test/manifests/scratch_pair.json")).read()
    pinned = os.path.join(folder, "scratch_pair.json")
    with open(pinned, "w") as f:
        f.write(re.sub(r"@SHA256:[^@]*@", "a" * 64, text))
    with open(os.path.join(folder, "x4.bin"), "wb") as f:
        f.write(b"\0" * 32)
    subs = {"{m}": pinned, "{d}": folder, "{fifo}": os.path.join(folder, "pipe.json"),
            "{long}": "x" * 100000, "{cut}": "x" * 80}
    for c in cat["cases"]:
        args, message = c["args"], c["message"]
        for k, v in subs.items():
            args, message = args.replace(k, v), message.replace(k, v)
        name = "program_io " + c["name"]
        code, out, err, took, _ = run([program_io] + args.split(), env={"CUDA_VISIBLE_DEVICES": "-1"})
        err_text = err.decode("utf-8", "replace")
        if code != c["exit"]:
            fail(name, f"exit {code}, expected {c['exit']}: {err_text[:300]!r}")
        if message not in err_text:
            fail(name, f"stderr lacks {message!r}: {err_text[:300]!r}")
        if "CUDA" in err_text:
            fail(name, f"found only through the driver: {err_text[:200]!r}")
        if len(err) > c.get("max_stderr", MAX_OUTPUT):
            fail(name, f"{len(err)} bytes on stderr (limit {c.get('max_stderr')})")
    return len(cat["cases"])


def usage_cases(cat, folder, tools):
    """Bad option values with escapes: exit 2 and nothing on stderr a terminal interprets."""
    m = os.path.join(folder, "scratch_pair.json")
    n = 0
    for c in cat["cases"]:
        if c["tool"] not in tools:
            continue
        args = [a.replace("${evil}", cat["evil"]).replace("{m}", m) for a in c["args"]]
        name = f"{c['tool']} usage {c['args'][0][:12]!r}"
        code, out, err, _, _ = run(tools[c["tool"]][:1] + args, env={"CUDA_VISIBLE_DEVICES": "-1"})
        if code != 2:
            fail(name, f"exit {code}, expected 2")
        if any(b < 0x20 and b != 0x0A or b == 0x7F for b in out + err):
            fail(name, f"a control byte on stdout or stderr: {err[:200]!r}")
        if any(l.startswith(b"forged.json") for l in (out + err).splitlines()):
            fail(name, "a line that reads as a verdict")
        n += 1
    return n


def memory_cases(cat, folder, tools):
    """Each CLI under address-space limits from the least it starts with up: exit 0-2 only."""
    manifest = os.path.join(folder, "memory.json")
    subprocess.run([sys.executable, os.path.join(ROOT, cat["generator"]), "--layers", str(cat["layers"]),
                    manifest], check=True, stdout=subprocess.DEVNULL)
    mib = 1 << 20
    n = 0
    for tool, argv in tools.items():
        start = 4 * mib  # the least it starts with: static initialisers that fail abort
        while start < 512 * mib and run(argv[:1] + ["--help"], address_space=start)[0] != 0:
            start += mib // 2
        args = argv + (["--json", "--manifest", manifest] if tool == "program_io" else [manifest])
        for step in range(cat["steps_mib"]):
            limit = start + step * mib
            code, _, err, _, _ = run(args, env={"CUDA_VISIBLE_DEVICES": "-1"}, address_space=limit)
            name = f"{tool} within {limit // 1024} KiB"
            if code not in (0, 1, 2):
                fail(name, f"exit {code}: {err[-300:]!r}")
            elif code == 2 and manifest.encode() not in err:
                fail(name, f"exit 2 without naming the file: {err[-300:]!r}")
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", required=True)
    ap.add_argument("--program-io")
    ap.add_argument("--fetch")
    ap.add_argument("--keep", help="write the hostile files into this folder and keep them")
    a = ap.parse_args()
    cat = json.load(open(os.path.join(HERE, "hostile", "catalogue.json"), encoding="utf-8"))
    lets = {k: v["repeat"] * v["times"] for k, v in cat["let"].items()}
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="kernrt-hostile-")
    folder = a.keep or tmp.name
    os.makedirs(folder, exist_ok=True)
    n = manifest_cases(cat, lets, folder, a.verify)
    tools = {"kernrt-verify": [a.verify]}
    if a.program_io:
        tools["program_io"] = [a.program_io]
    if a.fetch:
        tools["kernrt-fetch"] = [a.fetch, "--offline"]
    n += file_cases(cat["files"], folder, tools)
    if a.program_io:
        n += program_io_cases(cat["program_io"], folder, a.program_io)
    n += usage_cases(cat["usage"], folder, tools)
    n += memory_cases(cat["memory"], folder, tools)
    for f in failures:
        print("FAIL " + f.encode("unicode_escape").decode("ascii")[:600])
    print(f"hostile catalogue: {n} cases, {len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
