#!/usr/bin/env python3
"""Our prefill TFLOP/s of several runs of bench/attention_prefill_sweep.py (its --json files) side by
side, each as a ratio to the first run: per case, then median / min / max over the cases both have.
  python3 tools/compare_prefill_runs.py BASE.json OTHER.json [OTHER.json ...] [--below 0.97]
--below R prints only the cases where some ratio is under R (or over 1/R)."""
import json
import statistics
import sys


def load(path):
    return {(r["case"], r["hkv"], r["D"], r["causal"]): r["ours"] for r in json.load(open(path))}


def main():
    args = sys.argv[1:]
    below = None
    if "--below" in args:
        i = args.index("--below")
        below = float(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    base, others = load(args[0]), [(p, load(p)) for p in args[1:]]
    ratios = {p: [] for p, _ in others}
    print("| case | kv heads | D | causal | " + args[0] + " | " + " | ".join(p for p, _ in others) + " |")
    for key, b in base.items():
        cells, show = [], below is None
        for p, run in others:
            if key not in run or not b:
                cells.append("-")
                continue
            r = run[key] / b
            ratios[p].append(r)
            cells.append(f"{run[key]:.0f} ({r:.2f})")
            show = show or r < below or r > 1 / below
        if show:
            print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {b:.0f} | " + " | ".join(cells) + " |")
    for p, rs in ratios.items():
        if rs:
            print(f"{p}: median {statistics.median(rs):.3f}, min {min(rs):.3f}, max {max(rs):.3f} over {len(rs)} cases")


if __name__ == "__main__":
    main()
