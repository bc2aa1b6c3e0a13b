#!/usr/bin/env python3
"""The decode's balanced plan under compute-sanitizer: small ragged batches (empty and 1-token
sequences, lengths that end inside a tile) on contiguous and paged caches (TMA and cp.async pages),
q_len 1 and 4, one and two CTAs an SM, pairs' fixed cost 0, the default and an odd large one, and
an FP8 cache; each checked against float64 as in test_attention_gpu.py (outputs poisoned first).
  compute-sanitizer --tool memcheck|racecheck|synccheck python3 kernels/attention/tests/sanitize_decode.py
(HK_ATTN_LIB: a library built with -DHK_TEST_HOOKS, which reads HK_ATTN_DECODE_CPS and _SEG_COST)"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_attention_gpu as t  # noqa: E402

torch.manual_seed(0)
lens = [0, 1, 63, 65, 200, 1000, 3000, 130, 7]
bf = torch.bfloat16
for cps in ("1", "2"):
    for cost in ("0", "", "13"):
        os.environ["HK_ATTN_DECODE_CPS"] = cps
        os.environ["HK_ATTN_DECODE_SEG_COST"] = cost
        tag = f"cps {cps} cost {cost or 'default'}"
        t.test_decode(f"{tag} bshd q1", lens, 1, 32, 8, 128, bf, "bshd")
        t.test_decode(f"{tag} paged16 q4", lens, 4, 32, 8, 128, bf, "paged", 16)
        t.test_decode(f"{tag} paged48 q1 D64", lens, 1, 32, 8, 64, torch.float16, "paged", 48)
        t.test_decode_fp8(f"{tag} fp8 paged32 q1", lens, 1, 32, 8, 128, bf, "paged", 32)
for k in ("HK_ATTN_DECODE_CPS", "HK_ATTN_DECODE_SEG_COST"):
    del os.environ[k]
print("sanitize_decode:", "all checks passed" if not t.FAIL else f"{len(t.FAIL)} failed: {t.FAIL}")
sys.exit(1 if t.FAIL else 0)
