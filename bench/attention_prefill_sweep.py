#!/usr/bin/env python3
"""Prefill sweep on the GPU, our kernel vs SDPA's cuDNN and flash backends in the same run, over the
grid of issue 16: batch 1-32 x sequence 512-32k, GQA ratios 1, 4, 8 and MQA (32 query heads), head
dim 64 and 128, causal and not, plus varlen batches of mixed lengths.

Timing as bench/attention_bench.py (CUDA events around each call, L2 flushed before each rep,
warm-up, median); fresh random bf16 inputs per shape; our output is checked against float64 on two
heads (of the first and the last sequence) before it is timed, and a shape whose check fails stops
the run. GQA baselines call SDPA with enable_gqa=True; where a backend refuses that, the same call
with K/V expanded to all query heads (same FLOPs; marked "x" in the table). Varlen rows: our
cu_seqlens call vs SDPA on jagged nested tensors (the backends that accept them), else a padded
batch with a key-padding mask (marked "pad": it does the padded FLOPs, so it is a generous
baseline only in memory, not in time). TFLOP/s use the FA convention 4*H*sum(Sq*Sk)*D (halved for
causal), the same count for every method.

FlashInfer (--flashinfer DIR, bench/gpu/flashinfer_attn.py): its FA2 ragged prefill on the same
tensors (D=128; the shared tool builds no D=64 prefill module), checked against float64 like ours.

usage: attention_prefill_sweep.py [--reps N] [--quick] [--short] [--no-baselines] [--flashinfer DIR] [--json F]   (HK_ATTN_LIB=... or nvcc builds it)"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kernels", "attention", "tests"))
import hk_attention_ctypes as hk  # noqa: E402
from attention_bench import rel_err  # noqa: E402
from attention_bench import timeit as _timeit  # noqa: E402
from test_attention_gpu import ref_attn  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "gpu"))
import flashinfer_attn  # noqa: E402

FI_ERRORS = []  # FlashInfer's failures, the first one printed

dev = torch.device("cuda")
HQ = 32
FI = None


def timeit(fn, reps):
    return _timeit(fn, reps, warm=5)
BACKENDS = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))


def check(q, k, v, out, cu, lens, causal, D):
    """float64 check of two heads of the first and the last sequence: their last (up to) 2048
    queries against every key (bottom-right causal alignment makes that the same rows)."""
    hkv = k.shape[1]
    for b in (0, len(lens) - 1):
        s0, s = int(cu[b]), lens[b]
        m = min(s, 2048)
        heads = [0, HQ - 1]
        kv_heads = [h // (HQ // hkv) for h in heads]
        ro, _ = ref_attn(q[s0 + s - m:s0 + s, heads], k[s0:s0 + s, kv_heads], v[s0:s0 + s, kv_heads], m, s, causal,
                         D ** -0.5)
        e = rel_err(out[s0 + s - m:s0 + s, heads], ro)
        if not e < 1e-2:
            return e, False
    return e, True


def sdpa_fixed(q, k, v, B, S, hkv, D, causal, be):
    """(ms, how) of SDPA on [B, H, S, D] views, GQA native or expanded."""
    qs = q.view(B, S, HQ, D).transpose(1, 2)
    ks, vs = (t.view(B, S, hkv, D).transpose(1, 2) for t in (k, v))
    with sdpa_kernel(be):
        try:
            F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=hkv != HQ)
            return timeit(lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=hkv != HQ),
                          ARGS.reps)[0], ""
        except Exception:  # noqa: BLE001
            if hkv == HQ:
                return math.nan, "-"
        ke, ve = (t.repeat_interleave(HQ // hkv, 1) for t in (ks, vs))
        try:
            F.scaled_dot_product_attention(qs, ke, ve, is_causal=causal)
            return timeit(lambda: F.scaled_dot_product_attention(qs, ke, ve, is_causal=causal), ARGS.reps)[0], "x"
        except Exception:  # noqa: BLE001
            return math.nan, "-"


def sdpa_varlen(q, k, v, lens, hkv, D, causal, be):
    """(ms, how) on jagged nested tensors, else a padded batch with a key-padding mask."""
    cu = [0]
    for s in lens:
        cu.append(cu[-1] + s)
    kv_rep = HQ // hkv
    parts = lambda t, rep: [t[cu[i]:cu[i + 1]].repeat_interleave(rep, 1).transpose(0, 1) for i in range(len(lens))]  # noqa: E731
    with sdpa_kernel(be):
        try:
            qn = torch.nested.as_nested_tensor(parts(q, 1), layout=torch.jagged)
            kn = torch.nested.as_nested_tensor(parts(k, kv_rep), layout=torch.jagged)
            vn = torch.nested.as_nested_tensor(parts(v, kv_rep), layout=torch.jagged)
            f = lambda: F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal)  # noqa: E731
            f()
            return timeit(f, ARGS.reps)[0], "jagged"
        except Exception:  # noqa: BLE001
            pass
        if causal:  # a padded causal batch with a key mask is not the same attention for short rows
            return math.nan, "-"
        B, S = len(lens), max(lens)
        qp = torch.zeros(B, HQ, S, D, device=dev, dtype=q.dtype)
        kp, vp = torch.zeros_like(qp), torch.zeros_like(qp)
        mask = torch.zeros(B, 1, 1, S, device=dev, dtype=torch.bool)
        for i, s in enumerate(lens):
            qp[i, :, :s] = q[cu[i]:cu[i + 1]].transpose(0, 1)
            kp[i, :, :s] = k[cu[i]:cu[i + 1]].repeat_interleave(kv_rep, 1).transpose(0, 1)
            vp[i, :, :s] = v[cu[i]:cu[i + 1]].repeat_interleave(kv_rep, 1).transpose(0, 1)
            mask[i, ..., :s] = True
        try:
            f = lambda: F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask)  # noqa: E731
            f()
            return timeit(f, ARGS.reps)[0], "pad"
        except Exception:  # noqa: BLE001
            return math.nan, "-"


def run_case(rows, name, lens, hkv, D, causal):
    B = len(lens)
    cu = torch.tensor([0] + list(itertools_accumulate(lens)), device=dev, dtype=torch.int32)
    T = int(cu[-1])
    q = torch.randn(T, HQ, D, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(T, hkv, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
    maxs = max(lens)
    out, lse = hk.prefill(q, k, v, cu, cu, maxs, causal)
    torch.cuda.synchronize()
    err, ok = check(q, k, v, out, cu, lens, causal, D)
    if not ok:
        print(f"FAIL {name} hkv={hkv} D={D} causal={causal}: rel_l2 {err:.2e} vs float64")
        sys.exit(1)
    flops = sum(4 * HQ * s * s * D / (2 if causal else 1) for s in lens)
    r = {"case": name, "B": B, "lens": lens if len(set(lens)) > 1 else lens[0], "hkv": hkv, "D": D,
         "causal": causal, "rel_l2": err}
    r["ours"] = flops / timeit(lambda: hk.prefill(q, k, v, cu, cu, maxs, causal, None, out, lse), ARGS.reps)[0] / 1e9
    r["flashinfer"] = math.nan
    if FI is not None and not ARGS.no_baselines:
        try:  # FlashInfer's FA2 ragged prefill on the same tensors, checked like ours before timing
            call, fo = FI.prefill(q, k, v, cu, cu, causal)
            call()
            torch.cuda.synchronize()
            e, fok = check(q, k, v, fo, cu, lens, causal, D)
            if fok:
                r["flashinfer"] = flops / timeit(call, ARGS.reps)[0] / 1e9
            else:
                print(f"  FlashInfer: rel_l2 {e:.2e} vs float64: wrong, not timed")
        except Exception as ex:  # noqa: BLE001
            # whole, and printed the first time: a missing module's name is past the first 120 characters
            r["flashinfer_error"] = f"{type(ex).__name__}: {str(ex)[:2000]}"
            if not FI_ERRORS:
                print(f"  FlashInfer not measured: {r['flashinfer_error']}", flush=True)
            FI_ERRORS.append(r["flashinfer_error"])
    for bn, be in BACKENDS:
        if ARGS.no_baselines:
            r[bn], r[bn + "_how"] = math.nan, "-"
            continue
        if len(set(lens)) == 1:
            ms, how = sdpa_fixed(q, k, v, B, lens[0], hkv, D, causal, be)
        else:
            ms, how = sdpa_varlen(q, k, v, lens, hkv, D, causal, be)
        r[bn], r[bn + "_how"] = flops / ms / 1e9 if ms == ms else math.nan, how
    best = max((r[b] for b in ("cudnn", "flash", "flashinfer") if r[b] == r[b]), default=math.nan)
    r["vs_best"] = r["ours"] / best if best == best else math.nan
    r["vs_cudnn"] = r["ours"] / r["cudnn"] if r["cudnn"] == r["cudnn"] else math.nan
    rows.append(r)
    ratio = f"{HQ // hkv}" if hkv > 1 else "MQA"
    print(f"| {name} | {ratio} | {D} | {'causal' if causal else 'full'} | {r['ours']:.0f} | {r['cudnn']:.0f}{r['cudnn_how']} | "
          f"{r['flash']:.0f}{r['flash_how']} | {r['flashinfer']:.0f} | {r['vs_cudnn']:.2f} | {r['vs_best']:.2f} | {err:.1e} |", flush=True)
    del q, k, v, out, lse
    torch.cuda.empty_cache()


def itertools_accumulate(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="a quarter of the grid, for a smoke run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--short", action="store_true", help="only the short-sequence grid (128 to 2.5k tokens a sequence)")
    ap.add_argument("--only", default="", help="comma-separated BxS shapes of the fixed grid to run (e.g. 1x512,1x256); no varlen rows")
    ap.add_argument("--no-baselines", action="store_true", help="ours only (e.g. another HK_ATTN_PREFILL_IMPL)")
    ap.add_argument("--flashinfer", default=None, help="dir holding the prebuilt flashinfer package (bench/gpu/flashinfer_prep.sh)")
    ARGS = ap.parse_args()
    global FI
    FI = flashinfer_attn.load(ARGS.flashinfer)
    torch.manual_seed(0)
    fixed = [(32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384), (1, 32768), (1, 512)]
    # short sequences, where the grid is thin (issue 23: 0.58x at 256 tokens, 0.76x at 640-1024)
    short = [(1, 128), (64, 128), (1, 256), (16, 256), (1, 640), (4, 640), (1, 1024), (2, 1536), (1, 2560), (8, 256)]
    if ARGS.short:
        fixed = short
    else:
        fixed = short + fixed
    g = torch.Generator().manual_seed(7)
    varlen = {"varlen 16 x U[128,4k]": [int(x) for x in torch.randint(128, 4097, (16,), generator=g)],
              "varlen 8 x U[1k,16k]": [int(x) for x in torch.randint(1024, 16385, (8,), generator=g)],
              "varlen 32 x log[64,8k]": [int(round(math.exp(x))) for x in
                                         torch.empty(32).uniform_(math.log(64), math.log(8192), generator=g)]}
    hkvs, dims = (32, 8, 4, 1), (128, 64)
    if ARGS.only:
        fixed = [tuple(int(x) for x in s.split("x")) for s in ARGS.only.split(",")]
        varlen = {}
    if ARGS.short:
        varlen = {"varlen 8 x U[64,1k]": [int(x) for x in torch.randint(64, 1025, (8,), generator=g)]}
    if ARGS.quick:
        fixed, hkvs, varlen = fixed[1::3], (32, 1), dict(list(varlen.items())[:1])
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"our kernel: {hk.prefill_kernel()}; bf16, Hq = {HQ}; TFLOP/s, median of {ARGS.reps}")
    print("| case | GQA | D | mask | ours | SDPA cuDNN | SDPA flash | FlashInfer FA2 | ours/cuDNN | ours/best | rel_l2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for D in dims:
        for causal in (False, True):
            for hkv in hkvs:
                for B, S in fixed:
                    run_case(rows, f"B{B} S{S}", [S] * B, hkv, D, causal)
                for name, lens in varlen.items():
                    run_case(rows, name, lens, hkv, D, causal)
    vs = [r["vs_best"] for r in rows if r["vs_best"] == r["vs_best"]]
    if not vs:  # ours only (--no-baselines): no ratios to sum up
        if ARGS.json:
            with open(ARGS.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 0
    behind = [r for r in rows if r["vs_best"] == r["vs_best"] and r["vs_best"] < 0.98]
    print(f"\nours / best of cuDNN, flash, FlashInfer: median {statistics.median(vs):.3f}x, min {min(vs):.3f}x over {len(vs)} cases; "
          f"{len(behind)} cases more than 2 % behind")
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
