"""GPU check of the staged torch-ext variant (torch<MAJ><MIN>-cxx11-cu<CUDA>-x86_64-linux), run on
the H200 after torch-ext/build_torch_variant.py. Loads the variant through kernels.get_local_kernel
when the `kernels` package is installed, else imports the staged folder as a package named after
its metadata id (what get_local_kernel does). Calls go through the dispatcher
(torch.ops.<id>.varlen_fwd / decode_fwd). Fresh random inputs, outputs poisoned with NaN, every
output element and LSE checked against a float64 reference with test_attention_gpu.py's criterion
(same functions: ref_attn / check). Also: a non-default stream, the CPU kernels, the Meta kernels,
and that a bad argument raises a message naming it.
usage: python3 test_torch_variant.py HUB_DIR   (HUB_DIR/build/<variant>/ as staged)"""
import glob, importlib.util, json, os, pathlib, sys, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_attention_gpu as g  # noqa: E402  (reference, criterion, FAIL list; loads no library)


def load(hub):
    try:
        from kernels import get_local_kernel
        return get_local_kernel(pathlib.Path(hub), backend="cuda"), "kernels.get_local_kernel"
    except ImportError:
        pass
    tv = torch.__version__.split("+")[0].split(".")
    cv = torch.version.cuda.split(".")
    vdir = os.path.join(hub, "build", f"torch{tv[0]}{tv[1]}-cxx11-cu{cv[0]}{cv[1]}-x86_64-linux")
    meta = json.load(open(os.path.join(vdir, "metadata.json")))
    spec = importlib.util.spec_from_file_location(meta["id"], os.path.join(vdir, "__init__.py"),
                                                  submodule_search_locations=[vdir])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[meta["id"]] = mod
    spec.loader.exec_module(mod)
    return mod, f"staged package {meta['id']} ({os.path.basename(vdir)})"


def cu(lens, device):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=device)


def prefill(A, name, lqs, lks, Hq, Hkv, D, dtype, causal, scale=None, device=g.dev):
    scale = D ** -0.5 if scale is None else scale
    cq, ck = cu(lqs, device), cu(lks, device)
    Tq, Tk = int(cq[-1]), int(ck[-1])
    mk = lambda *s: torch.randn(*s, device=device).to(dtype)
    q, k, v = mk(Tq, Hq, D), mk(Tk, Hkv, D), mk(Tk, Hkv, D)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((Hq, Tq), float("nan"), device=device)
    r = A.varlen_attention(out, lse, q, k, v, cq, ck, max(lqs), causal=causal,
                           softmax_scale=None if scale == D ** -0.5 else scale)
    assert r is out
    if device.type == "cuda":
        torch.cuda.synchronize()
    gq = Hq // Hkv
    outs, lses, ros, rls = [], [], [], []
    for b in range(len(lqs)):
        q0, k0, lq, lk = int(cq[b]), int(ck[b]), lqs[b], lks[b]
        if lq == 0:
            continue
        ro, rl = g.ref_attn(q[q0:q0 + lq], k[k0:k0 + lk].repeat_interleave(gq, 1),
                            v[k0:k0 + lk].repeat_interleave(gq, 1), lq, lk, causal, scale)
        ros.append(ro.reshape(-1, D)); rls.append(rl.transpose(0, 1).reshape(-1))
        outs.append(out[q0:q0 + lq].reshape(-1, D)); lses.append(lse[:, q0:q0 + lq].transpose(0, 1).reshape(-1))
    g.check(f"prefill {name}", torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls))


