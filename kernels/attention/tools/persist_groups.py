#!/usr/bin/env python3
"""Where persistent prefill CTAs pay: runs of bench/attention_prefill_sweep.py (--json) with
persistence forced off (P0) and on (P1), beside a base run, grouped by mask (full, causal, varlen) and
length (<= 1k, <= 4k, longer); per group the median [min, max] of P1/P0, P1/base, P0/base and of the
best of the two over base (what a perfect rule would give).
  python3 tools/persist_groups.py BASE.json P0.json P1.json [--cells]
--cells also prints each fixed-length cell's medians over its GQA variants."""
import json
import statistics as st
import sys


def load(path):
    return {(r["case"], r["hkv"], r["D"], r["causal"]): r["ours"] for r in json.load(open(path))}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        sys.exit(__doc__)
    base, p0, p1 = (load(a) for a in args)
    groups, cells = {}, {}
    for key in base:
        if key not in p0 or key not in p1:
            continue
        case, _, d, causal = key
        r = (p1[key] / p0[key], p1[key] / base[key], p0[key] / base[key], max(p0[key], p1[key]) / base[key])
        if case.startswith("varlen"):
            groups.setdefault(("varlen", "-"), []).append(r)
            continue
        s = int(case.split("S")[1])
        band = "<=1k" if s <= 1024 else "<=4k" if s <= 4096 else ">4k"
        groups.setdefault(("causal" if causal else "full", band), []).append(r)
        cells.setdefault((causal, d, s, case.split()[0]), []).append(r)
    names = ("P1/P0", "P1/base", "P0/base", "best/base")

    def fmt(rows, i):
        v = [x[i] for x in rows]
        return f"{st.median(v):.3f} [{min(v):.2f}, {max(v):.2f}]"

    print("| mask | length | cells | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---|" * len(names))
    for (mask, band), rows in sorted(groups.items()):
        print(f"| {mask} | {band} | {len(rows)} | " + " | ".join(fmt(rows, i) for i in range(len(names))) + " |")
    if "--cells" in sys.argv:
        for (causal, d, s, b), rows in sorted(cells.items()):
            print(f"{'causal' if causal else 'full  '} D{d} {b} S{s}: " +
                  "  ".join(f"{n} {st.median([x[i] for x in rows]):.3f}" for i, n in enumerate(names)))


if __name__ == "__main__":
    main()
