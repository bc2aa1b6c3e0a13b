"""Decode on ragged batches (sequence lengths drawn from a wide range, pages of 16-256 tokens):
our CUDA decode with the balanced plan vs the same library with uniform splits, the previous
library (HK_ATTN_OLD_LIB, built from the last commit) and SDPA (cuDNN, flash) on the padded
equivalent (every sequence padded to the longest, the work a padded engine does), same run, same
data. Bytes = the K+V rows the batch really holds (sum of lengths x Hkv x D x 2 x 2); GB/s of each
row = those bytes over its time, so a padded baseline pays for its padding. The copy ceiling (1 GB
device-to-device, read+write) is measured in the same run. Timing as bench/attention_bench.py
(CUDA events, 256 MB L2 flush before each rep, 25 warm-ups, median). Our outputs are poisoned
(NaN) before the first call and checked against float64 on 3 sequences (the shortest, the longest,
one more) before timing. Usage: HK_ATTN_LIB=new.so HK_ATTN_OLD_LIB=old.so python3
bench/attention_ragged_bench.py [--reps N] [--flashinfer DIR]
FlashInfer (--flashinfer, bench/gpu/flashinfer_attn.py): its CUDA-core and tensor-core decode on the
same paged or contiguous cache (no padding), each checked against float64 before it is timed."""
import argparse, ctypes, json, math, os, sys
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


def timeit(fn, reps, warm=25):
    """Median ms (attention_bench's events + L2 flush before each rep)."""
    return _timeit(fn, reps, warm)[0]


def load(path):
    L = ctypes.CDLL(path)
    vp, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    L.hk_attn_decode_cuda.argtypes = [vp, vp, vp, ctypes.POINTER(hk.KV), vp, i, i, i, i, i, i, i, f, i, vp,
                                      ctypes.c_size_t, vp]
    L.hk_attn_decode_cuda_num_splits.argtypes = [i] * 7
    L.hk_attn_decode_cuda_workspace_size.argtypes = [i] * 5
    L.hk_attn_decode_cuda_workspace_size.restype = ctypes.c_size_t
    L.hk_attn_decode_cuda_kernel.argtypes = [ctypes.POINTER(hk.KV), i, i, i, i]
    L.hk_attn_decode_cuda_kernel.restype = ctypes.c_char_p
    return L


