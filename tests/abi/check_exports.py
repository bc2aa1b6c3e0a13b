#!/usr/bin/env python3
"""The libraries export exactly the public API: the functions declared HK_API in
libhub/include/hubkern/*.h. Checks libhubkern.so (dynamic symbols, version node HUBKERN_0) and
libhubkern.a (global defined symbols of its members).

Also checks the naming rule on the internal archive (every object of the library with internal
symbols visible): a global function named hk_<x> is public API; internal ones are named hk__<x>.

usage: check_exports.py INCLUDE_DIR LIBHUBKERN_SO LIBHUBKERN_A [LIBHUBKERN_INTERNAL_A]
"""
import glob
import os
import re
import subprocess
import sys

DECL = re.compile(r"\bHK_API\b[^;{(]*?\b(hk_[A-Za-z0-9_]+)\s*\(", re.S)


def declared(include_dir):
    names = set()
    for h in glob.glob(os.path.join(include_dir, "**", "*.h"), recursive=True):
        text = open(h, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"#\s*define[^\n]*", " ", text)
        names.update(DECL.findall(text))
    return names


def nm(args):
    out = subprocess.run(["nm"] + args, check=True, capture_output=True, text=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVWGS" and parts[1] != "A":
            syms.add(parts[2])
    return syms


def main():
    inc, so, ar = sys.argv[1:4]
    want = declared(inc)
    if len(want) < 50:
        print(f"check_exports: only {len(want)} HK_API declarations found in {inc}: parser broken?")
        return 1
    dyn = nm(["-D", "--defined-only", so])
    unversioned = sorted(s for s in dyn if "@@HUBKERN_0" not in s and "@HUBKERN_0" not in s)
    dyn_names = {s.split("@")[0] for s in dyn}
    static = nm(["-g", "--defined-only", ar])
    ok = True
    for label, got in (("libhubkern.so", dyn_names), ("libhubkern.a", static)):
        extra, missing = sorted(got - want), sorted(want - got)
        if extra:
            ok = False
            print(f"{label} exports {len(extra)} symbols that no public header declares: {', '.join(extra[:40])}")
        if missing:
            ok = False
            print(f"{label} lacks {len(missing)} declared public functions: {', '.join(missing[:40])}")
        print(f"{label}: {len(got)} exported, {len(want)} declared")
    if len(sys.argv) > 4:
        internal = nm(["-g", "--defined-only", sys.argv[4]])
        misnamed = sorted(x for x in internal if x.startswith("hk_") and not x.startswith("hk__") and x not in want)
        if misnamed:
            ok = False
            print(f"internal functions with the public prefix hk_ (rename to hk__): {', '.join(misnamed[:40])}")
        print(f"internal archive: {sum(1 for x in internal if x.startswith('hk__'))} internal hk__ symbols, "
              f"{len(misnamed)} misnamed")
    if unversioned:
        ok = False
        print(f"libhubkern.so: symbols without the HUBKERN_0 version: {', '.join(unversioned[:20])}")
    print("check_exports: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
