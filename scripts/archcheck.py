#!/usr/bin/env python3
"""Prints the include graph between the folders of hubkern and checks the layering rules of
docs/architecture.md. Exit status 1 on a violation.

  scripts/archcheck.py            graph + check
  scripts/archcheck.py --graph    graph only (exit 0)

Rules:
  - libhubkern's layers, lowest first: util, sigstore, cache, env, variant, client, kernel. A file may include
    its own layer, the layers below it and the public headers (api); never a layer above it.
  - the folder graph has no cycle;
  - cli/ and server/ include only the public headers (api), the util layer and their own headers
    (cli/ may include server/'s header: hubkern serve and publish are commands).
"""
import os
import re
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE_ROOTS = [os.path.join(ROOT, p) for p in ("libhub/include", "libhub/src", "")]
LAYERS = ["util", "sigstore", "cache", "env", "variant", "client", "kernel"]
PROGRAMS = {"cli": {"api", "util", "cli", "server"}, "server": {"api", "util", "server"}}
SOURCE_DIRS = ["libhub", "cache", "cli", "server"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """The architectural folder (layer or program) of a file, or None for files outside them."""
    rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
    if rel.startswith("libhub/include/"):
        return "api"
    if rel.startswith("libhub/src/"):
        part = rel[len("libhub/src/"):]
        return part.split("/")[0] if "/" in part else "util"  # libhub/src/internal.h: util's header
    top = rel.split("/")[0]
    return top if top in ("cache", "cli", "server") else None


def resolve(name, including):
    for base in [os.path.dirname(including)] + INCLUDE_ROOTS:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(cand):
            return cand
    return None


def scan():
    edges = Counter()
    files = defaultdict(list)  # (from, to) -> example "file -> header"
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if not n.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, n)
                src = folder_of(path)
                if src is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE_RE.findall(text):
                    target = resolve(inc, path)
                    if target is None:
                        continue
                    dst = folder_of(target)
                    if dst is None or dst == src:
                        continue
                    edges[(src, dst)] += 1
                    files[(src, dst)].append(f"{os.path.relpath(path, ROOT)} -> {inc}")
    return edges, files


def find_cycle(edges):
    graph = defaultdict(set)
    for a, b in edges:
        if a != "api" and b != "api":
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


def main():
    edges, files = scan()
    print("include graph between folders (count of #include lines):")
    for (a, b), n in sorted(edges.items()):
        print(f"  {a:8} -> {b:8} {n}")
    if "--graph" in sys.argv:
        return 0
    problems = []
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
    for p in problems:
        print("archcheck: " + p, file=sys.stderr)
    print("archcheck: " + ("FAILED" if problems else "ok: layers call only downward"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
