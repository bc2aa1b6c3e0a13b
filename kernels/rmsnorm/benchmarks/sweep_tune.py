#!/usr/bin/env python3
"""Times builds of the tvm-ffi CUDA module that differ only in launch shapes (RMSNORM_TUNE_BLOCK /
RMSNORM_TUNE_WARP = k in lib k) on the shapes each table governs, same method as bench.py (GPU
time per call in a CUDA graph over rotating buffer sets, median). Picks, per table, the build
with the lowest geometric-mean time. usage: sweep_tune.py --libs a.so b.so ... [--json out]"""
import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench import graph_time, nsets_for  # noqa: E402

BLOCK_SHAPES = [(128, 4096), (1024, 4096), (4096, 4096), (32768, 4096), (8192, 2048), (32768, 2048),
                (8192, 3072), (32768, 3072)]
WARP_SHAPES = [(4096, 128), (16384 * 2, 128), (131072, 128), (1048576, 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libs", nargs="+", required=True)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import tvm_ffi

    libs = [tvm_ffi.load_module(p) for p in args.libs]
    res = {}
    for group, shapes in (("block", BLOCK_SHAPES), ("warp", WARP_SHAPES)):
        print(f"| {group} shape | " + " | ".join(f"lib{k} µs" for k in range(len(libs))) + " |")
        print("|---|" + "---|" * len(libs))
        logs = [0.0] * len(libs)
        for T, H in shapes:
            nb = (2 * T * H + H) * 2
            ns = nsets_for(nb)
            xs = [torch.randn(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(ns)]
            ws = [torch.randn(H, device="cuda", dtype=torch.bfloat16) for _ in range(ns)]
            os_ = [torch.empty_like(x) for x in xs]
            ts = []
            for lib in libs:
                o = torch.full_like(xs[0], float("nan"))
                lib.rms_norm(o, xs[0], ws[0], 1e-6)
                x64 = xs[0].double()
                ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * ws[0].double()
                assert ((o.double() - ref).norm() / ref.norm()).item() < 1e-2
                ts.append(graph_time([lambda i=i, lib=lib: lib.rms_norm(os_[i], xs[i], ws[i], 1e-6)
                                      for i in range(ns)]) * 1e3)
            for k, t in enumerate(ts):
                logs[k] += math.log(t)
            print(f"| {T}x{H} ({nb / 1e6:.0f} MB) | " + " | ".join(f"{t:.2f} ({nb / t / 1e3:.0f} GB/s)" for t in ts) + " |",
                  flush=True)
            del xs, ws, os_
            torch.cuda.empty_cache()
        res[group] = min(range(len(libs)), key=lambda k: logs[k])
        print(f"best {group} table: lib{res[group]}\n")
    if args.json:
        Path(args.json).write_text(json.dumps(res))


if __name__ == "__main__":
    main()
