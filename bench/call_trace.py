#!/usr/bin/env python3
"""Source files one hk_get_kernel call visits, and how often it re-enters a file it had left.

For each tree given (a checkout built with -finstrument-functions, see bench/call_trace.md):
  1. `hubkern publish` the rmsnorm hub dir (build/kernels/rmsnorm/hub) into a store,
     `hubkern serve --trust econ --access-log` it on loopback;
  2. run build/tests/hk-get-repeat against it with bench/call_trace_hook.so in LD_PRELOAD
     (compiled here from bench/call_trace_hook.c), two "get" lines: a cold call (empty cache) and a
     warm one (same process, default freshness window);
  3. cut the main thread's events at the outermost hk_get_kernel frame, resolve every function to its
     source file with addr2line, and walk the frame stack: the current file is the file of the frame
     on top after each enter/exit; a transition is a change of that file; a re-entry is a transition
     into a file already visited earlier in the same call (a return to a caller in a file counts).
Also: exported functions of libhubkern.so (nm -D --defined-only | ' T ') and the 10 longest functions
in libhub/ cache/ util/ server/ cli/ (brace-matching scan).

  python3 bench/call_trace.py --tree before=/work/trace-before --tree after=/work/trace-after \
      [--build build-trace] [--window-off] [--md bench/call_trace.md]
"""
import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = "econ/rmsnorm"


def sh(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True, **kw).stdout


def clean_env(**extra):
    e = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_TOKEN", "KERNELS_CACHE", "HUBKERN_FRESHNESS_S", "LD_PRELOAD"):
        e.pop(k, None)
    e.update(HF_HUB_DISABLE_IMPLICIT_TOKEN="1", HUBKERN_RETRY_BASE_MS="20", OMP_NUM_THREADS="1")
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Mirror:
    def __init__(self, hubkern, store):
        cmd = [hubkern, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0", "--trust", "econ",
               "--access-log"]
        self.p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=clean_env())
        line = self.p.stdout.readline().strip()
        if not line.startswith("listening on http://"):
            raise RuntimeError(f"serve did not start: {line!r} {self.p.stderr.read() if self.p.poll() is not None else ''}")
        self.url = line.split(" ", 2)[2]
        self.lines = []
        self.t = threading.Thread(target=self._drain, daemon=True)
        self.t.start()

    def _drain(self):
        for line in self.p.stderr:
            self.lines.append(line.rstrip("\n"))

    def access(self):
        """Access-log lines so far, once the log has stopped growing."""
        last, since = -1, time.time()
        while True:
            cur = [x for x in self.lines if " access " in x]
            if len(cur) != last:
                last, since = len(cur), time.time()
            elif time.time() - since > 0.4:
                return cur
            time.sleep(0.05)

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=10)


def build_hook(work):
    so = pathlib.Path(work) / "call_trace_hook.so"
    sh("gcc", "-O2", "-shared", "-fPIC", "-o", so, HERE / "call_trace_hook.c", "-ldl", "-lpthread")
    return so


def elf_exec_base(path):
    """0 for a PIE/shared object; the first PT_LOAD vaddr for a non-PIE executable."""
    out = sh("readelf", "-lhW", path)
    if "EXEC (" not in out:
        return 0
    m = re.search(r"^\s*LOAD\s+0x[0-9a-f]+\s+0x([0-9a-f]+)", out, re.M)
    return int(m.group(1), 16) if m else 0


def resolve(tree, addrs):
    """{(module, offset): (function, source file relative to the tree or a label)}"""
    by_mod = collections.defaultdict(set)
    for mod, off in addrs:
        by_mod[mod].add(off)
    res = {}
    for mod, offs in by_mod.items():
        offs = sorted(offs)
        if mod == "?" or not os.path.exists(mod):
            for o in offs:
                res[(mod, o)] = ("?", "?")
            continue
        base = elf_exec_base(mod)
        out = sh("addr2line", "-f", "-e", mod, *[hex(o + base) for o in offs]).splitlines()
        for i, o in enumerate(offs):
            fn, loc = out[2 * i], out[2 * i + 1]
            f = loc.rsplit(":", 1)[0]
            if f in ("??", ""):
                f = "[" + os.path.basename(mod) + "]"
            else:
                try:
                    f = str(pathlib.Path(os.path.normpath(f)).relative_to(tree))
                except ValueError:
                    pass
            res[(mod, o)] = (fn, f)
    return res


