#!/usr/bin/env python3
"""Runs one decode shape a few times (warm-up, then the launches a profiler takes), for Nsight
Compute on the H200: ours on a paged or contiguous token-major cache, or SDPA's cuDNN backend on
the head-major contiguous equivalent (--sdpa), e.g. the 16-token pages against cuDNN:
  ncu --clock-control none --set full -k regex:decode_kernel --launch-skip 3 --launch-count 1 \\
      python3 kernels/attention/tools/decode_once.py --batch 16 --seqlen 8192 --page 16
  ncu --clock-control none --set full -k regex:cudnn --launch-skip 3 --launch-count 1 \\
      python3 kernels/attention/tools/decode_once.py --batch 16 --seqlen 8192 --sdpa
(HK_ATTN_LIB names the library; the test builds' HK_ATTN_DECODE_* knobs apply.) Pages are
shuffled as in bench/attention_ragged_bench.py, or with --in-order each sequence's pages follow one
another: the same addresses as the contiguous cache, so a difference between the two is the
kernel's, not the layout's (NOTES v10: --batch 16 --seqlen 32768 --page 128 --in-order --splits 1).
Every sequence is --seqlen long."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import hk_attention_ctypes as hk  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--page", type=int, default=16, help="tokens a page; 0: contiguous cache")
    ap.add_argument("--qlen", type=int, default=1)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--in-order", action="store_true", help="each sequence's pages in order (contiguous addresses)")
    ap.add_argument("--splits", type=int, default=0, help="splits of the context (0: the library's choice)")
    ap.add_argument("--sdpa", action="store_true", help="SDPA (cuDNN) on [B, Hkv, S, D] instead of ours")
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--names", action="store_true", help="print the kernels the last launch ran (torch.profiler)")
    a = ap.parse_args()
    dev, bf = torch.device("cuda"), torch.bfloat16
    B, S, bs, D = a.batch, a.seqlen, a.page, a.d
    q = torch.randn(B, a.qlen, a.hq, D, device=dev, dtype=bf)
    if a.sdpa:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        k, v = (torch.randn(B, a.hkv, S, D, device=dev, dtype=bf) for _ in range(2))
        def run_once():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k, v, enable_gqa=True)
        for _ in range(a.launches):
            out = run_once()
        what = "SDPA cuDNN, head-major contiguous"
    else:
        sl = torch.full((B,), S, dtype=torch.int32, device=dev)
        if bs:
            per = (S + bs - 1) // bs
            kc, vc = (torch.randn(B * per, bs, a.hkv, D, device=dev, dtype=bf) for _ in range(2))
            order = torch.arange(B * per, device=dev) if a.in_order else torch.randperm(B * per, device=dev)
            bt = order.to(torch.int32).view(B, per)
            call = hk.Decode(q, kc, vc, (bs * a.hkv * D, a.hkv * D, D), sl, S, bt, bs, None, a.splits).set_hkv(a.hkv)
        else:
            kc, vc = (torch.randn(B, S, a.hkv, D, device=dev, dtype=bf) for _ in range(2))
            call = hk.Decode(q, kc, vc, (S * a.hkv * D, a.hkv * D, D), sl, S, None, 0, None, a.splits).set_hkv(a.hkv)
        def run_once():
            return call()[0]
        for _ in range(a.launches):
            out = run_once()
        what = f"ours, kernel {call.kernel()}, splits {call.num_splits}"
    torch.cuda.synchronize()
    if a.names:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run_once()
            torch.cuda.synchronize()
        print("kernels of one launch:", sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"}))
    print(f"decode B{B} S{S} page {bs or 'contiguous'}{' in order' if bs and a.in_order else ''} q_len {a.qlen} Hq {a.hq} Hkv {a.hkv} D{D}: {what}, "
          f"{a.launches} launches, finite {bool(torch.isfinite(out).all())}")


if __name__ == "__main__":
    main()
