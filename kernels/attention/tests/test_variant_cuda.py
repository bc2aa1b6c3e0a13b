#!/usr/bin/env python3
"""GPU check (H200; not in CI) of the staged tvm-ffi CUDA variant of the attention kernel, as the
Python `kernels` package loads it: metadata valid for kernels and its digest matching, then every
op (varlen prefill, decode contiguous and paged with the split workspace, FP8 decode with per-tensor
and per-head scales) called on torch CUDA tensors, outputs NaN-poisoned first, against the float64
reference of test_attention_gpu.py (on the dequantised cache for FP8). Fresh random inputs.

usage: test_variant_cuda.py HUB [VARIANT]   (default variant tvm-ffi01-cu130-x86_64-linux)"""
import os
import sys
from pathlib import Path

import torch
from kernels import get_local_kernel
from kernels._rust import Digest, Metadata
from kernels.validate import AllValidator, default_metadata_validators

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_attention_gpu import ref_attn  # noqa: E402

dev = torch.device("cuda")
FAIL = []


def close(name, out, lse, ref_o, ref_lse):
    o = out.double()
    masked = torch.isinf(ref_lse)
    err = ((o - ref_o).norm(dim=-1) / ref_o.norm(dim=-1).clamp(min=1e-30))[~masked]
    ok = bool((err < 2e-2).all()) and not bool(torch.isnan(out).any())
    ok &= bool(((lse.double() - ref_lse).abs()[~masked] <= 1e-3 * ref_lse.abs()[~masked].clamp(min=1)).all())
    if masked.any():
        ok &= bool((out[masked] == 0).all()) and bool(torch.isinf(lse[masked]).all())
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max row rel_l2 {err.max().item() if err.numel() else 0:.2e}", flush=True)
    if not ok:
        FAIL.append(name)


def check_varlen(mod, D, causal, hq=32, hkv=8):
    lens = [1, 37, 512, 1999]
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], device=dev, dtype=torch.int32)
    T = int(cu[-1])
    q = torch.randn(T, hq, D, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(T, hkv, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
    out = torch.full_like(q, float("nan"))
    lse = torch.full((hq, T), float("nan"), device=dev)
    mod.varlen_attention(out, lse, q, k, v, cu, cu, max(lens), causal=causal)
    torch.cuda.synchronize()
    for b, s in enumerate(lens):
        s0 = int(cu[b])
        ro, rl = ref_attn(q[s0:s0 + s], k[s0:s0 + s], v[s0:s0 + s], s, s, causal, D ** -0.5)
        close(f"varlen D{D} causal={causal} seq {s}", out[s0:s0 + s].reshape(-1, D), lse[:, s0:s0 + s].T.reshape(-1),
              ro.reshape(-1, D), rl.T.reshape(-1))


def random_cache(B, S, hkv, D, fp8):
    if fp8:
        return (torch.randn(B, S, hkv, D, device=dev) * 2).to(torch.float8_e4m3fn)
    return torch.randn(B, S, hkv, D, device=dev, dtype=torch.bfloat16)


def paged(full, table, page):
    """full [B,S,Hkv,D] laid out in pages [B*S/page, page, Hkv, D] at the block table's slots."""
    B, S, hkv, D = full.shape
    pages = torch.empty(B * (S // page), page, hkv, D, device=dev, dtype=full.dtype)
    pages[table.reshape(-1).long()] = full.reshape(-1, page, hkv, D)
    return pages


def check_decode(mod, D, page, fp8, per_head, q_len=1, hq=32, hkv=8, S=4096):
    B = 4
    seqlens = torch.tensor([S, 1, S // 3, max(q_len - 1, 0)], device=dev, dtype=torch.int32)
    q = torch.randn(B, q_len, hq, D, device=dev, dtype=torch.bfloat16)
    kfull, vfull = random_cache(B, S, hkv, D, fp8), random_cache(B, S, hkv, D, fp8)
    table = None
    kc, vc = kfull, vfull
    if page:
        table = torch.randperm(B * (S // page), device=dev).view(B, S // page).to(torch.int32)
        kc, vc = paged(kfull, table, page), paged(vfull, table, page)
    ks = (torch.rand(hkv if per_head else 1, device=dev) + 0.5) * 0.1
    vs = (torch.rand(hkv if per_head else 1, device=dev) + 0.5) * 0.1
    ws = torch.zeros(mod.decode_workspace_bytes(B, q_len, hq, hkv, D, S), device=dev, dtype=torch.uint8)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((B, q_len, hq), float("nan"), device=dev)
    if fp8:
        mod.decode_fp8_attention(out, lse, q, kc, vc, ks, vs, seqlens, S, block_table=table, workspace=ws)
    else:
        mod.decode_attention(out, lse, q, kc, vc, seqlens, S, block_table=table, workspace=ws)
    torch.cuda.synchronize()
    for b in range(B):
        s = int(seqlens[b])
        kd, vd = kfull[b, :s].double(), vfull[b, :s].double()
        if fp8:  # the dequantised cache: code * scale (per tensor or per kv head)
            kd, vd = kd * ks.double().view(1, -1, 1), vd * vs.double().view(1, -1, 1)
        ro, rl = ref_attn(q[b], kd, vd, q_len, s, True, D ** -0.5)
        name = (f"decode {'fp8' if fp8 else 'bf16'}{' per-head' if fp8 and per_head else ''} D{D} "
                f"{'page ' + str(page) if page else 'contiguous'} q_len {q_len} seq {s}")
        close(name, out[b].reshape(-1, D), lse[b].reshape(-1), ro.reshape(-1, D), rl.T.reshape(-1))


def main():
    hub = Path(sys.argv[1])
    variant = sys.argv[2] if len(sys.argv) > 2 else "tvm-ffi01-cu130-x86_64-linux"
    vdir = hub / "build" / variant
    meta = Metadata.read_from_file(vdir / "metadata.json")
    AllValidator(validators=default_metadata_validators()).validate_metadata(metadata=meta, variant=variant)
    meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, vdir))
    mod = get_local_kernel(vdir)
    print(f"{torch.cuda.get_device_name()}: {variant} loaded by kernels as {meta.id}; metadata and digest valid")
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    for D in (64, 128):
        for causal in (False, True):
            check_varlen(mod, D, causal)
        for page in (0, 16, 256):
            check_decode(mod, D, page, fp8=False, per_head=False, q_len=4 if page == 16 else 1)
            for per_head in (False, True):
                check_decode(mod, D, page, fp8=True, per_head=per_head, q_len=2 if per_head else 1)
    print(f"\n{'ALL OK' if not FAIL else 'FAILED: ' + ', '.join(FAIL)}")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
