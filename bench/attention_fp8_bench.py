"""Decode over an FP8 (e4m3fn) KV cache vs the same decode over a bf16 cache of the same shapes
(B 1-64, contexts 1k-128k, contiguous and paged 16-256, ragged batches), one process, same run.
Bytes = the K+V rows the batch really holds (sum of lengths x Hkv x D x 2, times 1 byte for FP8,
2 for bf16); "% copy" = those bytes over the time, against the device-to-device copy (1 GB, read +
write) measured in the same run. tokens/s ratio = bf16 time / FP8 time (same tokens). Baselines
in the same run on the uniform contiguous cases: SDPA's best backend (cuDNN / flash) on the bf16
cache, and, for the FP8 cache, the path a torch user has (dequantise to bf16 with the scales,
then SDPA); whether torch SDPA takes FP8 K/V directly, and whether flash_attn / flashinfer are
installed, is probed and printed. Timing as bench/attention_bench.py: CUDA events, 256 MB L2 flush
before each rep, warm-up, median; fresh random inputs per case; every FP8 output is poisoned
(NaN) and checked against float64 on the dequantised cache (3 sequences) before it is timed.
With --flashinfer DIR (bench/gpu/flashinfer_attn.py), every case also runs FlashInfer's FP8 and
bf16 decode (CUDA-core and tensor-core paths, the faster kept) on the same caches; its FP8 API takes
one scale per tensor, so it gets the mean of the per-head scales (the same bytes and work).
Usage: python3 bench/attention_fp8_bench.py [--reps N] [--quick] [--pick i,j,...] [--flashinfer DIR]"""
import argparse, importlib.util, json, math, os, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "attention", "tests"))
import hk_attention_ctypes as hk
from test_attention_gpu import ref_attn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_bench import timeit as _timeit  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
import flashinfer_attn  # noqa: E402

dev = torch.device("cuda")
HQ, HKV, D = 32, 8, 128


def timeit(fn, reps, warm=10):
    """Median ms (attention_bench's events + L2 flush before each rep)."""
    return _timeit(fn, reps, warm)[0]


def caches(B, lens, bs, dtype8):
    """K/V caches (bf16 and FP8 of the same shape: bshd, or pages of bs tokens in random order)."""
    smax = max(max(lens), 1)
    if bs == 0:
        shape, strides, bt = (B, smax, HKV, D), (smax * HKV * D, HKV * D, D), None
    else:
        mb = (smax + bs - 1) // bs
        nblk = B * mb
        shape, strides = (nblk, bs, HKV, D), (bs * HKV * D, HKV * D, D)
        bt = torch.randperm(nblk, device=dev).to(torch.int32).view(B, mb).contiguous()
    mk = lambda: (torch.randn(*shape, device=dev, dtype=torch.bfloat16) * 2)
    k16, v16 = mk(), mk()
    return k16, v16, k16.to(dtype8), v16.to(dtype8), strides, bt


