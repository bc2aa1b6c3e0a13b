"""One decode call shape for a profiler: B=16, 32/8 heads, D=128, bf16, 32k context, the KV cache
in one layout, `--calls` calls (run it under ncu/nsys; the first call is a warm-up). Layouts:
  bshd        contiguous [B,S,Hkv,D]
  paged-order paged [blocks,128,Hkv,D] with each sequence's pages in order: the same addresses
              as bshd, so any difference between the two is the kernel's, not the layout's
Prints the kernel the library ran. Usage:
  HK_ATTN_LIB=... ncu --metrics ... python3 bench/attention_decode_profile.py --layout paged-order --splits 1"""
import argparse, os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "attention", "tests"))
import hk_attention_ctypes as hk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=("bshd", "paged-order"), required=True)
    ap.add_argument("--splits", type=int, default=0)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=32768)
    a = ap.parse_args()
    B, Hq, Hkv, D, S, bs = 16, 32, 8, 128, a.ctx, 128
    dev = torch.device("cuda")
    q = torch.randn(B, 1, Hq, D, device=dev, dtype=torch.bfloat16)
    kc = torch.randn(B, S, Hkv, D, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    sl = torch.full((B,), S, dtype=torch.int32, device=dev)
    if a.layout == "bshd":
        call = hk.Decode(q, kc, vc, (S * Hkv * D, Hkv * D, D), sl, S, None, 0, None, a.splits)
    else:  # the same memory viewed as pages: block i of sequence b is b * S/bs + i
        bt = torch.arange(B * (S // bs), device=dev, dtype=torch.int32).view(B, S // bs)
        call = hk.Decode(q, kc, vc, (bs * Hkv * D, Hkv * D, D), sl, S, bt, bs, None, a.splits)
    call.set_hkv(Hkv)
    for _ in range(a.calls):
        call()
    torch.cuda.synchronize()
    print(f"layout={a.layout} kernel={call.kernel()} splits={call.num_splits}", flush=True)


if __name__ == "__main__":
    main()
