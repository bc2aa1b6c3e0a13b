#!/usr/bin/env python3
"""End to end: a Qwen3-8B-shaped transformers model built from its config with random bf16 weights
(no download), prefill of 4096 and 8192 tokens, stock RMSNorm vs ours swapped in through
kernels.kernelize (LocalLayerRepository on the staged torch variant). Prints tokens/s both ways.
build_model, time_prefill and swap_rmsnorm are also imported by bench/qwen3_e2e_combined.py.

usage: e2e_qwen3.py --hub DIR [--layers N]"""
import argparse
import statistics
import sys
from pathlib import Path

import torch


def qwen3_8b_config(layers=36):
    from transformers import Qwen3Config

    cfg = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                      num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8,
                      head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, tie_word_embeddings=False)
    cfg._attn_implementation = "sdpa"
    return cfg


def build_model(layers=36, seed=0):
    """Qwen3ForCausalLM of the Qwen3-8B shape on cuda, random bf16 weights, eval mode, sdpa."""
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(seed)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = Qwen3ForCausalLM(qwen3_8b_config(layers)).eval()
        finally:
            torch.set_default_dtype(torch.float32)
    return model


def time_prefill(model, ids, reps, warmup=2):
    """(median seconds of one prefill forward over reps, fp32 logits of the last token)."""
    with torch.inference_mode():
        for _ in range(warmup):
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


def swap_rmsnorm(model, hub):
    """Swap every Qwen3RMSNorm of model for ours (torch variant staged under hub) through
    kernels.kernelize; returns (swapped, total, how)."""
    import transformers
    import kernels
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping
    from transformers.models.qwen3 import modeling_qwen3

    norms = [m for m in model.modules() if type(m).__name__ == "Qwen3RMSNorm"]
    how = "kernels.kernelize(LocalLayerRepository(hub, layer_name='RMSNorm'), Mode.INFERENCE)"
    if not hasattr(modeling_qwen3.Qwen3RMSNorm, "kernel_layer_name"):
        # transformers' hub_kernels only enables its decorator for kernels in [0.16.0, 0.17.0);
        # with kernels 0.17.2 the class is left plain, so register it with kernels' own decorator.
        kernels.use_kernel_forward_from_hub("RMSNorm")(modeling_qwen3.Qwen3RMSNorm)
        how += (" (Qwen3RMSNorm registered with kernels.use_kernel_forward_from_hub('RMSNorm') here: "
                f"transformers {transformers.__version__} accepts only kernels <0.17.0 and left it undecorated)")
    mapping = {"RMSNorm": {"cuda": LocalLayerRepository(repo_path=Path(hub), layer_name="RMSNorm")}}
    before = [m.forward for m in norms]
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device="cuda")
    swapped = sum(1 for m, f in zip(norms, before) if m.forward != f)
    if swapped == 0:
        import types

        mod = kernels.get_local_kernel(Path(hub))
        for m in norms:
            m.forward = types.MethodType(mod.layers.RMSNorm.forward, m)
        swapped = len(norms)
        how = (f"module replacement with {mod.__name__}.layers.RMSNorm.forward "
               f"(kernelize replaced nothing)")
    return swapped, len(norms), how


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True)
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import transformers

    model = build_model(args.layers)
    nparams = sum(p.numel() for p in model.parameters())
    norms = [m for m in model.modules() if type(m).__name__ == "Qwen3RMSNorm"]
    print(f"# transformers {transformers.__version__}, Qwen3-8B shape: {args.layers} layers, "
          f"{nparams / 1e9:.2f} B params (bf16, random), {len(norms)} Qwen3RMSNorm modules, sdpa attention")
    vocab = model.config.vocab_size

    # the same input for both runs (the first version drew new ids for the swapped model, so its
    # max |Δlogit| compared different inputs)
    g = torch.Generator(device="cuda").manual_seed(1)
    inputs = {T: torch.randint(0, vocab, (1, T), device="cuda", generator=g) for T in (4096, 8192)}
    res = {}
    for T in (4096, 8192):
        res[("stock", T)] = time_prefill(model, inputs[T], args.reps)

    swapped, total, how = swap_rmsnorm(model, args.hub)
    print(f"# swapped through {how}: {swapped} of {total} RMSNorm modules")
    for T in (4096, 8192):
        res[("ours", T)] = time_prefill(model, inputs[T], args.reps)
    print("| prefill tokens | stock s | stock tok/s | ours s | ours tok/s | speed-up | max |Δlogit| |")
    print("|---|---|---|---|---|---|---|")
    for T in (4096, 8192):
        (ts, ls), (to, lo) = res[("stock", T)], res[("ours", T)]
        print(f"| {T} | {ts:.4f} | {T / ts:.0f} | {to:.4f} | {T / to:.0f} | {ts / to:.3f}x | "
              f"{(ls - lo).abs().max().item():.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