def parse_events(path):
    ev = []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) != 4:
                continue
            ev.append((parts[0], int(parts[1]), parts[2], int(parts[3], 16)))
    return ev


def calls(events, gk):
    """Segments [(main-thread events, other-thread event count)] of the outermost hk_get_kernel frames."""
    segs, cur, depth, tid, other = [], None, 0, None, 0
    for kind, t, mod, off in events:
        key = (mod, off)
        if cur is None:
            if kind == "E" and key == gk:
                cur, depth, tid, other = [(kind, key)], 1, t, 0
            continue
        if t != tid:
            other += 1
            continue
        cur.append((kind, key))
        if key == gk:
            depth += 1 if kind == "E" else -1
            if depth == 0:
                segs.append((cur, other))
                cur = None
    return segs


def walk(seg, files):
    stack, visited, prev = [], [], None
    trans, reent, per = 0, 0, collections.Counter()
    for kind, key in seg:
        if kind == "E":
            stack.append(key)
        else:
            if stack and stack[-1] == key:
                stack.pop()
            elif key in stack:  # unbalanced (longjmp and the like): unwind to it
                while stack and stack.pop() != key:
                    pass
        if not stack:
            break
        f = files[stack[-1]][1]
        if prev is not None and f != prev:
            trans += 1
            if f in visited:
                reent += 1
                per[f] += 1
        if f not in visited:
            visited.append(f)
        prev = f
    return {"files": visited, "transitions": trans, "reentries": reent, "per": per,
            "functions": len({k for _, k in seg})}


def exported(build):
    so = pathlib.Path(build) / "libhub" / "libhubkern.so"
    if not so.exists():
        return None
    return sum(1 for line in sh("nm", "-D", "--defined-only", so).splitlines() if " T " in line)


