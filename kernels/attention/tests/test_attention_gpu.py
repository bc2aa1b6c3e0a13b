"""GPU correctness test of the CUDA attention kernels (run on the H200; not part of CI, which has no
GPU). Fresh random inputs every run, outputs poisoned with NaN, every output element and LSE
checked against a float64 reference computed with torch on the GPU.
Criterion per element, R = max|ref| over the row:
  fp16: |out-ref| <= 1e-2*|ref| + 1e-3*R   (the CPU test's criterion)
  bf16: |out-ref| <= 1e-2*(|ref| + R)      (the probabilities P enter the second MMA in bf16, 8
        mantissa bits, as in FlashAttention-2 and cuDNN; near-zero outputs then carry ~2^-9*R of
        absolute error. For fixed-length cases SDPA's flash backend is scored the same way.)
  every row: relative L2 error < 1e-2; LSE within 1e-3*max(1,|ref|); fully masked rows exactly 0
  with LSE -inf. FP8 (e4m3fn) caches: the same criteria against float64 on the DEQUANTISED cache
  (codes * scales), which is what the kernel promises (hk_attention.h).
  Usage: python3 test_attention_gpu.py [--prefill-only | --only fp8]"""
import math, os, sys, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hk_attention_ctypes as hk

dev = torch.device("cuda")
FAIL = []


def ref_attn(q, k, v, lq, lk, causal, scale):
    """float64 reference for one sequence. q [lq,Hq,D], k/v [lk,Hkv,D] -> (o [lq,Hq,D], lse [Hq,lq])."""
    Hq, Hkv = q.shape[1], k.shape[1]
    g = Hq // Hkv
    qd = q.double().transpose(0, 1)  # [Hq,lq,D]
    kd = k.double().transpose(0, 1).repeat_interleave(g, 0)
    vd = v.double().transpose(0, 1).repeat_interleave(g, 0)
    s = torch.matmul(qd, kd.transpose(1, 2)) * scale  # [Hq,lq,lk]
    if causal:
        i = torch.arange(lq, device=q.device)[:, None]
        j = torch.arange(lk, device=q.device)[None, :]
        s = s.masked_fill(j > i + lk - lq, float("-inf"))
    m = s.amax(-1, keepdim=True) if lk > 0 else torch.full((Hq, lq, 1), float("-inf"), device=q.device, dtype=torch.float64)
    m0 = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m0)
    l = p.sum(-1, keepdim=True)
    o = torch.matmul(p, vd) / torch.where(l > 0, l, torch.ones_like(l))
    lse = torch.where(l > 0, m0 + torch.log(l), torch.full_like(l, float("-inf")))
    return o.transpose(0, 1), lse[..., 0]


def elem_ok(out, ref_o):
    rowmax = ref_o.abs().amax(-1, keepdim=True)
    err = (out.double() - ref_o).abs()
    if out.dtype == torch.bfloat16:
        return err <= 1e-2 * (ref_o.abs() + rowmax)
    return err <= 1e-2 * ref_o.abs() + 1e-3 * rowmax  # NaN -> False


def check(name, out, lse, ref_o, ref_lse, baseline=None):
    """out [rows,D] (16-bit), lse [rows]; ref float64; baseline: another implementation's out."""
    o = out.double()
    masked = torch.isinf(ref_lse)
    rowmax = ref_o.abs().amax(-1, keepdim=True)
    err = (o - ref_o).abs()
    ok_el = elem_ok(out, ref_o)
    row_rel = (o - ref_o).norm(dim=-1) / ref_o.norm(dim=-1).clamp(min=1e-30)
    ok_el = ok_el & (row_rel < 1e-2)[:, None]
    ok_rows = ok_el.all(-1) | masked
    ok_masked = ((out[masked] == 0).all() and bool(torch.isinf(lse[masked]).all()) and bool((lse[masked] < 0).all())) if masked.any() else True
    lse_ok = ((lse.double() - ref_lse).abs() <= 1e-3 * ref_lse.abs().clamp(min=1)) | masked
    nrm = (o[~masked] - ref_o[~masked]).norm() / ref_o[~masked].norm().clamp(min=1e-30) if (~masked).any() else torch.tensor(0.)
    good = bool(ok_rows.all()) and ok_masked and bool(lse_ok.all()) and not torch.isnan(o).any()
    extra = ""
    if baseline is not None:
        bo = baseline.double()
        extra = (f" | SDPA flash: rel_l2={float((bo - ref_o).norm() / ref_o.norm()):.2e} "
                 f"max_err/(|ref|+0.1R)={float(((bo - ref_o).abs() / (ref_o.abs() + 0.1 * rowmax + 1e-30)).max()):.2e} "
                 f"passes={bool(elem_ok(baseline, ref_o).all())}")
    print(f"{'ok  ' if good else 'FAIL'} {name:58s} rows={out.shape[0]:7d} masked={int(masked.sum()):5d} "
          f"rel_l2={float(nrm):.2e} max_err/(|ref|+0.1R)={float((err / (ref_o.abs() + 0.1 * rowmax + 1e-30)).max()):.2e}{extra}", flush=True)
    if not good:
        FAIL.append(name)


