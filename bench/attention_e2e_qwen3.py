#!/usr/bin/env python3
"""End to end: a Qwen3-8B-shaped transformers model built from its config with random bf16 weights
(no download), prefill of 4096 and 8192 tokens, stock attention (SDPA, default backend) vs our
CUDA prefill kernel registered as a transformers attention function. CUDA events, median of
--reps. The same model and inputs are used for both; max |logit difference| is printed.

usage: attention_e2e_qwen3.py [--layers N] [--reps N]   (HK_ATTN_LIB=... or nvcc builds the .so)"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "attention", "tests"))
import hk_attention_ctypes as hk  # noqa: E402

CALLS = [0]


def hk_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: query [B,Hq,S,D], key/value [B,Hkv,Sk,D] -> [B,S,Hq,D]."""
    B, H, S, D = query.shape
    Hkv, Sk = key.shape[1], key.shape[2]
    q = query.transpose(1, 2).reshape(B * S, H, D)
    k = key.transpose(1, 2).reshape(B * Sk, Hkv, D)
    v = value.transpose(1, 2).reshape(B * Sk, Hkv, D)
    cu_q = torch.arange(B + 1, device=q.device, dtype=torch.int32) * S
    cu_k = torch.arange(B + 1, device=q.device, dtype=torch.int32) * Sk
    out, _ = hk.prefill(q, k, v, cu_q, cu_k, S, causal=True, scale=scaling)
    CALLS[0] += 1
    return out.view(B, S, H, D), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import transformers
    from transformers import AttentionInterface, Qwen3Config, Qwen3ForCausalLM

    AttentionInterface.register("hubkern", hk_attention)
    cfg = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                      num_hidden_layers=args.layers, num_attention_heads=32, num_key_value_heads=8,
                      head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        model = Qwen3ForCausalLM(cfg).eval()
        torch.set_default_dtype(torch.float32)
    print(f"# transformers {transformers.__version__}, torch {torch.__version__}, Qwen3-8B shape, "
          f"{args.layers} layers, random bf16 weights, batch 1")

    def run(T, reps):
        ids = torch.randint(0, cfg.vocab_size, (1, T), device="cuda", generator=None)
        with torch.inference_mode():
            for _ in range(2):
                model(input_ids=ids, use_cache=False, logits_to_keep=1)
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                out = model(input_ids=ids, use_cache=False, logits_to_keep=1)
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) / 1e3)
        return statistics.median(ts), out.logits.float()

    res = {}
    for T in (4096, 8192):
        torch.manual_seed(T)
        res[("stock", T)] = run(T, args.reps)
    try:
        model.set_attn_implementation("hubkern")
        how = "model.set_attn_implementation('hubkern')"
    except Exception as e:  # older/newer API: set the config field every layer reads
        model.config._attn_implementation = "hubkern"
        how = f"config._attn_implementation = 'hubkern' (set_attn_implementation: {str(e)[:60]})"
    for T in (4096, 8192):
        torch.manual_seed(T)
        CALLS[0] = 0
        res[("ours", T)] = run(T, args.reps)
        print(f"# T={T}: our attention was called {CALLS[0]} times ({how})")
    print("| prefill tokens | stock (SDPA) s | tok/s | ours s | tok/s | speed-up | max |Δlogit| |")
    print("|---|---|---|---|---|---|---|")
    for T in (4096, 8192):
        (ts, ls), (to, lo) = res[("stock", T)], res[("ours", T)]
        print(f"| {T} | {ts:.4f} | {T / ts:.0f} | {to:.4f} | {T / to:.0f} | {ts / to:.3f}x | "
              f"{(ls - lo).abs().max().item():.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
