#!/usr/bin/env python3
"""Prints the include graph between the folders of hubkern and checks the layering rules of
docs/architecture.md. Exit status 1 on a violation.

  scripts/archcheck.py [BUILD_DIR]          graph + every check
  scripts/archcheck.py --graph [BUILD_DIR]  the graphs only (exit 0)

Rules checked on the sources:
  - libhubkern's layers, lowest first: util, sigstore, cache, env, variant, client, kernel. A file may
    include its own layer, the layers below it and the public headers (api); never a layer above it.
  - no include cycle between the top-level folders (util/, cache/, libhub/, cli/, server/; the public
    headers, libhub/include, are the interface and count apart as api), nor between layers;
  - cli/ and server/ include only the public headers (api), util/ and their own headers (cli/ may
    include server/'s header: hubkern serve and publish are commands);
  - the cache layout (snapshots/, blobs/, refs/, .no_exist/, .hk-staging/) is spelled only in cache/:
    a format string that joins a path with one of those names elsewhere is a violation.
Rules checked on the objects of BUILD_DIR (given by ctest; skipped without it):
  - no cycle of calls between the files of one folder (file A calls a function defined in file B and
    B one defined in A, or a longer ring): a ring means a function lives in the wrong file;
  - hk_ is the public API only: no global symbol named hk_<x> is defined in server/ or cli/ (their
    prefixes are srv_ and cli_), and every hk_<x> the library defines is declared in a public header.
"""
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE_ROOTS = [os.path.join(ROOT, p) for p in ("libhub/include", "libhub/src", "", "util")]
LAYERS = ["util", "sigstore", "cache", "env", "variant", "client", "kernel"]
PROGRAMS = {"cli": {"api", "util", "cli", "server"}, "server": {"api", "util", "server"}}
SOURCE_DIRS = ["util", "cache", "libhub", "cli", "server"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# "%s/snapshots/%s", "%s/blobs/", "/refs/%s", "%s/.no_exist/" ...: a layout path being built
# ... and "snapshots/%s/build/%s": one relative to a repo folder (a finding's path)
LAYOUT_RE = re.compile(r'"(?![^"\n]*api/)[^"\n]*%s/(?:snapshots|blobs|refs|\.no_exist|\.hk-staging)(?:/|")'
                       r'|"(?:snapshots|blobs|refs|\.no_exist|\.hk-staging)/%')


def folder_of(path):
    """The architectural folder (layer or program) of a file, or None for files outside them."""
    rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
    if rel.startswith("libhub/include/"):
        return "api"
    if rel.startswith("libhub/src/"):
        return rel[len("libhub/src/"):].split("/")[0]
    top = rel.split("/")[0]
    return top if top in ("util", "cache", "cli", "server") else None


def top_of(folder):
    """The top-level folder a layer or program sits in."""
    return folder if folder in ("util", "cache", "cli", "server", "api") else "libhub"


def resolve(name, including):
    for base in [os.path.dirname(including)] + INCLUDE_ROOTS:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(cand):
            return cand
    return None


def sources():
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.join(dirpath, n)


def scan():
    edges = Counter()
    files = defaultdict(list)  # (from, to) -> example "file -> header"
    layout = []
    for path in sources():
        src = folder_of(path)
        if src is None:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if src != "cache":
            for i, line in enumerate(text.splitlines(), 1):
                if LAYOUT_RE.search(line) and not line.lstrip().startswith(("/*", "*", "//")):
                    layout.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()[:100]}")
        for inc in INCLUDE_RE.findall(text):
            target = resolve(inc, path)
            if target is None:
                continue
            dst = folder_of(target)
            if dst is None or dst == src:
                continue
            edges[(src, dst)] += 1
            files[(src, dst)].append(f"{os.path.relpath(path, ROOT)} -> {inc}")
    return edges, files, layout


def find_cycle(edges):
    graph = defaultdict(set)
    for a, b in edges:
        if a != "api" and b != "api" and a != b:
            graph[a].add(b)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


