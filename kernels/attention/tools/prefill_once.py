#!/usr/bin/env python3
"""Runs our prefill on one fixed-length shape a few times (warm-up, then the launches a profiler
takes), for Nsight Compute on the H200, e.g. the per-tile critical path at B64 S128:
  ncu --clock-control none --set full -k regex:prefill_sm90 --launch-skip 3 --launch-count 1 \\
      python3 kernels/attention/tools/prefill_once.py --batch 64 --seqlen 128 --hkv 8
(HK_ATTN_LIB names the library; HK_ATTN_PREFILL_SM90_CTA / _PERSIST force a shape in test builds.)
bench/gpu/h200_attention_round.sh's `profile` stage runs it under ncu for BASE and NEW."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import hk_attention_ctypes as hk  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seqlen", type=int, default=128)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--launches", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device("cuda")
    t = a.batch * a.seqlen
    q = torch.randn(t, a.hq, a.d, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(t, a.hkv, a.d, device=dev, dtype=torch.bfloat16) for _ in range(2))
    cu = torch.arange(0, t + 1, a.seqlen, dtype=torch.int32, device=dev)
    out = torch.empty_like(q)
    for _ in range(a.launches):
        hk.prefill(q, k, v, cu, cu, a.seqlen, a.causal, None, out)
    torch.cuda.synchronize()
    print(f"prefill B{a.batch} S{a.seqlen} Hq {a.hq} Hkv {a.hkv} D{a.d} {'causal' if a.causal else 'full'}:"
          f" {a.launches} launches, kernel {hk.prefill_kernel()}, finite {bool(torch.isfinite(out).all())}")


if __name__ == "__main__":
    main()