def decode(A, name, seqlens, qlen, Hq, Hkv, D, dtype, layout, block_size=0, workspace=True,
           stream=None, device=g.dev):
    B, smax = len(seqlens), max(max(seqlens), 1)
    mk = lambda *s: torch.randn(*s, device=device).to(dtype)
    bt = None
    if layout == "paged":
        mb = (smax + block_size - 1) // block_size
        nblk = B * mb + 5
        kc, vc = mk(nblk, block_size, Hkv, D), mk(nblk, block_size, Hkv, D)
        bt = torch.randperm(nblk, device=device)[:B * mb].to(torch.int32).view(B, mb).contiguous()
    elif layout == "bshd":
        kc, vc = mk(B, smax, Hkv, D), mk(B, smax, Hkv, D)
    else:  # SDPA's [B,Hkv,S,D] cache passed as a strided [B,S,Hkv,D] view
        kc, vc = mk(B, Hkv, smax, D).transpose(1, 2), mk(B, Hkv, smax, D).transpose(1, 2)
    q = mk(B, qlen, Hq, D)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((B, qlen, Hq), float("nan"), device=device)
    sl = torch.tensor(seqlens, dtype=torch.int32, device=device)
    ws = None
    if workspace:
        ws = torch.zeros(A.decode_workspace_bytes(B, qlen, Hq, Hkv, D, smax), dtype=torch.uint8, device=device)
    if stream is not None:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            A.decode_attention(out, lse, q, kc, vc, sl, smax, block_table=bt, workspace=ws)
        stream.synchronize()
    else:
        A.decode_attention(out, lse, q, kc, vc, sl, smax, block_table=bt, workspace=ws)
    if device.type == "cuda":
        torch.cuda.synchronize()
    outs, lses, ros, rls = [], [], [], []
    for b in range(B):
        L = seqlens[b]
        idx = torch.arange(L, device=device)
        if layout == "paged":
            kk, vv = kc[bt[b, idx // block_size].long(), idx % block_size], vc[bt[b, idx // block_size].long(), idx % block_size]
        else:
            kk, vv = kc[b, :L], vc[b, :L]
        gq = Hq // Hkv
        ro, rl = g.ref_attn(q[b], kk.repeat_interleave(gq, 1), vv.repeat_interleave(gq, 1), qlen, L, True, D ** -0.5)
        ros.append(ro.reshape(-1, D)); rls.append(rl.transpose(0, 1).reshape(-1))
        outs.append(out[b].reshape(-1, D)); lses.append(lse[b].reshape(-1))
    wsn = "no workspace (1 split)" if ws is None else f"workspace {ws.numel()} B"
    g.check(f"decode {name} {wsn}", torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls))


def expect_error(name, fn, words):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e).split("\n")[0]
        good = all(w in msg for w in words)
        print(f"{'ok  ' if good else 'FAIL'} error {name}: {msg[:150]}")
        if not good:
            g.FAIL.append(f"error {name}")
        return
    print(f"FAIL error {name}: no exception")
    g.FAIL.append(f"error {name}")