def gather(cache, b, L, bt, bs):
    idx = torch.arange(L, device=dev)
    return cache[b, :L] if bt is None else cache[bt[b, idx // bs].long(), idx % bs]


def run_case(args, name, lens, bs, qlen, rows):
    B = len(lens)
    smax = max(max(lens), 1)
    q = torch.randn(B, qlen, HQ, D, device=dev, dtype=torch.bfloat16)
    k16, v16, k8, v8, strides, bt = caches(B, lens, bs, torch.float8_e4m3fn)
    ks = (torch.rand(HKV, device=dev) * 0.1 + 0.02).float(); vs = (torch.rand(HKV, device=dev) + 0.5).float()
    sl = torch.tensor(lens, dtype=torch.int32, device=dev)
    out8 = torch.full_like(q, float("nan"))
    c8 = hk.Decode(q, k8, v8, strides, sl, smax, bt, bs, None, 0, out8, None, ks, vs).set_hkv(HKV)
    c16 = hk.Decode(q, k16, v16, strides, sl, smax, bt, bs, None, 0).set_hkv(HKV)
    c8(); torch.cuda.synchronize()
    err = 0.0
    order = sorted(range(B), key=lambda i: lens[i])
    for b in {order[0], order[-1], order[B // 2]}:
        L = lens[b]
        if L == 0:
            continue
        kk = gather(k8, b, L, bt, bs).double() * ks.view(1, -1, 1).double()
        vv = gather(v8, b, L, bt, bs).double() * vs.view(1, -1, 1).double()
        ro, _ = ref_attn(q[b], kk, vv, qlen, L, True, D ** -0.5)
        err = max(err, float((out8[b].double() - ro).norm() / ro.norm()))
    t8 = timeit(c8, args.reps)
    t16 = timeit(c16, args.reps)
    os.environ["HK_ATTN_DECODE_CPS"] = "2"
    t8c2 = timeit(c8, args.reps)
    del os.environ["HK_ATTN_DECODE_CPS"]
    tok = sum(lens)
    b8, b16 = tok * HKV * D * 2, tok * HKV * D * 2 * 2
    r = {"case": name, "B": B, "page": bs, "q_len": qlen, "tokens": tok, "kernel": c8.kernel(), "splits": c8.num_splits,
         "fp8_us": t8 * 1e3, "bf16_us": t16 * 1e3, "fp8_cps2_us": t8c2 * 1e3,
         "fp8_pct_copy": 100 * b8 / t8 / 1e6 / args.copy, "bf16_pct_copy": 100 * b16 / t16 / 1e6 / args.copy,
         "fp8_cps2_pct_copy": 100 * b8 / t8c2 / 1e6 / args.copy, "tok_ratio": t16 / t8, "rel_l2": err}
    if bs == 0 and len(set(lens)) == 1 and qlen == 1:  # baselines on the padded-free uniform case
        S = lens[0]
        qs = q.transpose(1, 2)
        kb, vb = k16.transpose(1, 2), v16.transpose(1, 2)  # [B,Hkv,S,D] views of the bf16 cache
        best = float("inf")
        for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            try:
                with sdpa_kernel(be):
                    best = min(best, timeit(lambda: F.scaled_dot_product_attention(qs, kb, vb, enable_gqa=True), args.reps))
            except Exception:
                pass
        k8t, v8t = k8.transpose(1, 2), v8.transpose(1, 2)
        ksb, vsb = ks.view(1, -1, 1, 1).to(torch.bfloat16), vs.view(1, -1, 1, 1).to(torch.bfloat16)
        def deq_sdpa():
            return F.scaled_dot_product_attention(qs, k8t.to(torch.bfloat16) * ksb, v8t.to(torch.bfloat16) * vsb, enable_gqa=True)
        try:
            tdq = timeit(deq_sdpa, args.reps)
        except Exception:
            tdq = float("nan")
        r.update({"sdpa_bf16_us": best * 1e3, "sdpa_bf16_pct_copy": 100 * b16 / best / 1e6 / args.copy,
                  "deq_sdpa_us": tdq * 1e3, "fp8_vs_sdpa_bf16": best / t8, "fp8_vs_deq_sdpa": tdq / t8})
    if args.fi is not None:  # FlashInfer, FP8 (one scale per tensor: its API) and bf16, same caches
        bl = order[-1]
        ksc, vsc = float(ks.mean()), float(vs.mean())

        def check_fn(kcache, vcache, sk, sv):
            def check(o):
                L = lens[bl]
                kk = gather(kcache, bl, L, bt, bs).double() * sk
                vv = gather(vcache, bl, L, bt, bs).double() * sv
                ro, _ = ref_attn(q[bl], kk, vv, qlen, L, True, D ** -0.5)
                return float((o[bl].double() - ro).norm() / ro.norm())
            return check
        f8 = flashinfer_attn.time_decode(args.fi, timeit, args.reps, q, k8, v8, lens, bt, bs, check_fn(k8, v8, ksc, vsc),
                                         ksc, vsc)
        f16 = flashinfer_attn.time_decode(args.fi, timeit, args.reps, q, k16, v16, lens, bt, bs, check_fn(k16, v16, 1.0, 1.0))
        b8f = min([v for v in f8.values() if v is not None] or [float("nan")])
        b16f = min([v for v in f16.values() if v is not None] or [float("nan")])
        r.update({"fi_fp8_us": {k: (v * 1e3 if v else None) for k, v in f8.items()},
                  "fi_bf16_us": {k: (v * 1e3 if v else None) for k, v in f16.items()},
                  "fp8_vs_fi_fp8": b8f / t8, "bf16_vs_fi_bf16": b16f / t16})
    rows.append(r)
    fib = (f" | FI fp8 {r['fp8_vs_fi_fp8']:.2f}x, FI bf16 {r['bf16_vs_fi_bf16']:.2f}x" if "fp8_vs_fi_fp8" in r else "")
    base = (f" | SDPA bf16 {r['sdpa_bf16_pct_copy']:.0f}% ({r['sdpa_bf16_us']:.0f} us), fp8/SDPA-bf16 tok/s {r['fp8_vs_sdpa_bf16']:.2f}x, "
            f"dequant+SDPA {r['deq_sdpa_us']:.0f} us ({r['fp8_vs_deq_sdpa']:.1f}x)") if "sdpa_bf16_us" in r else ""
    print(f"| {name} | {'contig' if bs == 0 else bs} | {qlen} | {r['kernel']} | {t8*1e3:.1f} | {r['fp8_pct_copy']:.0f}% | "
          f"{r['fp8_cps2_pct_copy']:.0f}% | {t16*1e3:.1f} | {r['bf16_pct_copy']:.0f}% | {r['tok_ratio']:.2f} | {err:.1e} |{base}{fib}", flush=True)
    del k16, v16, k8, v8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30); ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pick", default="", help="comma-separated case indices (default: all)")
    ap.add_argument("--flashinfer", default=None, help="dir holding the prebuilt flashinfer package (bench/gpu/flashinfer_prep.sh)")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "attention_fp8_bench.json"))
    args = ap.parse_args()
    args.fi = flashinfer_attn.load(args.flashinfer)
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev); b = torch.empty_like(a)
    args.copy = 2 * n / timeit(lambda: b.copy_(a), 30) / 1e6
    del a, b
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "copy_GBps": args.copy, "flash_attn": importlib.util.find_spec("flash_attn") is not None,
            "flashinfer": importlib.util.find_spec("flashinfer") is not None}
    try:  # does SDPA take FP8 K/V?
        qq = torch.randn(1, HQ, 1, D, device=dev, dtype=torch.bfloat16)
        kk = torch.randn(1, HQ, 64, D, device=dev).to(torch.float8_e4m3fn)
        F.scaled_dot_product_attention(qq, kk, kk)
        info["sdpa_fp8_kv"] = "accepted"
    except Exception as e:
        info["sdpa_fp8_kv"] = "rejected: " + str(e).splitlines()[0][:100]
    print(info)
    print(f"\n## Decode, FP8 (e4m3fn, per-head scales) vs bf16 cache, Hq={HQ}, Hkv={HKV}, D={D}, bf16 queries "
          f"(median of {args.reps}; % of the {args.copy:.0f} GB/s copy)")
    print("| case | page | q_len | kernel | fp8 us | fp8 % copy | fp8 2 CTAs/SM % | bf16 us | bf16 % copy | tok/s fp8/bf16 | rel_l2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(7)
    def logu(B, lo, hi):
        x = torch.rand(B, generator=g) * (math.log(hi) - math.log(lo)) + math.log(lo)
        return [int(v) for v in x.exp().round()]
    def uni(B, lo, hi):
        return [int(v) for v in torch.randint(lo, hi + 1, (B,), generator=g)]
    cases = [("B1 128k", [131072], 0, 1), ("B8 32k", [32768] * 8, 0, 1), ("B16 8k", [8192] * 16, 0, 1),
             ("B64 1k", [1024] * 64, 0, 1), ("B64 8k", [8192] * 64, 0, 1), ("B8 128k", [131072] * 8, 0, 1)]
    for bs in (16, 64, 256):
        cases += [(f"B16 32k", [32768] * 16, bs, 1), (f"B64 2k", [2048] * 64, bs, 1)]
    cases += [("B1 128k", [131072], 16, 1), ("B16 8k q4", [8192] * 16, 64, 4)]
    for bs in (16, 64, 256):
        cases.append(("B32 log[64,32k]", logu(32, 64, 32768), bs, 1))
    cases += [("B16 U[2k,8k]", uni(16, 2048, 8192), 32, 1), ("B64 U[512,2k]", uni(64, 512, 2048), 16, 1),
              ("B8 U[1,64k] contig", uni(8, 1, 65536), 0, 1)]
    if args.quick:
        cases = cases[:3]
    if args.pick:
        cases = [cases[int(i)] for i in args.pick.split(",")]
    rows = []
    for name, lens, bs, ql in cases:
        torch.manual_seed(len(rows) + 11)
        run_case(args, name, lens, bs, ql, rows)
    json.dump({"info": info, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