class Call:
    """One prepared decode call on library L (workspace sized by L's own heuristic)."""

    def __init__(self, L, q, kc, vc, strides, sl, smax, bt, bs, hkv, out):
        self.L, self.q, self.sl, self.out = L, q, sl, out
        self.B, self.ql, self.hq, self.D = q.shape
        self.hkv, self.smax = hkv, smax
        self.lse = torch.empty(self.B, self.ql, self.hq, device=dev, dtype=torch.float32)
        self.kv = hk.KV(kc.data_ptr(), vc.data_ptr(), *strides, bt.data_ptr() if bt is not None else None, bs,
                        bt.shape[1] if bt is not None else 0)
        self.ns = L.hk_attn_decode_cuda_num_splits(self.B, self.ql, self.hq, hkv, self.D, smax, bs if bt is not None else 0)
        ws = L.hk_attn_decode_cuda_workspace_size(self.B, self.ql, self.hq, self.D, self.ns)
        self.ws = torch.zeros(max(ws, 16), dtype=torch.uint8, device=dev)
        self.kernel = L.hk_attn_decode_cuda_kernel(ctypes.byref(self.kv), self.B, hkv, self.D, smax).decode()

    def __call__(self):
        rc = self.L.hk_attn_decode_cuda(self.out.data_ptr(), self.lse.data_ptr(), self.q.data_ptr(), ctypes.byref(self.kv),
                                        self.sl.data_ptr(), self.B, self.ql, self.hq, self.hkv, self.D, self.smax, 0,
                                        self.D ** -0.5, self.ns, self.ws.data_ptr(), self.ws.numel(),
                                        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        assert rc == 0, rc


def lengths(kind, B, lo, hi, g):
    if kind == "log":
        x = torch.rand(B, generator=g) * (math.log(hi) - math.log(lo)) + math.log(lo)
        return [int(v) for v in x.exp().round().clamp(lo, hi)]
    return [int(v) for v in torch.randint(lo, hi + 1, (B,), generator=g)]


def case(args, L_new, L_old, rows, name, B, lens, bs, qlen=1, Hq=32, Hkv=8, D=128):
    smax = max(lens)
    nbytes = sum(lens) * Hkv * D * 2 * 2
    q = torch.randn(B, qlen, Hq, D, device=dev, dtype=torch.bfloat16)
    sl = torch.tensor(lens, dtype=torch.int32, device=dev)
    if bs:
        nb = [(l + bs - 1) // bs for l in lens]
        nblk = sum(nb) + 3
        kc = torch.randn(nblk, bs, Hkv, D, device=dev, dtype=torch.bfloat16); vc = torch.randn_like(kc)
        perm = torch.randperm(nblk, device=dev).to(torch.int32)
        mb = max(nb)
        bt = torch.zeros(B, mb, dtype=torch.int32, device=dev)
        o = 0
        for b in range(B):
            bt[b, :nb[b]] = perm[o:o + nb[b]]; o += nb[b]
        strides = (bs * Hkv * D, Hkv * D, D)
    else:  # contiguous [B, smax, Hkv, D]
        kc = torch.randn(B, smax, Hkv, D, device=dev, dtype=torch.bfloat16); vc = torch.randn_like(kc)
        bt, strides = None, (smax * Hkv * D, Hkv * D, D)
    out = torch.full_like(q, float("nan"))
    calls = {}
    calls["new balanced"] = Call(L_new, q, kc, vc, strides, sl, smax, bt, bs, Hkv, out)
    # float64 check of the new path before timing (poisoned output)
    calls["new balanced"](); torch.cuda.synchronize()
    order = sorted(range(B), key=lambda b: lens[b])
    errs = []
    for b in sorted({order[0], order[-1], order[B // 2]}):
        Lb = lens[b]; idx = torch.arange(Lb, device=dev)
        if bt is not None:
            k0, v0 = kc[bt[b, idx // bs].long(), idx % bs], vc[bt[b, idx // bs].long(), idx % bs]
        else:
            k0, v0 = kc[b, :Lb], vc[b, :Lb]
        ro, _ = ref_attn(q[b], k0, v0, qlen, Lb, True, D ** -0.5)
        errs.append(float((out[b].double() - ro).norm() / ro.norm()))
    err = max(errs)
    ok = err < 1e-2 and not torch.isnan(out).any()
    r = {"case": name, "B": B, "page": bs, "q_len": qlen, "min_len": min(lens), "max_len": smax, "mean_len": sum(lens) / B,
         "MB": nbytes / 1e6, "rel_l2": err, "ok": ok, "kernel": calls["new balanced"].kernel, "splits_arg": calls["new balanced"].ns}
    t = {}
    t["new balanced"] = timeit(calls["new balanced"], args.reps)
    os.environ["HK_ATTN_DECODE_CPS"] = "2"
    t["new balanced 2/SM"] = timeit(calls["new balanced"], args.reps)
    del os.environ["HK_ATTN_DECODE_CPS"]
    os.environ["HK_ATTN_DECODE_PLAN"] = "uniform"
    t["new uniform"] = timeit(calls["new balanced"], args.reps)
    del os.environ["HK_ATTN_DECODE_PLAN"]
    if L_old is not None:
        out_old = torch.full_like(q, float("nan"))
        c_old = Call(L_old, q, kc, vc, strides, sl, smax, bt, bs, Hkv, out_old)
        c_old(); torch.cuda.synchronize()
        r["new_vs_old_max_abs"] = float((out_old.float() - out.float()).abs().max())
        t["old (HEAD)"] = timeit(c_old, args.reps)
    # SDPA on the padded equivalent [B, Hkv, smax, D] (padding random, no mask: the padded work)
    if not args.no_sdpa:
        kp = torch.randn(B, Hkv, smax, D, device=dev, dtype=torch.bfloat16); vp = torch.randn_like(kp)
        qs = q.transpose(1, 2)
        for nm, be in (("SDPA cuDNN padded", SDPBackend.CUDNN_ATTENTION), ("SDPA flash padded", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    t[nm] = timeit(lambda: F.scaled_dot_product_attention(qs, kp, vp, enable_gqa=True), args.reps)
            except Exception as e:
                t[nm] = float("nan")
        del kp, vp
    if args.fi is not None:  # FlashInfer on the same cache, checked on the longest sequence
        bl = order[-1]

        def check(o, bl=bl):
            Lb = lens[bl]; idx = torch.arange(Lb, device=dev)
            k0 = kc[bt[bl, idx // bs].long(), idx % bs] if bt is not None else kc[bl, :Lb]
            v0 = vc[bt[bl, idx // bs].long(), idx % bs] if bt is not None else vc[bl, :Lb]
            ro, _ = ref_attn(q[bl], k0, v0, qlen, Lb, True, D ** -0.5)
            return float((o[bl].double() - ro).norm() / ro.norm())
        for k, v in flashinfer_attn.time_decode(args.fi, timeit, args.reps, q, kc, vc, lens, bt, bs, check).items():
            t[k] = v if v is not None else float("nan")
    r["us"] = {k: v * 1e3 for k, v in t.items()}
    r["GBps"] = {k: nbytes / v / 1e6 for k, v in t.items()}
    rows.append(r)
    g = r["GBps"]
    best_sdpa = max([g[k] for k in g if k.startswith("SDPA") and not math.isnan(g[k])] or [float("nan")])
    best_fi = max([g[k] for k in g if k.startswith("FI ") and not math.isnan(g[k])] or [float("nan")])
    best_base = max([x for x in (best_sdpa, best_fi) if not math.isnan(x)] or [float("nan")])
    r["vs_best_baseline"] = g["new balanced"] / best_base
    print(f"| {name} | {bs or 'contig'} | {qlen} | {min(lens)}-{smax} ({sum(lens)//B}) | {nbytes/1e6:.0f} | "
          f"{g['new balanced']:.0f} ({100*g['new balanced']/args.copy:.0f}%) | {100*g['new balanced 2/SM']/args.copy:.0f}% | "
          f"{100*g['new uniform']/args.copy:.0f}% | {100*g.get('old (HEAD)', float('nan'))/args.copy:.0f}% | "
          f"{100*best_sdpa/args.copy:.0f}% | {g['new balanced']/g.get('old (HEAD)', float('nan')):.2f} | "
          f"{g['new balanced']/best_sdpa:.2f} | {100*best_fi/args.copy:.0f}% | {g['new balanced']/best_fi:.2f} | "
          f"{g['new balanced']/best_base:.2f} | {err:.1e}{'' if ok else ' FAIL'} |", flush=True)
    del kc, vc, q, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30); ap.add_argument("--no-sdpa", action="store_true")
    ap.add_argument("--flashinfer", default=None, help="dir holding the prebuilt flashinfer package (bench/gpu/flashinfer_prep.sh)")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "attention_ragged.json"))
    args = ap.parse_args()
    L_new = hk.lib()
    args.fi = flashinfer_attn.load(args.flashinfer)
    L_old = load(os.environ["HK_ATTN_OLD_LIB"]) if os.environ.get("HK_ATTN_OLD_LIB") else None
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev); b = torch.empty_like(a)
    args.copy = 2 * n / timeit(lambda: b.copy_(a), 50) / 1e6
    del a, b
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "copy_GBps": args.copy}
    print(info)
    print(f"\n## Ragged decode, bf16, Hq=32, Hkv=8, D=128 (GB/s of the K+V the batch holds; % of copy {args.copy:.0f} GB/s; median of {args.reps})")
    print("| case | page | q_len | lengths min-max (mean) | MB | new balanced GB/s (% copy) | balanced 2 CTAs/SM | new uniform plan | old (HEAD) | best SDPA padded | new/old | new/SDPA | best FlashInfer | new/FI | new/best baseline | rel_l2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(int(os.environ.get("SEED", "1234")))
    rows = []
    for bs in (16, 32, 256):
        case(args, L_new, L_old, rows, "B16 U[2k,8k]", 16, lengths("u", 16, 2048, 8192, g), bs)
    for bs in (16, 128):
        case(args, L_new, L_old, rows, "B64 U[512,2k]", 64, lengths("u", 64, 512, 2048, g), bs)
    for bs in (16, 64, 256):
        case(args, L_new, L_old, rows, "B32 log[64,32k]", 32, lengths("log", 32, 64, 32768, g), bs)
    case(args, L_new, L_old, rows, "B128 U[16,4k]", 128, lengths("u", 128, 16, 4096, g), 32)
    case(args, L_new, L_old, rows, "B8 U[1,64k]", 8, lengths("u", 8, 1, 65536, g), 128)
    case(args, L_new, L_old, rows, "B32 U[1k,16k] contiguous", 32, lengths("u", 32, 1024, 16384, g), 0)
    case(args, L_new, L_old, rows, "B32 U[256,16k] spec q4", 32, lengths("u", 32, 256, 16384, g), 64, qlen=4)
    case(args, L_new, L_old, rows, "B16 uniform 8k (control)", 16, [8192] * 16, 16)
    # the shapes issue 23's independent run found weakest: lengths over 4 orders of magnitude on a
    # contiguous cache, q_len 2-8 on 16-token pages, long uniform contiguous contexts
    case(args, L_new, L_old, rows, "B32 log[1,31k] contiguous", 32, lengths("log", 32, 1, 31000, g), 0)
    for ql in (2, 3, 4, 8):
        case(args, L_new, L_old, rows, f"B32 U[256,16k] q{ql}", 32, lengths("u", 32, 256, 16384, g), 16, qlen=ql)
    case(args, L_new, L_old, rows, "B16 uniform 16k contiguous", 16, [16384] * 16, 0)
    case(args, L_new, L_old, rows, "B64 uniform 2k contiguous", 64, [2048] * 64, 0)
    json.dump({"info": info, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
