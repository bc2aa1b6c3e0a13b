#!/usr/bin/env python3
"""One launch per build and shape (after a warm-up) of wide bf16 rows, for ncu to attach to:
ncu --clock-control none -k regex:'rms_|rms_fwd' --section SpeedOfLight --section Occupancy \
    --section LaunchStats python3 profile_wide.py --lib base=base.so --lib v6=v6.so [--triton ANCHOR]
Shapes: 65536x5120 (671 MB) and 32768x12288 (805 MB), bf16 x and weight."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rmsnorm_sweep import load, ours  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import load_triton  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", required=True)
    ap.add_argument("--triton", default=None)
    args = ap.parse_args()
    libs = [(s.split("=", 1)[0], load(s.split("=", 1)[1])) for s in args.lib]
    tri = load_triton(args.triton) if args.triton else None
    for rows, h in ((65536, 5120), (32768, 12288)):
        x = torch.randn(rows, h, device="cuda", dtype=torch.bfloat16)
        w = (1 + 0.1 * torch.randn(h, device="cuda")).to(torch.bfloat16)
        y = torch.empty_like(x)
        for name, lib in libs:
            ours(lib, y, x, w)
            torch.cuda.synchronize()
            print(name, rows, h, flush=True)
        if tri is not None:
            tri(x, w)
            torch.cuda.synchronize()
            print("triton", rows, h, flush=True)


if __name__ == "__main__":
    main()