def rnd(*shape, dtype):
    return torch.randn(*shape, device=dev, dtype=torch.float32).to(dtype)


def test_prefill(name, lqs, lks, Hq, Hkv, D, dtype, causal, scale=None, head_subset=None):
    scale = D ** -0.5 if scale is None else scale
    cu_q = torch.tensor([0] + list(torch.tensor(lqs).cumsum(0)), dtype=torch.int32, device=dev)
    cu_k = torch.tensor([0] + list(torch.tensor(lks).cumsum(0)), dtype=torch.int32, device=dev)
    Tq, Tk = int(cu_q[-1]), int(cu_k[-1])
    q, k, v = rnd(Tq, Hq, D, dtype=dtype), rnd(Tk, Hkv, D, dtype=dtype), rnd(Tk, Hkv, D, dtype=dtype)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((Hq, Tq), float("nan"), device=dev)
    hk.prefill(q, k, v, cu_q, cu_k, max(lqs), causal, scale, out, lse)
    torch.cuda.synchronize()
    heads = list(range(Hq)) if head_subset is None else head_subset
    g = Hq // Hkv
    outs, lses, ros, rls = [], [], [], []
    for b in range(len(lqs)):
        q0, k0, lq, lk = int(cu_q[b]), int(cu_k[b]), lqs[b], lks[b]
        if lq == 0:
            continue
        for h in heads:
            ro, rl = ref_attn(q[q0:q0 + lq, h:h + 1], k[k0:k0 + lk, h // g:h // g + 1],
                              v[k0:k0 + lk, h // g:h // g + 1], lq, lk, causal, scale)
            ros.append(ro[:, 0]); rls.append(rl[0]); outs.append(out[q0:q0 + lq, h]); lses.append(lse[h, q0:q0 + lq])
    base = None
    if len(set(lqs)) == 1 and lqs == lks:  # fixed length: score SDPA's flash backend the same way
        from torch.nn.attention import sdpa_kernel, SDPBackend
        Bn, S = len(lqs), lqs[0]
        g = Hq // Hkv
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # GQA expanded: flash needs equal heads
            so = torch.nn.functional.scaled_dot_product_attention(
                q.view(Bn, S, Hq, D).transpose(1, 2),
                k.view(Bn, S, Hkv, D).repeat_interleave(g, 2).transpose(1, 2),
                v.view(Bn, S, Hkv, D).repeat_interleave(g, 2).transpose(1, 2), is_causal=causal, scale=scale)
        so = so.transpose(1, 2).reshape(Bn * S, Hq, D)
        base = torch.cat([so[b * S:(b + 1) * S, h] for b in range(Bn) for h in heads])
    check(f"prefill {name}", torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls), base)


def test_prefill_streams(causal, n_launch=16, n_streams=4):
    """Many persistent launches one after another, then the same launches on several streams at once:
    each must give what it gave alone (the kernel is deterministic: one CTA computes a tile, in a
    fixed order), and the last lone launch must match the float64 reference. A scheduler that keeps
    state between launches (a tile counter, v18's prepared patch) must pass this as the grid's stride does."""
    B, S, Hq, Hkv, D = 64, 128, 16, 4, 128  # 1024 tiles: several waves, persistent by the rule
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
    ins = [(rnd(B * S, Hq, D, dtype=torch.bfloat16), rnd(B * S, Hkv, D, dtype=torch.bfloat16),
            rnd(B * S, Hkv, D, dtype=torch.bfloat16)) for _ in range(n_launch)]
    solo = []
    for q, k, v in ins:
        solo.append(hk.prefill(q, k, v, cu, cu, S, causal)[0].clone())
        torch.cuda.synchronize()
    q, k, v = ins[-1]
    _, lse = hk.prefill(q, k, v, cu, cu, S, causal)
    ro, rl, oo, ol = [], [], [], []
    for b, h in [(0, 0), (31, 7), (B - 1, Hq - 1)]:
        o1, l1 = ref_attn(q[b * S:(b + 1) * S, h:h + 1], k[b * S:(b + 1) * S, h // 4:h // 4 + 1],
                          v[b * S:(b + 1) * S, h // 4:h // 4 + 1], S, S, causal, D ** -0.5)
        ro.append(o1[:, 0]); rl.append(l1[0]); oo.append(solo[-1][b * S:(b + 1) * S, h]); ol.append(lse[h, b * S:(b + 1) * S])
    c = "causal" if causal else "full"
    check(f"prefill B64 S128 GQA 16/4 {c}: last of {n_launch} launches in a row", torch.cat(oo), torch.cat(ol),
          torch.cat(ro), torch.cat(rl))
    streams = [torch.cuda.Stream() for _ in range(n_streams)]
    outs = [torch.full_like(x[0], float("nan")) for x in ins]
    torch.cuda.synchronize()
    for rep in range(3):
        for i, (q, k, v) in enumerate(ins):
            with torch.cuda.stream(streams[(i + rep) % n_streams]):
                hk.prefill(q, k, v, cu, cu, S, causal, None, outs[i])
    torch.cuda.synchronize()
    differ = [i for i in range(n_launch) if not torch.equal(outs[i], solo[i])]
    good = not differ
    print(f"{'ok  ' if good else 'FAIL'} prefill {c}: {n_launch} launches x 3 on {n_streams} streams at once "
          f"equal to each alone{'' if good else ': launches ' + str(differ) + ' differ'}", flush=True)
    if not good:
        FAIL.append(f"prefill {c} on {n_streams} streams")


def hopper():
    return torch.cuda.get_device_capability() == (9, 0)


def expected_decode_kernel(layout, block_size):
    """The kernel the library must pick here: on an H200 paged caches with power-of-two pages of
    16..256 tokens go through the TMA unless HK_ATTN_DECODE_TMA=0 (so the TMA path is proven
    by these checks, not silently replaced by the fallback)."""
    setting = os.environ.get("HK_ATTN_DECODE_TMA", "1")
    pow2 = block_size >= 16 and block_size <= 256 and (block_size & (block_size - 1)) == 0
    if layout == "paged":
        return "paged-tma" if hopper() and setting != "0" and pow2 else "paged"
    return "contiguous-tma" if hopper() and setting == "all" else "contiguous"


def expect_kernel(what, got, want):
    if got != want:
        print(f"FAIL {what}: ran kernel {got!r}, expected {want!r}", flush=True)
        FAIL.append(f"{what} kernel")


def test_decode(name, seqlens, qlen, Hq, Hkv, D, dtype, layout, block_size=0, num_splits=0):
    B, smax = len(seqlens), max(max(seqlens), 1)
    bt = None
    if layout == "paged":
        mb = (smax + block_size - 1) // block_size
        nblk = B * mb + 5
        kc, vc = rnd(nblk, block_size, Hkv, D, dtype=dtype), rnd(nblk, block_size, Hkv, D, dtype=dtype)
        bt = torch.randperm(nblk, device=dev)[:B * mb].to(torch.int32).view(B, mb).contiguous()
        strides = (block_size * Hkv * D, Hkv * D, D)
    elif layout == "bshd":
        kc, vc = rnd(B, smax, Hkv, D, dtype=dtype), rnd(B, smax, Hkv, D, dtype=dtype)
        strides = (smax * Hkv * D, Hkv * D, D)
    else:  # bhsd (SDPA layout)
        kc, vc = rnd(B, Hkv, smax, D, dtype=dtype), rnd(B, Hkv, smax, D, dtype=dtype)
        strides = (Hkv * smax * D, D, smax * D)
    scale = D ** -0.5
    q = rnd(B, qlen, Hq, D, dtype=dtype)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((B, qlen, Hq), float("nan"), device=dev)
    sl = torch.tensor(seqlens, dtype=torch.int32, device=dev)
    # A real cache holds anything past a sequence's length: NaN there (P is 0 for those keys, but
    # 0 * NaN is not), and block-table entries past the sequence's pages that point nowhere valid
    # (any read through them faults or poisons the output)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    for b in range(B):
        L = seqlens[b]
        if layout == "paged":
            tail = torch.arange(L, mb * block_size, device=dev)
            if tail.numel():
                kc[bt[b, tail // block_size].long(), tail % block_size] = float("nan")
                vc[bt[b, tail // block_size].long(), tail % block_size] = float("nan")
        elif layout == "bshd":
            kc[b, L:] = float("nan"); vc[b, L:] = float("nan")
        else:
            kc[b, :, L:] = float("nan"); vc[b, :, L:] = float("nan")
    if layout == "paged":
        bt_ref = bt.clone()
        for b in range(B):
            bt[b, (seqlens[b] + block_size - 1) // block_size:] = 1 << 30
    call = hk.Decode(q, kc, vc, strides, sl, smax, bt, block_size, None, num_splits, out, lse).set_hkv(Hkv)
    kernel = call.kernel()
    expect_kernel(f"decode {name}", kernel, expected_decode_kernel(layout, block_size))
    call()
    torch.cuda.synchronize()
    kc, vc = kc_ref, vc_ref
    if layout == "paged":
        bt = bt_ref
    outs, lses, ros, rls = [], [], [], []
    for b in range(B):
        L = seqlens[b]
        idx = torch.arange(L, device=dev)
        if layout == "paged":
            kk = kc[bt[b, idx // block_size].long(), idx % block_size]
            vv = vc[bt[b, idx // block_size].long(), idx % block_size]
        elif layout == "bshd":
            kk, vv = kc[b, :L], vc[b, :L]
        else:
            kk, vv = kc[b, :, :L].transpose(0, 1), vc[b, :, :L].transpose(0, 1)
        ro, rl = ref_attn(q[b], kk, vv, qlen, L, True, D ** -0.5)
        ros.append(ro.reshape(-1, D)); rls.append(rl.transpose(0, 1).reshape(-1))
        outs.append(out[b].reshape(-1, D)); lses.append(lse[b].reshape(-1))
    check(f"decode {name} [{kernel}] splits={call.num_splits}", torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls))


def fp8_cache(shape, kind):
    """Random e4m3fn codes: normal values (the quantised N(0, 2^2)), or (kind "sub") only
    subnormal ones (|x| < 2^-6), which a conversion that flushes them would zero."""
    x = torch.randn(*shape, device=dev) * 2
    if kind == "sub":
        x = (torch.randint(-7, 8, shape, device=dev).float()) * 2.0 ** -9
    return x.to(torch.float8_e4m3fn)


def test_decode_fp8(name, seqlens, qlen, Hq, Hkv, D, dtype, layout, block_size=0, per_head=False,
                    num_splits=0, v_kind="normal", nan_key=None, q_mag=None):
    """nan_key (b, t, hk): a NaN code in K there; rows that see it must be NaN, all others exact.
    q_mag: a factor on every query, the softmax scale divided by it (the same attention, with
    queries out of fp16's range or below its subnormals: the FP8 decode computes in fp16), or
    "mixed": each head's queries times 2^U(-14, 14) (rows of very different size in one CTA)."""
    B, smax = len(seqlens), max(max(seqlens), 1)
    bt = None
    if layout == "paged":
        mb = (smax + block_size - 1) // block_size
        nblk = B * mb + 5
        shape = (nblk, block_size, Hkv, D)
        bt = torch.randperm(nblk, device=dev)[:B * mb].to(torch.int32).view(B, mb).contiguous()
        strides = (block_size * Hkv * D, Hkv * D, D)
    elif layout == "bshd":
        shape, strides = (B, smax, Hkv, D), (smax * Hkv * D, Hkv * D, D)
    else:
        shape, strides = (B, Hkv, smax, D), (Hkv * smax * D, D, smax * D)
    kc, vc = fp8_cache(shape, "normal"), fp8_cache(shape, v_kind)
    ns = Hkv if per_head else 1
    ks = (torch.rand(ns, device=dev) * 0.1 + 0.02).float()
    vs = (torch.rand(ns, device=dev) * 2 + 0.5).float()
    scale = D ** -0.5
    q = rnd(B, qlen, Hq, D, dtype=dtype)
    if q_mag == "mixed":
        q = (q.float() * torch.exp2(torch.rand(Hq, device=dev) * 28 - 14).view(1, 1, Hq, 1)).to(dtype)
    elif q_mag is not None:
        q, scale = (q.float() * q_mag).to(dtype), scale / q_mag
    out = torch.full_like(q, float("nan"))
    lse = torch.full((B, qlen, Hq), float("nan"), device=dev)
    sl = torch.tensor(seqlens, dtype=torch.int32, device=dev)
    kc_ref, vc_ref = kc.clone(), vc.clone()
    k8, v8 = kc.view(torch.uint8), vc.view(torch.uint8)  # NaN codes past every sequence's end
    for b in range(B):
        L = seqlens[b]
        if layout == "paged":
            tail = torch.arange(L, mb * block_size, device=dev)
            if tail.numel():
                k8[bt[b, tail // block_size].long(), tail % block_size] = 0x7F
                v8[bt[b, tail // block_size].long(), tail % block_size] = 0xFF
        elif layout == "bshd":
            k8[b, L:] = 0x7F; v8[b, L:] = 0xFF
        else:
            k8[b, :, L:] = 0x7F; v8[b, :, L:] = 0xFF
    if nan_key is not None:
        nb, nt, nh = nan_key
        if layout == "paged":
            k8[bt[nb, nt // block_size].long(), nt % block_size, nh, 3] = 0x7F
        elif layout == "bshd":
            k8[nb, nt, nh, 3] = 0x7F
        else:
            k8[nb, nh, nt, 3] = 0x7F
    if layout == "paged":
        bt_ref = bt.clone()
        for b in range(B):
            bt[b, (seqlens[b] + block_size - 1) // block_size:] = 1 << 30
    call = hk.Decode(q, kc, vc, strides, sl, smax, bt, block_size, scale, num_splits, out, lse, ks, vs).set_hkv(Hkv)
    kernel = call.kernel()
    expect_kernel(f"decode fp8 {name}", kernel, expected_decode_kernel(layout, block_size))
    call()
    torch.cuda.synchronize()
    kc, vc = kc_ref, vc_ref
    if layout == "paged":
        bt = bt_ref
    ksh = ks.view(1, -1, 1).double(); vsh = vs.view(1, -1, 1).double()
    outs, lses, ros, rls, nan_ok = [], [], [], [], True
    for b in range(B):
        L = seqlens[b]
        idx = torch.arange(L, device=dev)
        if layout == "paged":
            kk, vv = kc[bt[b, idx // block_size].long(), idx % block_size], vc[bt[b, idx // block_size].long(), idx % block_size]
        elif layout == "bshd":
            kk, vv = kc[b, :L], vc[b, :L]
        else:
            kk, vv = kc[b, :, :L].transpose(0, 1), vc[b, :, :L].transpose(0, 1)
        ro, rl = ref_attn(q[b], kk.double() * ksh, vv.double() * vsh, qlen, L, True, scale)
        o_b, l_b = out[b], lse[b]
        if nan_key is not None and b == nan_key[0]:
            g = Hq // Hkv
            sees = torch.zeros(qlen, Hq, dtype=torch.bool, device=dev)
            for t in range(qlen):
                if nan_key[1] <= L - qlen + t:
                    sees[t, nan_key[2] * g:(nan_key[2] + 1) * g] = True
            nan_ok = bool(torch.isnan(o_b[sees]).all()) and bool(sees.any())
            keep = ~sees
            ro, rl, o_b, l_b = ro[keep], rl.transpose(0, 1)[keep].transpose(0, -1), o_b[keep], l_b[keep]
            ros.append(ro.reshape(-1, D)); rls.append(rl.reshape(-1)); outs.append(o_b.reshape(-1, D)); lses.append(l_b.reshape(-1))
            continue
        ros.append(ro.reshape(-1, D)); rls.append(rl.transpose(0, 1).reshape(-1))
        outs.append(o_b.reshape(-1, D)); lses.append(l_b.reshape(-1))
    label = f"decode fp8 {name} [{kernel}] splits={call.num_splits}"
    if not nan_ok:
        print(f"FAIL {label}: rows that see the NaN code are not all NaN", flush=True)
        FAIL.append(label + " NaN")
    check(label, torch.cat(outs), torch.cat(lses), torch.cat(ros), torch.cat(rls))


def fp8_cases():
    g = torch.Generator().manual_seed(int(time.time()) + 1)
    def ragged(B, lo, hi):
        x = torch.rand(B, generator=g) * (math.log(hi) - math.log(lo)) + math.log(lo)
        return [0, 1] + [int(v) for v in x.exp().round()]
    sl = [1, 7, 129, 1000, 3, 0, 4097]
    bf, hf = torch.bfloat16, torch.float16
    for dtype in (bf, hf):
        dn = "bf16" if dtype == bf else "fp16"
        for D in (128, 64):
            for ph in (False, True):
                sk = "head" if ph else "tensor"
                test_decode_fp8(f"{dn} D{D} bshd q1 32/8 {sk}", sl, 1, 32, 8, D, dtype, "bshd", 0, ph)
                test_decode_fp8(f"{dn} D{D} bhsd q4 32/8 {sk}", sl, 4, 32, 8, D, dtype, "bhsd", 0, ph)
                for bs in (16, 64, 256):
                    test_decode_fp8(f"{dn} D{D} paged{bs} q1 32/32 {sk}", sl, 1, 32, 32, D, dtype, "paged", bs, ph)
                test_decode_fp8(f"{dn} D{D} paged32 q8 32/8 {sk} (2 chunks)", sl, 8, 32, 8, D, dtype, "paged", 32, ph)
                test_decode_fp8(f"{dn} D{D} paged128 q4 8/1 {sk}", sl, 4, 8, 1, D, dtype, "paged", 128, ph)
    test_decode_fp8("bf16 D128 paged48 q1 32/8 head (cp.async pages)", sl, 1, 32, 8, 128, bf, "paged", 48, True)
    test_decode_fp8("bf16 D128 bshd q2 32/8 forced 7 splits", sl, 2, 32, 8, 128, bf, "bshd", 0, True, 7)
    test_decode_fp8("bf16 D128 bshd q1 B16 ctx 32768", [32768] * 16, 1, 32, 8, 128, bf, "bshd", 0, True)
    for bs in (16, 64, 256):
        test_decode_fp8(f"bf16 D128 paged{bs} q1 32/8 ragged B66 log[16,20k] head", ragged(64, 16, 20000), 1, 32, 8, 128, bf, "paged", bs, True)
    test_decode_fp8("fp16 D64 bhsd q1 32/4 ragged B34 log[64,30k] tensor", ragged(32, 64, 30000), 1, 32, 4, 64, hf, "bhsd", 0, False)
    test_decode_fp8("bf16 D128 paged16 q8 8/1 ragged B10 tensor (2 chunks)", ragged(8, 8, 9000), 8, 8, 1, 128, bf, "paged", 16)
    test_decode_fp8("bf16 D128 paged16 q1 ragged B3 one long (128k) head", [131072, 5, 700], 1, 32, 8, 128, bf, "paged", 16, True)
    for dtype, dn in ((bf, "bf16"), (hf, "fp16")):
        test_decode_fp8(f"{dn} D128 bshd q1 32/8 V subnormal codes only", sl, 1, 32, 8, 128, dtype, "bshd", 0, True, 0, "sub")
        test_decode_fp8(f"{dn} D128 paged64 q1 32/8 V subnormal codes only", sl, 1, 32, 8, 128, dtype, "paged", 64, False, 0, "sub")
        test_decode_fp8(f"{dn} D128 paged16 q4 32/8 NaN code in K (seq 3 key 500)", sl, 4, 32, 8, 128, dtype, "paged", 16, True, 0, "normal", (3, 500, 2))
        test_decode_fp8(f"{dn} D64 bshd q2 32/8 NaN code in K (seq 2 key 128)", sl, 2, 32, 8, 64, dtype, "bshd", 0, False, 0, "normal", (2, 128, 7))
    # bf16 queries past fp16's range and below its subnormals, and heads 2^28 apart in one CTA
    for mag in (3e6, 1e-9, 1e30, "mixed"):
        test_decode_fp8(f"bf16 D128 bshd q1 32/8 queries x {mag}", sl, 1, 32, 8, 128, bf, "bshd", 0, True, q_mag=mag)
        test_decode_fp8(f"bf16 D128 paged16 q4 32/4 queries x {mag}", sl, 4, 32, 4, 128, bf, "paged", 16, False, q_mag=mag)
        test_decode_fp8(f"bf16 D64 paged64 q2 16/2 queries x {mag}", sl, 2, 16, 2, 64, bf, "paged", 64, True, q_mag=mag)


def main():
    torch.manual_seed(int(time.time()))
    print(torch.cuda.get_device_name(), torch.__version__, "| prefill kernel:", hk.prefill_kernel(), flush=True)
    want = "sm90a" if hopper() and os.environ.get("HK_ATTN_PREFILL_IMPL") != "portable" else "portable"
    expect_kernel("prefill", hk.prefill_kernel(), want)
    if "--only" in sys.argv and sys.argv[sys.argv.index("--only") + 1] == "fp8":
        fp8_cases()
        print("FAILED:" if FAIL else "ALL GPU CHECKS PASSED", *FAIL, sep="\n  ")
        return 1 if FAIL else 0
    odd = [1, 7, 129, 1000]
    uq, uk = [1, 7, 129, 40, 0, 3, 300], [1, 20, 129, 10, 5, 0, 1000]
    for dtype in (torch.bfloat16, torch.float16):
        dn = "bf16" if dtype == torch.bfloat16 else "fp16"
        for D in (64, 128):
            for causal in (False, True):
                c = "causal" if causal else "full"
                test_prefill(f"{dn} D{D} {c} odd lengths GQA 8/2", odd, odd, 8, 2, D, dtype, causal)
                test_prefill(f"{dn} D{D} {c} unequal q/k varlen MQA 4/1 scale .3", uq, uk, 4, 1, D, dtype, causal, 0.3)
    test_prefill("bf16 D128 causal B1 S4096 H32 (heads 0,31)", [4096], [4096], 32, 32, 128, torch.bfloat16, True, None, [0, 31])
    test_prefill("bf16 D64 full B2 S2048 H32/8 (heads 0,13)", [2048, 2048], [2048, 2048], 32, 8, 64, torch.bfloat16, False, None, [0, 13])
    # many key tiles per CTA (the Hopper kernel's stage ring wraps many times), mixed long lengths
    test_prefill("fp16 D64 causal varlen 3000/777/1500 vs 2900/900/1500 GQA 16/4 (heads 0,5,15)",
                 [3000, 777, 1500], [2900, 900, 1500], 16, 4, 64, torch.float16, True, None, [0, 5, 15])
    test_prefill("bf16 D128 full varlen 2047/129/1 vs 1025/2049/3 MQA 8/1", [2047, 129, 1], [1025, 2049, 3],
                 8, 1, 128, torch.bfloat16, False)
    for causal in (False, True):
        test_prefill_streams(causal)
    if "--prefill-only" in sys.argv:
        print("FAILED:" if FAIL else "ALL GPU CHECKS PASSED", *FAIL, sep="\n  ")
        return 1 if FAIL else 0
    sl = [1, 7, 129, 1000, 3, 0, 4097]
    for dtype in (torch.bfloat16, torch.float16):
        dn = "bf16" if dtype == torch.bfloat16 else "fp16"
        for D in (128, 64):
            test_decode(f"{dn} D{D} bshd q1 32/8", sl, 1, 32, 8, D, dtype, "bshd")
            test_decode(f"{dn} D{D} bhsd q1 32/8", sl, 1, 32, 8, D, dtype, "bhsd")
            for bs in (16, 128, 256):
                test_decode(f"{dn} D{D} paged{bs} q1 32/8", sl, 1, 32, 8, D, dtype, "paged", bs)
            test_decode(f"{dn} D{D} paged16 q4 32/8", sl, 4, 32, 8, D, dtype, "paged", 16)
            test_decode(f"{dn} D{D} paged64 q8 8/1 (64 rows, 2 chunks)", sl, 8, 8, 1, D, dtype, "paged", 64)
            test_decode(f"{dn} D{D} bshd q8 32/8", sl, 8, 32, 8, D, dtype, "bshd")
    test_decode("bf16 D128 bshd q1 32/8 forced 1 split", sl, 1, 32, 8, 128, torch.bfloat16, "bshd", 0, 1)
    test_decode("bf16 D128 paged16 q2 32/8 forced 7 splits", sl, 2, 32, 8, 128, torch.bfloat16, "paged", 16, 7)
    test_decode("bf16 D128 paged48 q1 32/8 (pages not a power of two)", sl, 1, 32, 8, 128, torch.bfloat16, "paged", 48)
    test_decode("bf16 D128 bshd q1 B16 ctx 32768", [32768] * 16, 1, 32, 8, 128, torch.bfloat16, "bshd")
    # ragged batches: the balanced plan (stream-K over all sequences' key tiles; pairs cut into
    # several segments merged through the workspace), with empty and 1-token sequences in them
    g = torch.Generator().manual_seed(int(time.time()))
    def ragged(B, lo, hi):
        x = torch.rand(B, generator=g) * (math.log(hi) - math.log(lo)) + math.log(lo)
        return [0, 1] + [int(v) for v in x.exp().round()]
    for bs in (16, 32, 256):
        test_decode(f"bf16 D128 paged{bs} q1 32/8 ragged B66 log[16,20k]", ragged(64, 16, 20000), 1, 32, 8, 128, torch.bfloat16, "paged", bs)
    test_decode("bf16 D128 bshd q1 32/8 ragged B34 log[64,30k]", ragged(32, 64, 30000), 1, 32, 8, 128, torch.bfloat16, "bshd")
    test_decode("bf16 D128 bhsd q1 32/8 ragged B10 log[1k,60k]", ragged(8, 1000, 60000), 1, 32, 8, 128, torch.bfloat16, "bhsd")
    test_decode("fp16 D64 paged128 q1 32/8 ragged B130 log[16,5k]", ragged(128, 16, 5000), 1, 32, 8, 64, torch.float16, "paged", 128)
    test_decode("bf16 D128 paged64 q4 32/8 ragged B18 log[8,16k]", ragged(16, 8, 16000), 4, 32, 8, 128, torch.bfloat16, "paged", 64)
    test_decode("bf16 D128 paged16 q8 8/1 ragged B10 (2 chunks)", ragged(8, 8, 9000), 8, 8, 1, 128, torch.bfloat16, "paged", 16)
    test_decode("bf16 D128 paged48 q1 32/8 ragged B20 (cp.async)", ragged(18, 16, 12000), 1, 32, 8, 128, torch.bfloat16, "paged", 48)
    test_decode("bf16 D128 paged16 q1 ragged B3 one long (128k)", [131072, 5, 700], 1, 32, 8, 128, torch.bfloat16, "paged", 16)
    os.environ["HK_ATTN_DECODE_CPS"] = "1"
    test_decode("bf16 D128 paged32 q1 ragged B66, 1 CTA per SM", ragged(64, 16, 20000), 1, 32, 8, 128, torch.bfloat16, "paged", 32)
    # a uniform batch of more pairs than the grid's CTAs but fewer than the cp.async wave's
    # (192 pairs, 1 CTA per SM): aligned only if every pair has a CTA of its own
    test_decode("bf16 D128 paged48 q1 32/8 uniform B24 4k, 1 CTA per SM", [4096] * 24, 1, 32, 8, 128, torch.bfloat16, "paged", 48)
    del os.environ["HK_ATTN_DECODE_CPS"]
    test_decode("bf16 D128 paged48 q1 32/8 uniform B24 4k", [4096] * 24, 1, 32, 8, 128, torch.bfloat16, "paged", 48)
    # the pairs' fixed cost in the plan: none (tiles only), and one odd and large
    for cost in ("0", "13"):
        os.environ["HK_ATTN_DECODE_SEG_COST"] = cost
        test_decode(f"bf16 D128 paged16 q1 ragged B66, pair cost {cost} tiles", ragged(64, 1, 30000), 1, 32, 8, 128, torch.bfloat16, "paged", 16)
        test_decode(f"bf16 D128 bshd q4 ragged B34, pair cost {cost} tiles", ragged(32, 1, 9000), 4, 32, 8, 128, torch.bfloat16, "bshd")
        del os.environ["HK_ATTN_DECODE_SEG_COST"]
    os.environ["HK_ATTN_DECODE_PLAN"] = "uniform"
    test_decode("bf16 D128 paged32 q1 ragged B66, uniform plan", ragged(64, 16, 20000), 1, 32, 8, 128, torch.bfloat16, "paged", 32)
    test_decode("bf16 D128 paged16 q2 32/8 forced 7 splits, uniform plan", sl, 2, 32, 8, 128, torch.bfloat16, "paged", 16, 7)
    del os.environ["HK_ATTN_DECODE_PLAN"]
    fp8_cases()
    print("FAILED:" if FAIL else "ALL GPU CHECKS PASSED", *FAIL, sep="\n  ")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
