#!/usr/bin/env python3
"""Every sm_90a prefill CTA shape (128 rows; 64 rows; two 64-row CTAs a SM), one CTA a tile and
persistent (32 heads: more tiles than SMs, so persistent CTAs walk several), on small varlen
batches, for compute-sanitizer: no reference check here (test_attention_gpu.py does that), only the
launches, with lengths that end inside a tile, so that memcheck sees every edge of the boxes and
racecheck every stage hand-over. Outputs are poisoned first and must come back finite.
  compute-sanitizer --tool memcheck|racecheck python3 kernels/attention/tests/sanitize_prefill.py
(HK_ATTN_LIB: a library built with -DHK_TEST_HOOKS, which reads HK_ATTN_PREFILL_SM90_CTA and _PERSIST)"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hk_attention_ctypes as hk  # noqa: E402

dev = torch.device("cuda")
torch.manual_seed(0)
bad = 0
for cta, persist in [(c, p) for c in ("128", "64", "64x2") for p in ("0", "1")]:
    os.environ["HK_ATTN_PREFILL_SM90_CTA"] = cta
    os.environ["HK_ATTN_PREFILL_SM90_PERSIST"] = persist
    for D in (64, 128):
        for causal in (False, True):
            lens = [1, 77, 200, 333]
            cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=dev)
            T = int(cu[-1])
            q = torch.randn(T, 32, D, device=dev, dtype=torch.bfloat16)
            k, v = (torch.randn(T, 8, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
            out = torch.full_like(q, float("nan"))
            hk.prefill(q, k, v, cu, cu, max(lens), causal, None, out)
            torch.cuda.synchronize()
            ok = bool(torch.isfinite(out).all())
            bad += not ok
            print(f"cta {cta:4s} persist {persist} D{D} {'causal' if causal else 'full'}: {'ok' if ok else 'NOT FINITE'}", flush=True)
print("sanitize_prefill:", "all finite" if not bad else f"{bad} not finite")
sys.exit(1 if bad else 0)
