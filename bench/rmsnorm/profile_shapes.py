#!/usr/bin/env python3
"""Runs our RMSNorm once per shape (after a warm-up) for a profiler to attach to, e.g.
ncu --clock-control none -k regex:rms_ --section SpeedOfLight --section MemoryWorkloadAnalysis \
    python3 profile_shapes.py --hub DIR
Shapes: bf16 4096x4096 (67 MB), 131072x128 (q/k-norm rows, 67 MB), 32768x4096 (537 MB)."""
import argparse
from pathlib import Path

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True)
    args = ap.parse_args()
    from kernels import get_local_kernel

    th = [v for v in (Path(args.hub) / "build").iterdir() if v.name.startswith("torch")]
    tv = [v for v in (Path(args.hub) / "build").iterdir() if v.name.startswith("tvm-ffi") and "-cu" in v.name]
    mod = get_local_kernel((th or tv)[0])
    for T, H in ((4096, 4096), (131072, 128), (32768, 4096)):
        x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(H, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(x)
        mod.rms_norm(o, x, w, 1e-6)
        torch.cuda.synchronize()
        print(T, H, flush=True)


if __name__ == "__main__":
    main()