def decode_fp8(A, name, seqlens, qlen, Hq, Hkv, D, dtype, paged_bs=0, per_head=True, device=g.dev):
    """decode_fp8_attention through the dispatcher vs float64 on the dequantised cache."""
    B, smax = len(seqlens), max(max(seqlens), 1)
    if paged_bs:
        mb = (smax + paged_bs - 1) // paged_bs
        shape = (B * mb + 3, paged_bs, Hkv, D)
        bt = torch.randperm(B * mb + 3, device=device)[:B * mb].to(torch.int32).view(B, mb).contiguous()
    else:
        shape, bt = (B, smax, Hkv, D), None
    kc, vc = ((torch.randn(*shape, device=device) * 2).to(torch.float8_e4m3fn) for _ in range(2))
    ns = Hkv if per_head else 1
    ks, vs = torch.rand(ns, device=device) * 0.1 + 0.02, torch.rand(ns, device=device) + 0.5
    q = torch.randn(B, qlen, Hq, D, device=device).to(dtype)
    out, lse = torch.full_like(q, float("nan")), torch.full((B, qlen, Hq), float("nan"), device=device)
    sl = torch.tensor(seqlens, dtype=torch.int32, device=device)
    ws = None
    if device.type == "cuda":
        ws = torch.zeros(max(A.decode_workspace_bytes(B, qlen, Hq, Hkv, D, smax), 16), dtype=torch.uint8, device=device)
    A.decode_fp8_attention(out, lse, q, kc, vc, ks, vs, sl, smax, block_table=bt, workspace=ws)
    outs, lses, ros, rls = [], [], [], []
    for b in range(B):
        L = seqlens[b]
        idx = torch.arange(L, device=device)
        kk, vv = (kc[b, :L], vc[b, :L]) if bt is None else (kc[bt[b, idx // paged_bs].long(), idx % paged_bs],
                                                            vc[bt[b, idx // paged_bs].long(), idx % paged_bs])
        ro, rl = g.ref_attn(q[b], kk.double() * ks.view(1, -1, 1).double(), vv.double() * vs.view(1, -1, 1).double(),
                            qlen, L, True, D ** -0.5)
        ros.append(ro.reshape(-1, D)); rls.append(rl.transpose(0, 1).reshape(-1))
        outs.append(out[b].reshape(-1, D)); lses.append(lse[b].reshape(-1))
    g.check(f"torch-variant decode_fp8 {name}", torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls))


def op_checks(A):
    """torch.library.opcheck (the schema's declared mutations, the Meta kernel under fake
    tensors, autograd registration, AOT dispatch) on CUDA and CPU inputs, and torch.compile
    (fullgraph) of both wrappers giving the eager result bit for bit."""
    dev = torch.device("cuda")
    bf = torch.bfloat16
    q, k, v = (torch.randn(37, h, 64, device=dev).to(bf) for h in (8, 2, 2))
    cq = torch.tensor([0, 12, 37], dtype=torch.int32, device=dev)
    B, S, Hkv = 2, 300, 2
    dq = torch.randn(B, 1, 8, 64, device=dev).to(bf)
    kc, vc = (torch.randn(B, S, Hkv, 64, device=dev).to(bf) for _ in range(2))
    sl = torch.tensor([300, 5], dtype=torch.int32, device=dev)
    cases = [
        ("varlen_fwd cuda", A._ops.ops.varlen_fwd.default,
         (torch.empty_like(q), torch.empty(8, 37, device=dev), q, k, v, cq, cq, 25, True, 0.125)),
        ("varlen_fwd cpu", A._ops.ops.varlen_fwd.default,
         (torch.empty_like(q.cpu()), torch.empty(8, 37), q.cpu(), k.cpu(), v.cpu(), cq.cpu(), cq.cpu(), 25, False, 0.125)),
        ("decode_fwd cuda", A._ops.ops.decode_fwd.default,
         (torch.empty_like(dq), torch.empty(B, 1, 8, device=dev), dq, kc, vc, sl, None, S, 0.125,
          torch.empty(0, dtype=torch.uint8, device=dev))),
        ("decode_fp8_fwd cuda", A._ops.ops.decode_fp8_fwd.default,
         (torch.empty_like(dq), torch.empty(B, 1, 8, device=dev), dq, kc.to(torch.float8_e4m3fn),
          vc.to(torch.float8_e4m3fn), torch.full((Hkv,), 0.5, device=dev), torch.ones(Hkv, device=dev), sl, None, S,
          0.125, torch.empty(0, dtype=torch.uint8, device=dev))),
    ]
    # opcheck's test_schema compares tensors with ops that torch does not implement for
    # Float8_e4m3fn ("mul_cuda" not implemented), so the FP8 op runs the other three utils and its
    # schema's mutation claims are checked by hand below: the caches and scales (read-only in the
    # schema) keep their bytes, out and lse (declared mutated) are written.
    no_schema = ("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic")
    for name, op, args in cases:
        try:
            if "fp8" in name:
                torch.library.opcheck(op, args, test_utils=no_schema)
                ro = [a.view(torch.uint8).clone() if a.dtype == torch.float8_e4m3fn else a.clone()
                      for a in args[2:8] if isinstance(a, torch.Tensor)]
                args[0].fill_(float("nan")), args[1].fill_(float("nan"))
                op(*args)
                torch.cuda.synchronize()
                after = [a.view(torch.uint8) if a.dtype == torch.float8_e4m3fn else a
                         for a in args[2:8] if isinstance(a, torch.Tensor)]
                if not all(torch.equal(x, y) for x, y in zip(ro, after)):
                    raise AssertionError("a read-only argument changed")
                if torch.isnan(args[0]).any() or torch.isnan(args[1]).any():
                    raise AssertionError("out / lse not written")
            else:
                torch.library.opcheck(op, args)
            print(f"ok   opcheck {name}")
        except Exception as e:  # report, do not stop: every case is checked
            print(f"FAIL opcheck {name}: {str(e).splitlines()[0][:200]}")
            g.FAIL.append(f"opcheck {name}")

    def prefill_fn(q, k, v):
        out, lse = torch.empty_like(q), torch.empty(q.shape[1], q.shape[0], device=q.device)
        A.varlen_attention(out, lse, q, k, v, cq, cq, 25, causal=True)
        return out * 2, lse

    def decode_fn(dq, kc, vc):
        out, lse = torch.empty_like(dq), torch.empty(B, 1, 8, device=dq.device)
        A.decode_attention(out, lse, dq, kc, vc, sl, S)
        return out + 1, lse

    for name, fn, args in (("varlen_attention", prefill_fn, (q, k, v)), ("decode_attention", decode_fn, (dq, kc, vc))):
        try:
            eager = fn(*args)
            comp = torch.compile(fn, fullgraph=True)(*args)
            same = all(torch.equal(a, b) for a, b in zip(eager, comp))
            print(f"{'ok  ' if same else 'FAIL'} torch.compile(fullgraph) {name}: same as eager = {same}")
            if not same:
                g.FAIL.append(f"torch.compile {name}")
        except Exception as e:
            print(f"FAIL torch.compile {name}: {str(e).splitlines()[0][:200]}")
            g.FAIL.append(f"torch.compile {name}")


def main():
    hub = sys.argv[1]
    torch.manual_seed(int(time.time()))
    A, how = load(hub)
    print(torch.cuda.get_device_name(), torch.__version__, "| loaded via", how, flush=True)
    print("ops:", A._ops.ops, flush=True)
    odd = [1, 7, 129, 1000]
    uq, uk = [1, 7, 129, 40, 0, 3, 300], [1, 20, 129, 10, 5, 0, 1000]
    for dtype in (torch.bfloat16, torch.float16):
        dn = "bf16" if dtype == torch.bfloat16 else "fp16"
        for D in (64, 128):
            for causal in (False, True):
                c = "causal" if causal else "full"
                prefill(A, f"{dn} D{D} {c} odd lengths GQA 8/2", odd, odd, 8, 2, D, dtype, causal)
                prefill(A, f"{dn} D{D} {c} unequal q/k varlen MQA 4/1 scale .3", uq, uk, 4, 1, D, dtype, causal, 0.3)
    sl = [1, 7, 129, 1000, 3, 0, 4097]
    for dtype in (torch.bfloat16, torch.float16):
        dn = "bf16" if dtype == torch.bfloat16 else "fp16"
        for D in (128, 64):
            decode(A, f"{dn} D{D} bshd q1 32/8", sl, 1, 32, 8, D, dtype, "bshd")
            decode(A, f"{dn} D{D} bhsd-view q1 32/8", sl, 1, 32, 8, D, dtype, "bhsd")
            decode(A, f"{dn} D{D} paged16 q1 32/8", sl, 1, 32, 8, D, dtype, "paged", 16)
            decode(A, f"{dn} D{D} paged128 q4 32/8", sl, 4, 32, 8, D, dtype, "paged", 128)
            decode(A, f"{dn} D{D} bshd q8 8/1", sl, 8, 8, 1, D, dtype, "bshd", workspace=False)
    decode(A, "bf16 D128 paged16 q1 32/8 on a side stream", sl, 1, 32, 8, 128, torch.bfloat16, "paged", 16,
           stream=torch.cuda.Stream())
    decode(A, "bf16 D128 bshd q1 B16 ctx 32768", [32768] * 16, 1, 32, 8, 128, torch.bfloat16, "bshd")
    for dtype in (torch.bfloat16, torch.float16):
        decode_fp8(A, f"{'bf16' if dtype == torch.bfloat16 else 'fp16'} D128 bshd q1 32/8 per-head", sl, 1, 32, 8, 128, dtype)
        decode_fp8(A, f"{'bf16' if dtype == torch.bfloat16 else 'fp16'} D64 paged16 q4 32/8 per-tensor", sl, 4, 32, 8, 64,
                   dtype, 16, False)
    decode_fp8(A, "CPU bf16 D64 paged16 q2 4/2 per-head", [1, 40, 0, 77], 2, 4, 2, 64, torch.bfloat16, 16,
               device=torch.device("cpu"))
    k16 = torch.zeros(2, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    dq = torch.zeros(2, 1, 4, 64, device="cuda", dtype=torch.bfloat16)
    sl2 = torch.tensor([3, 5], dtype=torch.int32, device="cuda")
    one = torch.ones(1, device="cuda")
    expect_error("fp8 decode, bf16 cache", lambda: A.decode_fp8_attention(torch.empty_like(dq), torch.empty(2, 1, 4, device="cuda"),
                 dq, k16, k16, one, one, sl2, 16), ["k_cache", "Float8_e4m3fn"])
    k8 = k16.to(torch.float8_e4m3fn)
    expect_error("fp8 decode, 3 scales for 2 heads", lambda: A.decode_fp8_attention(torch.empty_like(dq), torch.empty(2, 1, 4, device="cuda"),
                 dq, k8, k8, torch.ones(3, device="cuda"), torch.ones(3, device="cuda"), sl2, 16), ["k_scale", "Hkv"])
    cpu = torch.device("cpu")
    prefill(A, "CPU bf16 D64 causal varlen 4/2", [3, 17, 0, 40], [5, 17, 2, 33], 4, 2, 64, torch.bfloat16, True, device=cpu)
    decode(A, "CPU fp16 D64 paged16 q2 4/2", [1, 40, 0, 77], 2, 4, 2, 64, torch.float16, "paged", 16, device=cpu)
    # Meta kernels: shape checks only, so fake tensors / torch.compile can trace the ops
    mq = torch.empty(10, 4, 64, dtype=torch.bfloat16, device="meta")
    A._ops.ops.varlen_fwd(torch.empty_like(mq), torch.empty(4, 10, device="meta"), mq, mq, mq,
                          torch.empty(2, dtype=torch.int32, device="meta"), torch.empty(2, dtype=torch.int32, device="meta"),
                          10, True, 0.125)
    print("ok   meta varlen_fwd accepted meta tensors")
    expect_error("meta lse shape", lambda: A._ops.ops.varlen_fwd(torch.empty_like(mq), torch.empty(10, 4, device="meta"), mq, mq, mq,
                 torch.empty(2, dtype=torch.int32, device="meta"), torch.empty(2, dtype=torch.int32, device="meta"), 10, True, 0.125),
                 ["varlen_fwd", "lse"])
    q = torch.randn(10, 4, 64, device="cuda").to(torch.bfloat16)
    cq = torch.tensor([0, 10], dtype=torch.int32, device="cuda")
    expect_error("lse dtype", lambda: A.varlen_attention(torch.empty_like(q), torch.empty(4, 10, device="cuda", dtype=torch.float16),
                                                       q, q, q, cq, cq, 10), ["lse", "Float"])
    expect_error("fp32 q", lambda: A.varlen_attention(torch.empty_like(q.float()), torch.empty(4, 10, device="cuda"),
                                                    q.float(), q.float(), q.float(), cq, cq, 10), ["`q`", "bfloat16"])
    expect_error("head_dim 96 (kernel rc)", lambda: A.varlen_attention(torch.empty(10, 4, 96, device="cuda", dtype=torch.bfloat16),
                 torch.empty(4, 10, device="cuda"), *[torch.zeros(10, 4, 96, device="cuda", dtype=torch.bfloat16)] * 3, cq, cq, 10),
                 ["head_dim 64 or 128"])
    expect_error("cpu/cuda mix", lambda: A.varlen_attention(torch.empty_like(q), torch.empty(4, 10, device="cuda"), q, q, q,
                                                          cq.cpu(), cq, 10), ["cu_seqlens_q", "device"])
    op_checks(A)
    print("FAILED:" if g.FAIL else "ALL TORCH-VARIANT CHECKS PASSED", *g.FAIL, sep="\n  ")
    return 1 if g.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
