"""Attention benchmark on the GPU: our CUDA kernels vs PyTorch SDPA backends, same run, same data.
Prefill: TFLOP/s, FA convention 4*B*H*S^2*D (halved for causal). Decode: GB/s of K+V read
(2*B*Hkv*S*D*2 bytes). Timing: CUDA events around each call, L2 flushed (256 MB write) before each
rep, warm-up first, median (and min) of N reps. Fresh random inputs per shape; each of our outputs
is checked against float64 on a subset of heads before it is timed.
Usage: python3 bench/attention_bench.py [--prefill] [--decode] [--reps N] [--splits a,b,c]"""
import argparse, json, math, os, statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "attention", "tests"))
import hk_attention_ctypes as hk
from test_attention_gpu import ref_attn

dev = torch.device("cuda")
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=dev)


def timeit(fn, reps, warm=25):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush_buf.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record()
        ts.append((a, b))
    torch.cuda.synchronize()
    ms = [a.elapsed_time(b) for a, b in ts]
    return statistics.median(ms), min(ms)


def rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


def bench_prefill(args, rows):
    print(f"\n## Prefill, bf16, B*S = 16384 tokens, H = 32 (TFLOP/s, median of {args.reps}; rel_l2 vs float64 on 2 heads); "
          f"our kernel: {hk.prefill_kernel()}")
    print("| D | mask | S | B | ours | SDPA flash | SDPA cuDNN | SDPA efficient | ours/flash | ours/cuDNN | rel_l2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for D in args.dims:
        for causal in (False, True):
            for S in (1024, 4096, 16384):
                B, H = 16384 // S, 32
                q, k, v = (torch.randn(B * S, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
                cu = torch.arange(0, B + 1, device=dev, dtype=torch.int32) * S
                out, lse = hk.prefill(q, k, v, cu, cu, S, causal)
                torch.cuda.synchronize()
                # check 2 heads of the first sequence (float64)
                sub = [0, H - 1]
                ro, _ = ref_attn(q[:S, sub], k[:S, sub], v[:S, sub], S, S, causal, D ** -0.5)
                err = rel_err(out[:S, sub], ro)
                flops = 4 * B * H * S * S * D / (2 if causal else 1)
                r = {"D": D, "causal": causal, "S": S, "B": B, "rel_l2": err}
                r["ours"] = flops / timeit(lambda: hk.prefill(q, k, v, cu, cu, S, causal, None, out, lse), args.reps)[0] / 1e9
                qs, ks, vs = (t.view(B, S, H, D).transpose(1, 2) for t in (q, k, v))
                for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                 ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                    if args.no_baselines:
                        r[name] = float("nan"); continue
                    try:
                        with sdpa_kernel(be):
                            r[name] = flops / timeit(lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal), args.reps)[0] / 1e9
                    except Exception as e:
                        r[name] = float("nan"); r[name + "_err"] = str(e)[:80]
                rows.append(r)
                print(f"| {D} | {'causal' if causal else 'full'} | {S} | {B} | {r['ours']:.0f} | {r['flash']:.0f} | {r['cudnn']:.0f} | "
                      f"{r['efficient']:.0f} | {r['ours']/r['flash']:.2f} | {r['ours']/r['cudnn']:.2f} | {err:.1e} |", flush=True)
                del q, k, v, out


def bench_decode(args, rows):
    B, Hq, Hkv, D = 16, 32, 8, 128
    print(f"\n## Decode, bf16, B={B}, Hq={Hq}, Hkv={Hkv}, D={D}, q_len=1 (GB/s of K+V read, median of {args.reps}; time in us)")
    print("| ctx | KV layout | kernel | splits | ours GB/s (us) | % of copy | SDPA best GB/s (backend) | SDPA default | ours/best | rel_l2 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for S in (4096, 32768):
        nbytes = 2 * B * Hkv * S * D * 2
        q = torch.randn(B, 1, Hq, D, device=dev, dtype=torch.bfloat16)
        # SDPA layout [B,Hkv,S,D]; ours reads the same tensors through strides
        kc = torch.randn(B, Hkv, S, D, device=dev, dtype=torch.bfloat16); vc = torch.randn_like(kc)
        qs = q.transpose(1, 2)  # [B,Hq,1,D]
        sd = {}
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)):
            try:
                with sdpa_kernel(be):
                    sd[name] = nbytes / timeit(lambda: F.scaled_dot_product_attention(qs, kc, vc, enable_gqa=True), args.reps)[0] / 1e6
            except Exception as e:
                sd[name] = float("nan")
        sd["default"] = nbytes / timeit(lambda: F.scaled_dot_product_attention(qs, kc, vc, enable_gqa=True), args.reps)[0] / 1e6
        best_name = max((n for n in sd if n != "default" and not math.isnan(sd[n])), key=lambda n: sd[n])
        sl = torch.full((B,), S, dtype=torch.int32, device=dev)
        ref_o = None
        layouts = [("bhsd (SDPA)", kc, vc, (Hkv * S * D, D, S * D), None, 0)]
        kb = torch.randn(B, S, Hkv, D, device=dev, dtype=torch.bfloat16); vb = torch.randn_like(kb)
        layouts.append(("bshd", kb, vb, (S * Hkv * D, Hkv * D, D), None, 0))
        for bs in (16, 128):
            nblk = B * S // bs
            perm = torch.randperm(nblk, device=dev).to(torch.int32)
            bt = perm.view(B, S // bs).contiguous()
            kp = torch.randn(nblk, bs, Hkv, D, device=dev, dtype=torch.bfloat16); vp = torch.randn_like(kp)
            layouts.append((f"paged {bs}", kp, vp, (bs * Hkv * D, Hkv * D, D), bt, bs))
        # the same pages in order (block i of sequence b = b*nb + i): separates the cost of the
        # random page placement from the cost of the paged addressing
        nb = S // 128
        bt_seq = torch.arange(B * nb, device=dev, dtype=torch.int32).view(B, nb)
        layouts.append(("paged 128 in order", kp, vp, (128 * Hkv * D, Hkv * D, D), bt_seq, 128))
        for lname, kk, vv, strides, bt, bs in layouts:
            for ns in [0] + args.splits:
                call = hk.Decode(q, kk, vv, strides, sl, S, bt, bs, None, ns).set_hkv(Hkv)
                out, _ = call(); torch.cuda.synchronize()
                # float64 check on sequence 0 (all heads)
                idx = torch.arange(S, device=dev)
                if lname.startswith("bhsd"):
                    k0, v0 = kk[0].transpose(0, 1), vv[0].transpose(0, 1)
                elif bt is None:
                    k0, v0 = kk[0], vv[0]
                else:
                    k0, v0 = kk[bt[0, idx // bs].long(), idx % bs], vv[bt[0, idx // bs].long(), idx % bs]
                ro, _ = ref_attn(q[0], k0, v0, 1, S, True, D ** -0.5)
                err = rel_err(out[0], ro)
                med, mn = timeit(call, args.reps)
                gbs = nbytes / med / 1e6
                r = {"S": S, "layout": lname, "kernel": call.kernel(), "splits": call.num_splits, "ours_GBps": gbs, "ours_us": med * 1e3,
                     "sdpa": sd, "rel_l2": err, "copy_GBps": args.copy}
                rows.append(r)
                print(f"| {S} | {lname} | {r['kernel']} | {call.num_splits}{' (auto)' if ns == 0 else ''} | {gbs:.0f} ({med*1e3:.1f}) | {100*gbs/args.copy:.0f}% | "
                      f"{sd[best_name]:.0f} ({best_name}) | {sd['default']:.0f} | {gbs/sd[best_name]:.2f} | {err:.1e} |", flush=True)
            del kk, vv
        del kc, vc, kb, vb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefill", action="store_true"); ap.add_argument("--decode", action="store_true")
    ap.add_argument("--reps", type=int, default=100); ap.add_argument("--splits", default="")
    ap.add_argument("--dims", default="128,64"); ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "attention_bench.json"))
    args = ap.parse_args()
    args.splits = [int(x) for x in args.splits.split(",") if x]
    args.dims = [int(x) for x in args.dims.split(",") if x]
    print("HK_ATTN_PREFILL_IMPL =", os.environ.get("HK_ATTN_PREFILL_IMPL", "default (sm_90a kernel on compute capability 9.0)"),
          "| HK_ATTN_PREFILL_CFG =", os.environ.get("HK_ATTN_PREFILL_CFG", "default"))
    if not args.prefill and not args.decode:
        args.prefill = args.decode = True
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev); b = torch.empty_like(a)
    args.copy = 2 * n / timeit(lambda: b.copy_(a), 50)[0] / 1e6
    del a, b
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "copy_GBps": args.copy}
    print(info)
    rows = []
    if args.decode:
        bench_decode(args, rows)
    if args.prefill:
        bench_prefill(args, rows)
    json.dump({"info": info, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