def strip_c(text):
    """Comments, strings and char literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def longest_functions(tree, dirs=("libhub", "cache", "util", "server", "cli"), top=10):
    found = []
    for d in dirs:
        root = pathlib.Path(tree) / d
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.c")):
            text = strip_c(p.read_text(errors="replace"))
            # preprocessor lines out
            text = re.sub(r"^[ \t]*#.*(?:\\\n.*)*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.M)
            depth, i, start = 0, 0, 0
            for m in re.finditer(r"[{}]", text):
                if m.group(0) == "{":
                    if depth == 0:
                        head = text[start:m.start()]
                        fm = re.search(r"(\w+)\s*\((?:[^;{}()]|\([^;{}()]*\))*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?$",
                                       head, re.S)
                        cur = None
                        if fm and fm.group(1) not in ("if", "for", "while", "switch", "sizeof", "return"):
                            line0 = text.count("\n", 0, start + fm.start(1)) + 1
                            cur = (fm.group(1), line0)
                        opening = cur
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        if opening:
                            line1 = text.count("\n", 0, m.start()) + 1
                            found.append((line1 - opening[1] + 1, f"{p.relative_to(tree)}:{opening[1]}", opening[0]))
                        opening = None
                        start = m.end()
                if depth == 0 and m.group(0) == "}":
                    start = m.end()
            # declarations between functions end at ';' at depth 0: the head regex needs no ';' anyway
    found.sort(key=lambda x: -x[0])
    return found[:top]


def run_tree(name, tree, build_rel, hook, work, window_off=False):
    tree = pathlib.Path(tree).resolve()
    build = tree / build_rel
    hubkern, getrep = build / "cli" / "hubkern", build / "tests" / "hk-get-repeat"
    hub_src = build / "kernels" / "rmsnorm" / "hub"
    wd = pathlib.Path(work) / (name + ("-w0" if window_off else ""))
    wd.mkdir()
    commit = sh(hubkern, "publish", hub_src, REPO, "--branch", "v1", "--cache", wd / "store", env=clean_env()).strip()
    mirror = Mirror(hubkern, wd / "store")
    events = wd / "events.txt"
    try:
        n0 = len(mirror.access())
        p = subprocess.Popen([str(getrep), mirror.url, str(wd / "cache"), REPO, "1"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(LD_PRELOAD=str(hook), HK_TRACE_OUT=str(events),
                                           **({"HUBKERN_FRESHNESS_S": "0"} if window_off else {})))
        answers, counts = [], []
        for _ in range(2):
            p.stdin.write("get\n")
            p.stdin.flush()
            answers.append(p.stdout.readline().strip())
            counts.append(len(mirror.access()))
        p.stdin.close()
        rc = p.wait(timeout=60)
        if rc != 0 or not all(a.startswith("ok ") for a in answers):
            raise RuntimeError(f"{name}: hk-get-repeat rc={rc} {answers} {p.stderr.read()}")
    finally:
        mirror.stop()
    http = [counts[0] - n0, counts[1] - counts[0]]
    ev = parse_events(events)
    gk_off = int(next(l.split()[0] for l in sh("nm", getrep).splitlines() if l.split()[-1] == "hk_get_kernel"), 16)
    gk = (str(getrep), gk_off)
    mods = {e[2] for e in ev}
    if gk not in {(e[2], e[3]) for e in ev}:  # dladdr may spell the executable differently
        cand = [m for m in mods if os.path.basename(m) == getrep.name]
        gk = (cand[0], gk_off) if cand else gk
    segs = calls(ev, gk)
    if len(segs) < 2:
        raise RuntimeError(f"{name}: {len(segs)} hk_get_kernel frames found in {events}")
    files = resolve(tree, {k for seg, _ in segs[:2] for _, k in seg})
    out = {"name": name, "tree": str(tree), "head": sh("git", "-C", tree, "rev-parse", "--short", "HEAD").strip(),
           "commit": commit, "exported": exported(build), "longest": longest_functions(tree), "calls": []}
    labels = ("cold, window off", "warm, window off") if window_off else ("cold", "warm")
    for label, (seg, other), n in zip(labels, segs[:2], http):
        w = walk(seg, files)
        w.update(label=label, http=n, other_thread_events=other, events=len(seg))
        out["calls"].append(w)
    return out


def render(results, cmd):
    L = []
    L.append("| tree | call | distinct files | re-entries | transitions | functions | events (main thread) | "
             "events other threads | HTTP requests |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for c in r["calls"]:
            L.append(f"| {r['name']} ({r['head']}) | {c['label']} | {len(c['files'])} | {c['reentries']} | "
                     f"{c['transitions']} | {c['functions']} | {c['events']} | {c['other_thread_events']} | {c['http']} |")
    L.append("")
    L.append("| tree | exported functions of libhubkern.so (nm -D --defined-only, ' T ') |")
    L.append("|---|---:|")
    for r in results:
        L.append(f"| {r['name']} ({r['head']}) | {r['exported'] if r['exported'] is not None else 'n/a (not built)'} |")
    for r in results:
        for c in r["calls"]:
            L.append("")
            L.append(f"Top 10 files by re-entries, {r['name']} {c['label']}:")
            L.append("")
            L.append("| file | re-entries |")
            L.append("|---|---:|")
            for f, n in c["per"].most_common(10):
                L.append(f"| {f} | {n} |")
            L.append("")
            L.append(f"Files visited ({r['name']} {c['label']}, in first-visit order): " + ", ".join(c["files"]))
    for r in results:
        L.append("")
        L.append(f"10 longest functions, {r['name']} ({r['head']}), libhub/ cache/ util/ server/ cli/:")
        L.append("")
        L.append("| lines | where | function |")
        L.append("|---:|---|---|")
        for n, where, fn in r["longest"]:
            L.append(f"| {n} | {where} | {fn} |")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout")
    ap.add_argument("--build", default="build-trace", help="build directory inside each tree")
    ap.add_argument("--window-off", action="store_true",
                    help="also trace a second process with HUBKERN_FRESHNESS_S=0 (warm get revalidates)")
    ap.add_argument("--md", help="also write the tables to this markdown file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hk-call-trace-") as work:
        hook = build_hook(work)
        results = []
        for t in a.tree:
            r = run_tree(*t.split("=", 1), a.build, hook, work)
            if a.window_off:  # a second process with HUBKERN_FRESHNESS_S=0: the warm get asks the mirror again
                r["calls"] += run_tree(*t.split("=", 1), a.build, hook, work, window_off=True)["calls"]
            results.append(r)
    cmd = "python3 " + " ".join(sys.argv)
    text = render(results, cmd)
    print(text)
    if a.md:
        pathlib.Path(a.md).write_text(text + "\n")


if __name__ == "__main__":
    main()
