"""Structured prefill probes for localising a layout bug (run on the GPU when a kernel change fails
test_attention_gpu.py): each probe isolates one operand path and prints where the output departs
from the expected value. One sequence of 128 queries / 256 keys, one head, non-causal, bf16.
  uniform-V-rows:  Q = 0 (P uniform), V[j,:] = j/256   -> O = mean key index: V's row addressing
  uniform-V-cols:  Q = 0, V[:,d] = d/D                 -> O[:,d] = d/D: V's column (N) addressing
  onehot-S:        Q[i] = c*e_(i%D), K[j] = e_(j%D), large c -> O[i] = mean of V over the keys j
                   with j%D == i%D: Q and K addressing (rows and the D columns)
Usage: python3 diag_prefill.py [D]"""
import os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hk_attention_ctypes as hk

dev = torch.device("cuda")


def run(q, k, v):
    cu_q = torch.tensor([0, q.shape[0]], dtype=torch.int32, device=dev)
    cu_k = torch.tensor([0, k.shape[0]], dtype=torch.int32, device=dev)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((1, q.shape[0]), float("nan"), device=dev)
    hk.prefill(q, k, v, cu_q, cu_k, q.shape[0], False, 1.0, out, lse)
    torch.cuda.synchronize()
    return out[:, 0].float()


def report(name, got, want, tol=2e-2):
    bad = ((got - want).abs() > tol * (want.abs() + 1)) | torch.isnan(got)
    print(f"{'ok  ' if not bad.any() else 'FAIL'} {name}: bad {int(bad.sum())}/{bad.numel()}", flush=True)
    if bad.any():
        idx = bad.nonzero()[:12].tolist()
        for r, c in idx:
            print(f"     row {r:3d} col {c:3d}: got {float(got[r, c]):+.4f} want {float(want[r, c]):+.4f}")


def main():
    D = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    M, N, bf = 128, 256, torch.bfloat16
    j = torch.arange(N, device=dev, dtype=torch.float32)
    d = torch.arange(D, device=dev, dtype=torch.float32)
    q = torch.zeros(M, 1, D, device=dev, dtype=bf)
    k = torch.randn(N, 1, D, device=dev, dtype=bf)
    v = (j[:, None] / N).expand(N, D).to(bf)[:, None, :].contiguous()
    report(f"D{D} uniform-V-rows", run(q, k, v), v[:, 0].float().mean(0).expand(M, D))
    v = (d[None, :] / D).expand(N, D).to(bf)[:, None, :].contiguous()
    report(f"D{D} uniform-V-cols", run(q, k, v), (d / D).expand(M, D))
    eye = torch.eye(D, device=dev)
    q = (20.0 * eye[torch.arange(M, device=dev) % D]).to(bf)[:, None, :].contiguous()
    k = eye[torch.arange(N, device=dev) % D].to(bf)[:, None, :].contiguous()
    v = torch.randn(N, 1, D, device=dev, dtype=bf)
    want = torch.stack([v[(torch.arange(N, device=dev) % D) == (i % D), 0].float().mean(0) for i in range(M)])
    report(f"D{D} onehot-S", run(q, k, v), want)


if __name__ == "__main__":
    main()
