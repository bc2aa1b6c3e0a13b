#!/usr/bin/env python3
"""End to end, one process: a Qwen3-8B-shaped transformers model built from its config with random
bf16 weights (no download), prefill (batch 1, use_cache=False) of 4096 and 8192 tokens in four
configurations of the same model on the same inputs:
  stock      transformers' Qwen3RMSNorm + SDPA attention
  rmsnorm    our RMSNorm (torch variant under --hub, swapped in by kernels.kernelize)
  attention  our CUDA prefill kernel registered as a transformers attention function
  both       both of the above
CUDA events, --warmup forwards then the median of --reps. Accuracy: the last-token logits of every
configuration are compared with stock (relative L2 error, reported) and with an fp32 copy of the
same model (stock SDPA); a configuration passes if its error against fp32 is at most
1.5 x stock bf16's error against fp32 + 1e-3, i.e. no worse than bf16 rounding already is.

Helpers come from bench/attention_e2e_qwen3.py (hk_attention) and
bench/rmsnorm/e2e_qwen3.py (build_model, time_prefill, swap_rmsnorm).

usage: qwen3_e2e_combined.py --hub DIR [--layers N] [--reps N] [--warmup N]
       (HK_ATTN_LIB=libhk_attention_cuda.so, or nvcc builds it; DIR holds the staged torch variant
       of the RMSNorm kernel, see kernels/rmsnorm/torch-ext/build_torch_variant.py)"""
import argparse
import copy
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "rmsnorm"))
import attention_e2e_qwen3 as attn_e2e  # noqa: E402
import e2e_qwen3 as rms_e2e  # noqa: E402

LENGTHS = (4096, 8192)


def set_attention(model, impl):
    try:
        model.set_attn_implementation(impl)
    except Exception:  # the config field every attention layer reads
        model.config._attn_implementation = impl


def rel_err(a, b):
    return ((a - b).norm() / b.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True, help="hub dir with the RMSNorm torch variant staged")
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    if args.reps < 5:
        raise SystemExit("qwen3_e2e_combined: use --reps 5 or more")
    import transformers
    from transformers import AttentionInterface

    AttentionInterface.register("hubkern", attn_e2e.hk_attention)
    model = rms_e2e.build_model(args.layers)
    vocab = model.config.vocab_size
    nparams = sum(p.numel() for p in model.parameters())
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}; Qwen3-8B shape, {args.layers} layers, {nparams / 1e9:.2f} B params "
          f"(random bf16), batch 1, use_cache=False, logits_to_keep=1; warm-up {args.warmup}, "
          f"median of {args.reps} (CUDA events)")
    g = torch.Generator(device="cuda").manual_seed(1)
    inputs = {T: torch.randint(0, vocab, (1, T), device="cuda", generator=g) for T in LENGTHS}

    # fp32 reference: a float32 copy of the same weights, stock modules, SDPA (no TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    ref_model = copy.deepcopy(model).float()
    ref = {}
    with torch.inference_mode():
        for T in LENGTHS:
            ref[T] = ref_model(input_ids=inputs[T], use_cache=False, logits_to_keep=1).logits.float()
    del ref_model
    torch.cuda.empty_cache()

    res = {}  # (config, T) -> (seconds, logits, attention calls)

    def measure(name):
        for T in LENGTHS:
            attn_e2e.CALLS[0] = 0
            t, logits = rms_e2e.time_prefill(model, inputs[T], args.reps, warmup=args.warmup)
            res[(name, T)] = (t, logits, attn_e2e.CALLS[0])

    measure("stock")
    set_attention(model, "hubkern")
    measure("attention")
    set_attention(model, "sdpa")
    swapped, total, how = rms_e2e.swap_rmsnorm(model, args.hub)
    print(f"# RMSNorm: {swapped} of {total} Qwen3RMSNorm modules swapped through {how}")
    measure("rmsnorm")
    set_attention(model, "hubkern")
    measure("both")

    ok = swapped == total
    want_calls = args.layers * (args.warmup + args.reps)
    print("| config | prefill tokens | s | tok/s | speed-up vs stock | attention calls | "
          "rel. L2 err vs stock | rel. L2 err vs fp32 | max abs Δ vs stock | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("stock", "rmsnorm", "attention", "both"):
        for T in LENGTHS:
            t, logits, calls = res[(name, T)]
            ts, ls, _ = res[("stock", T)]
            e_ref, e_stock_ref = rel_err(logits, ref[T]), rel_err(ls, ref[T])
            good = e_ref <= 1.5 * e_stock_ref + 1e-3
            expect = want_calls if name in ("attention", "both") else 0
            if calls != expect:
                good = False
            ok = ok and good
            print(f"| {name} | {T} | {t:.4f} | {T / t:.0f} | {ts / t:.3f}x | {calls} | "
                  f"{rel_err(logits, ls):.3g} | {e_ref:.3g} | {(logits - ls).abs().max().item():.3g} | "
                  f"{'ok' if good else 'FAIL'} |")
    print(f"# check: rel. L2 err vs fp32 <= 1.5 x stock's + 1e-3, and our attention called "
          f"{want_calls} times per length exactly when it is on: {'ALL OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