# ---- the objects: who calls whom, and which symbols are defined -------------------------------
def objects(build):
    """(source path relative to ROOT, object path) of every object of the library and programs."""
    out = []
    for dp, _, fs in os.walk(build):
        for f in fs:
            if not f.endswith(".c.o"):
                continue
            for tgt, prefix in (("hubkern_objects.dir/", "libhub/"), ("hubkern_server.dir/", "server/"),
                                ("hubkern_cli.dir/", "cli/")):
                if tgt in dp.replace(os.sep, "/") + "/":
                    sub = (dp.replace(os.sep, "/") + "/").split(tgt, 1)[1]
                    rel = os.path.normpath(prefix + sub.replace("__/", "../") + f[:-2]).replace(os.sep, "/")
                    out.append((rel, os.path.join(dp, f)))
    return out


def nm_symbols(obj):
    defined, undefined = set(), set()
    out = subprocess.run(["nm", obj], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBR":
            defined.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            undefined.add(p[1])
    return defined, undefined


def file_rings(objs):
    defs, uses = {}, {}
    for rel, o in objs:
        d, u = nm_symbols(o)
        for s in d:
            defs[s] = rel
        uses[rel] = u
    graph = defaultdict(set)
    why = {}
    for f, us in uses.items():
        for s in us:
            g = defs.get(s)
            if g and g != f and os.path.dirname(g) == os.path.dirname(f):
                graph[f].add(g)
                why.setdefault((f, g), s)
    index, low, stack, on, rings, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                rings.append(sorted(comp))

    for v in sorted(uses):
        if v not in index:
            strong(v)
    described = []
    for ring in rings:
        calls = [f"{a} -> {b} ({why[(a, b)]})" for a in ring for b in sorted(graph[a]) if b in ring]
        described.append(", ".join(ring) + ": " + "; ".join(calls))
    return described, defs


def public_names():
    names = set()
    inc = os.path.join(ROOT, "libhub", "include")
    for dp, _, fs in os.walk(inc):
        for f in fs:
            if f.endswith(".h"):
                with open(os.path.join(dp, f), encoding="utf-8") as fh:
                    names |= set(re.findall(r"\b(hk_[a-z0-9_]+)\s*\(", fh.read()))
    return names


def main():
    args = [a for a in sys.argv[1:] if a != "--graph"]
    build = args[0] if args else None
    edges, files, layout = scan()
    print("include graph between folders (count of #include lines):")
    for (a, b), n in sorted(edges.items()):
        print(f"  {a:8} -> {b:8} {n}")
    tops = Counter()
    for (a, b), n in edges.items():
        if top_of(a) != top_of(b):
            tops[(top_of(a), top_of(b))] += n
    print("include graph between top-level folders:")
    for (a, b), n in sorted(tops.items()):
        print(f"  {a:8} -> {b:8} {n}")
    objs = objects(build) if build else []
    rings, defs = file_rings(objs) if objs else ([], {})
    if objs:
        print("call rings between the files of one folder: " + ("none" if not rings else str(len(rings))))
        for r in rings:
            print("  " + r)
    if "--graph" in sys.argv:
        return 0
    problems = []
    cycle = find_cycle(tops)
    if cycle:
        problems.append("include cycle between top-level folders: " + " -> ".join(cycle))
    cycle = find_cycle(edges)
    if cycle:
        problems.append("include cycle between folders: " + " -> ".join(cycle))
    for (a, b), _ in sorted(edges.items()):
        bad = False
        if a in LAYERS and b in LAYERS and LAYERS.index(b) > LAYERS.index(a):
            bad = True
        if a in PROGRAMS and b not in PROGRAMS[a]:
            bad = True
        if a == "api" and b != "api":
            bad = True
        if bad:
            for ex in files[(a, b)]:
                problems.append(f"{a} may not include {b}: {ex}")
    for ex in layout:
        problems.append("a cache layout path built outside cache/ (ask cache/cache.h): " + ex)
    for r in rings:
        problems.append("files of one folder call each other (move the function to the file that owns its "
                        "data): " + r)
    if objs:
        api = public_names()
        for sym, rel in sorted(defs.items()):
            if not re.match(r"hk_[a-z0-9]", sym):
                continue
            if rel.startswith(("server/", "cli/")):
                problems.append(f"{rel} defines {sym}: hk_ is the public API's prefix (srv_ / cli_ here)")
            elif sym not in api:
                problems.append(f"{rel} defines {sym}, which no public header declares (internal: hk__)")
    elif build:
        problems.append(f"no objects found under {build}: build first")
    for p in problems:
        print("archcheck: " + p, file=sys.stderr)
    print("archcheck: " + ("FAILED" if problems else "ok: layers call only downward, no rings, names as the API"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
