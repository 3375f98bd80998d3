"""What the families' generators share: the committed-file JSON style, and the `write` /
`diff` / `check` command line over a generator's files.

Owns: `dump` (JSON with short values on one line, <= 96 columns, longer ones expanded, and a
final newline: the style of every generated .json.in file), `field` (a pack field by offset),
`calls` and `extent` (the walk over a complete manifest's calls that the families' checks
share), `checked_examples` (example manifests through a family's check into files), `emit` (a
manifest to a file or stdout, for the one-manifest CLIs), and `main`, which writes a generator's files into a checkout, diffs them against it (exit 1
naming each stale file and the command that rewrites it), or runs its `check` on manifests.
Does not check: what the files contain (each generator's check and the ctests do).
"""
import argparse
import json
import os
import sys


def _fmt(o, ind):
    flat = json.dumps(o)
    if not isinstance(o, (dict, list)) or len(flat) + ind <= 96:
        return flat
    pad = " " * (ind + 2)
    if isinstance(o, dict):
        items = [f"{pad}{json.dumps(k)}: {_fmt(v, ind + 2)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * ind + "}"
    return "[\n" + ",\n".join(pad + _fmt(v, ind + 2) for v in o) + "\n" + " " * ind + "]"


def dump(obj):
    """The committed-file style of a manifest or fragment."""
    return _fmt(obj, 0) + "\n"


def field(fields, at):
    """The pack field at byte offset `at`, or None."""
    for f in fields:
        if f["at"] == at:
            return f
    return None


def calls(m):
    """(pointer of the call's args, call, its op or {}) for every call of every program of a
    complete manifest, programs in name order."""
    ops = m.get("ops", {})
    for pname, prog in sorted(m.get("programs", {}).items()):
        for ci, call in enumerate(prog.get("calls", [])):
            yield f"/programs/{pname}/calls/{ci}/args", call, ops.get(call.get("op")) or {}


def extent(m, e):
    """A shape extent: a var's max when it names one, else the number itself."""
    return m.get("vars", {})[e]["max"] if isinstance(e, str) else e


def checked_examples(examples, check, folder, error):
    """{folder/<name>.json.in: text} of every example manifest; `error` (the family's GenError)
    names the first example whose check finds problems."""
    files = {}
    for name, m in examples.items():
        problems = check(m)
        if problems:
            raise error(f"example `{name}`: " + "; ".join(f"{p}: {msg}" for p, msg in problems))
        files[f"{folder}/{name}.json.in"] = dump(m)
    return files


def emit(m, output=None):
    """Writes manifest m as indented JSON to `output` (its folder created) or to stdout."""
    text = json.dumps(m, indent=1) + "\n"
    if output:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def main(argv, *, prog, description, outputs, check, error, repo, what="the examples"):
    """`prog write|diff [--root R]` over outputs() (path -> text), `prog check FILE...` over
    check(manifest) -> [(pointer, message)]. Exit 0 ok, 1 stale files / problems / `error`."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help=f"write {what} into the repository")
    w.add_argument("--root", default=repo)
    d = sub.add_parser("diff", help="exit 1 if a committed generated file differs from the generator")
    d.add_argument("--root", default=repo)
    c = sub.add_parser("check", help="refuse calls whose buffers cannot match their op")
    c.add_argument("manifests", nargs="+")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            bad = 0
            for path in a.manifests:
                with open(path) as f:
                    for ptr, msg in check(json.load(f)):
                        print(f"{path}: {ptr}: {msg}", file=sys.stderr)
                        bad += 1
            return 1 if bad else 0
        stale = 0
        for rel, text in sorted(outputs().items()):
            path = os.path.join(a.root, rel)
            if a.cmd == "write":
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
                continue
            current = None
            if os.path.exists(path):
                with open(path) as f:
                    current = f.read()
            if current != text:
                print(f"{rel}: differs from `{prog} write`", file=sys.stderr)
                stale += 1
        return 1 if stale else 0
    except error as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
