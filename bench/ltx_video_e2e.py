#!/usr/bin/env python3
"""LTX-Video's transformer (diffusers' LTXVideoTransformer3DModel with its published default config,
2B parameters, random bf16 weights: nothing is downloaded), one denoising step, stock vs our kernels:

  stock      diffusers' RMSNorm (no weight) + torch.nn.RMSNorm (q/k norm) + SDPA through diffusers
  rmsnorm    every RMSNorm module's forward replaced by our RMSNorm op (torch variant, --rms-hub)
  both       rmsnorm + our prefill kernel for the self-attention (attn1: head dim 64, no mask;
             torch variant, --attn-hub); cross-attention (text mask) stays SDPA
each eager and under torch.compile (the ops are torch.library ops, so the compiled graph keeps them).

Then the RMSNorm micro-benchmark at exactly the (shape, module) calls that one step makes (recorded
with forward hooks): the stock module's forward (PyTorch's implementation as the model runs it),
F.rms_norm, torch.compile of the module, Liger-kernel (if importable) and ours, each timed as the GPU
time per call inside a CUDA graph over enough fresh randn input sets to exceed the L2 4x, median of
25 replays, with the copy ceiling of the same run; every method is checked against float64 first.

Accuracy of a step: the output's relative L2 error against a float32 copy of the same model (stock);
a configuration passes if it is at most 1.5 x stock bf16's error + 1e-3.

usage: ltx_video_e2e.py --rms-hub DIR --attn-hub DIR [--frames 161 --height 480 --width 704]
                         [--batch 2] [--reps 5] [--layers 28] [--json F] [--no-compile]
(DIRs hold the staged torch variants: kernels/{rmsnorm,attention}/torch-ext/build_torch_variant.py)"""
import argparse
import copy
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "kernels", "rmsnorm", "benchmarks"))
from bench import copy_ceiling, graph_time, nsets_for  # noqa: E402


def torch_variant(hub):
    from pathlib import Path

    from kernels import get_local_kernel

    build = Path(hub) / "build"
    found = [v for v in build.iterdir() if v.name.startswith("torch")]
    if not found:
        raise SystemExit(f"no torch variant under {build}")
    return get_local_kernel(found[0])


def build_transformer(layers, dtype):
    from diffusers import LTXVideoTransformer3DModel

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LTXVideoTransformer3DModel(num_layers=layers)
    return model.to(dtype).eval()


def step_inputs(batch, frames, height, width, dtype, seed=1):
    """The transformer's inputs for one denoising step of a (frames, height, width) video: latents
    after LTX's VAE (32x spatial, 8x temporal compression, 128 channels), T5 text states (128
    tokens x 4096), as diffusers' LTXPipeline passes them (batch 2 = classifier-free guidance)."""
    lf, lh, lw = (frames - 1) // 8 + 1, height // 32, width // 32
    g = torch.Generator(device="cuda").manual_seed(seed)
    return dict(
        hidden_states=torch.randn(batch, lf * lh * lw, 128, device="cuda", dtype=dtype, generator=g),
        encoder_hidden_states=torch.randn(batch, 128, 4096, device="cuda", dtype=dtype, generator=g),
        timestep=torch.full((batch,), 500, device="cuda", dtype=torch.long),
        encoder_attention_mask=torch.ones(batch, 128, device="cuda", dtype=dtype),
        num_frames=lf, height=lh, width=lw,
        rope_interpolation_scale=(8 / 25, 32, 32), return_dict=False)


def is_norm(m):
    return type(m).__name__ == "RMSNorm"  # diffusers.models.normalization.RMSNorm and torch.nn.RMSNorm


def swap_rmsnorm(model, rms):
    """Replace every RMSNorm module's forward with ours; a module without weight gets ones."""
    n = 0
    for m in model.modules():
        if not is_norm(m):
            continue
        w = getattr(m, "weight", None)
        eps = m.eps if m.eps is not None else torch.finfo(torch.bfloat16).eps
        if w is None:
            ones = torch.ones(m.normalized_shape[-1] if hasattr(m, "normalized_shape") else m.dim[-1],
                              device="cuda", dtype=torch.bfloat16)
            m.register_buffer("_hk_ones", ones, persistent=False)

        def forward(x, m=m, eps=float(eps)):
            x = x.contiguous()
            w = m.weight if getattr(m, "weight", None) is not None else m._hk_ones
            if w.dtype != x.dtype and w.dtype != torch.float32:
                w = w.to(x.dtype)
            out = torch.empty_like(x)
            rms.ops.rms_norm(out, x, w, eps)
            return out

        m.forward = forward
        n += 1
    return n


class OurSelfAttention:
    """diffusers' LTXVideoAttnProcessor with the self-attention (no mask, no encoder states) done by
    our varlen prefill op; anything else falls through to the stock processor."""

    def __init__(self, attn_mod, stock):
        self.attn_mod, self.stock, self.calls = attn_mod, stock, 0

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 image_rotary_emb=None):
        if encoder_hidden_states is not None or attention_mask is not None:
            return self.stock(attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)
        from diffusers.models.transformers.transformer_ltx import apply_rotary_emb

        b, s, _ = hidden_states.shape
        q = attn.norm_q(attn.to_q(hidden_states))
        k = attn.norm_k(attn.to_k(hidden_states))
        v = attn.to_v(hidden_states)
        if image_rotary_emb is not None:
            q = apply_rotary_emb(q, image_rotary_emb)
            k = apply_rotary_emb(k, image_rotary_emb)
        h = attn.heads
        q = q.reshape(b * s, h, -1).contiguous()
        k = k.reshape(b * s, h, -1).contiguous()
        v = v.reshape(b * s, h, -1).contiguous()
        out = torch.empty_like(q)
        lse = torch.empty(h, b * s, device=q.device, dtype=torch.float32)
        cu = torch.arange(0, (b + 1) * s, s, device=q.device, dtype=torch.int32)
        self.attn_mod.varlen_attention(out, lse, q, k, v, cu, cu, s, causal=False)
        if not torch.compiler.is_compiling():  # dynamo guards on Python ints: a counter would recompile
            self.calls += 1
        o = out.view(b, s, -1).to(q.dtype)
        return attn.to_out[1](attn.to_out[0](o))


def swap_attention(model, attn_mod):
    procs = []
    for blk in model.transformer_blocks:
        p = OurSelfAttention(attn_mod, blk.attn1.processor)
        blk.attn1.set_processor(p)
        procs.append(p)
    return procs


def time_step(model, inputs, reps, warmup=2):
    with torch.inference_mode():
        for _ in range(warmup):
            model(**inputs)
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out = model(**inputs)[0]
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
    return statistics.median(ts), out.float()


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def record_norm_calls(model, inputs):
    """[(kind, shape, eps, has_weight)] of the RMSNorm calls of one step, with counts."""
    seen = {}
    hooks = []
    for m in model.modules():
        if is_norm(m):
            kind = f"{type(m).__module__.split('.')[0]}.{type(m).__name__}"

            def hook(mod, args, kind=kind):
                key = (kind, tuple(args[0].shape), float(mod.eps), getattr(mod, "weight", None) is not None)
                seen[key] = seen.get(key, 0) + 1

            hooks.append(m.register_forward_pre_hook(hook))
    with torch.inference_mode():
        model(**inputs)
    for h in hooks:
        h.remove()
    return seen


def micro(model, calls, rms, copy_bw):
    """Per call shape: the stock module, F.rms_norm, compile, Liger, ours."""
    try:
        from liger_kernel.ops.rms_norm import rms_norm_forward
    except Exception as e:  # noqa: BLE001
        rms_norm_forward = None
        print(f"# Liger-kernel not importable ({e}); not measured")
    mods = {}
    for m in model.modules():
        if is_norm(m):
            mods.setdefault((f"{type(m).__module__.split('.')[0]}.{type(m).__name__}",
                             getattr(m, "weight", None) is not None), m)
    print("\n| module | x shape | calls/step | MB | stock µs | F.rms_norm µs | compile µs | Liger µs | ours µs | ours %copy | ours/stock | ours/best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for (kind, shape, eps, has_w), count in sorted(calls.items(), key=lambda kv: -math.prod(kv[0][1])):
        mod = copy.deepcopy(mods[(kind, has_w)])
        h = shape[-1]
        nbytes = math.prod(shape) * 2 * 2 + (h * 2 if has_w else 0)
        nsets = nsets_for(nbytes)
        xs = [torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
        w = mod.weight.detach() if has_w else torch.ones(h, device="cuda", dtype=torch.bfloat16)
        ref = lambda x: (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + eps) * w.double())  # noqa: E731
        ys = [None] * len(xs)

        def ours(x, y):  # y None: a fresh output per call from torch's allocator, as every baseline does
            y = torch.empty_like(x) if y is None else y
            rms.ops.rms_norm(y, x, w, eps)
            return y

        stock = lambda x: mod(x)  # noqa: E731
        comp = torch.compile(lambda x: mod(x), dynamic=False)
        meth = {"stock": stock, "F.rms_norm": lambda x: F.rms_norm(x, (h,), w, eps), "compile": comp}
        if rms_norm_forward is not None:
            for mode in ("llama", "gemma"):
                meth[f"liger-{mode}"] = lambda x, mode=mode: rms_norm_forward(x, w, eps, 0.0, mode, None)[0]
        res = {}
        with torch.inference_mode():
            for name, f in list(meth.items()) + [("ours", None)]:
                out = ours(xs[0], torch.full_like(xs[0], float("nan"))) if f is None else f(xs[0])
                torch.cuda.synchronize()
                r = ref(xs[0])
                ok = bool(((out.double() - r).abs() <= 1e-4 + 2e-2 * r.abs()).all())
                if not ok:
                    print(f"# {name} at {shape}: output off vs float64; not timed")
                    continue
                if f is None:
                    timed = [(lambda x=x, y=y: ours(x, y)) for x, y in zip(xs, ys)]
                else:
                    timed = [(lambda x=x, f=f: f(x)) for x in xs]
                res[name] = 1e3 * graph_time(timed)
        liger = min([v for k, v in res.items() if k.startswith("liger")], default=math.nan)
        base = {k: v for k, v in res.items() if k not in ("ours",) and not k.startswith("liger")}
        if not math.isnan(liger):
            base["liger"] = liger
        best = min(base.values())
        o = res.get("ours", math.nan)
        print(f"| {kind}{'' if has_w else ' (no weight)'} | {list(shape)} | {count} | {nbytes / 1e6:.1f} | "
              f"{res.get('stock', math.nan):.2f} | {res.get('F.rms_norm', math.nan):.2f} | {res.get('compile', math.nan):.2f} | "
              f"{liger:.2f} | {o:.2f} | {100 * nbytes / (o * 1e-6) / 1e9 / copy_bw:.0f}% | "
              f"{res.get('stock', math.nan) / o:.2f}x | {best / o:.2f}x |", flush=True)
        rows.append({"module": kind, "weight": has_w, "shape": list(shape), "calls": count, "MB": nbytes / 1e6, **res})
        del xs, ys
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rms-hub", required=True)
    ap.add_argument("--attn-hub", required=True)
    ap.add_argument("--frames", type=int, default=161)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=704)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--skip-micro", action="store_true", help="only the end-to-end step")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import diffusers

    rms, attn = torch_variant(args.rms_hub), torch_variant(args.attn_hub)
    model = build_transformer(args.layers, torch.bfloat16)
    inputs = step_inputs(args.batch, args.frames, args.height, args.width, torch.bfloat16)
    tokens = inputs["hidden_states"].shape[1]
    nparams = sum(p.numel() for p in model.parameters())
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, diffusers {diffusers.__version__}; "
          f"LTXVideoTransformer3DModel default config, {args.layers} layers, {nparams / 1e9:.2f} B params (random bf16)")
    print(f"# one denoising step: batch {args.batch}, {args.frames} frames {args.height}x{args.width} -> "
          f"{tokens} latent tokens, 128 text tokens; warm-up 2, median of {args.reps} (CUDA events)")

    # float32 reference of the same weights and inputs
    ref_model = copy.deepcopy(model).float()
    ref_in = {k: (v.float() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inputs.items()}
    with torch.inference_mode():
        ref = ref_model(**ref_in)[0].float()
    del ref_model
    torch.cuda.empty_cache()

    calls = record_norm_calls(model, inputs)
    ncalls = sum(calls.values())
    # the micro-benchmark first, while the model's RMSNorm modules are still the stock ones
    rows, copy_bw = [], math.nan
    if not args.skip_micro:
        copy_bw = copy_ceiling()
        print(f"\n# RMSNorm calls of one step (copy ceiling {copy_bw:.0f} GB/s, bf16 x; %copy counts read x + write y + weight)")
        rows = micro(model, calls, rms, copy_bw)
        torch._dynamo.reset()
    results = []

    def measure(name, m, compiled):
        mm = torch.compile(m) if compiled else m
        t, out = time_step(mm, inputs, args.reps)
        results.append({"config": name, "compile": compiled, "s": t, "out": out})

    configs = [("stock", False)] + ([] if args.no_compile else [("stock", True)])
    for name, c in configs:
        measure(name, model, c)
    torch._dynamo.reset()
    swapped = swap_rmsnorm(model, rms)
    for c in [False] + ([] if args.no_compile else [True]):
        measure("rmsnorm", model, c)
    torch._dynamo.reset()
    procs = swap_attention(model, attn)
    for p in procs:
        p.calls = 0
    for c in [False] + ([] if args.no_compile else [True]):
        measure("both", model, c)
    attn_calls = sum(p.calls for p in procs)
    torch._dynamo.reset()

    print(f"# RMSNorm: {swapped} modules swapped (forward replaced), {ncalls} RMSNorm calls per step; "
          f"our attention: {len(procs)} self-attention processors, {attn_calls} calls in the 'both' runs "
          f"(eager: {args.reps + 2} forwards x {len(procs)}; compiled graphs call the op without the Python counter)")
    stock_t = {r["compile"]: r["s"] for r in results if r["config"] == "stock"}
    stock_err = {r["compile"]: rel_err(r["out"], ref) for r in results if r["config"] == "stock"}
    print("\n| config | torch.compile | step s | speed-up vs stock (same mode) | rel. L2 err vs fp32 | check |")
    print("|---|---|---|---|---|---|")
    allok = True
    for r in results:
        e = rel_err(r["out"], ref)
        ok = e <= 1.5 * stock_err[r["compile"]] + 1e-3
        allok &= ok
        r["err_fp32"] = e
        print(f"| {r['config']} | {'yes' if r['compile'] else 'no'} | {r['s']:.4f} | "
              f"{stock_t[r['compile']] / r['s']:.3f}x | {e:.4f} | {'ok' if ok else 'FAIL'} |")

    tot = {k: sum(r.get(k, math.nan) * r["calls"] for r in rows) for k in ("stock", "F.rms_norm", "compile", "ours")}
    if rows:
        print(f"\n# RMSNorm time per step (sum over calls): stock {tot['stock'] / 1e3:.2f} ms, F.rms_norm {tot['F.rms_norm'] / 1e3:.2f} ms, "
              f"compile {tot['compile'] / 1e3:.2f} ms, ours {tot['ours'] / 1e3:.2f} ms ({tot['stock'] / tot['ours']:.2f}x stock)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokens": tokens, "configs": [{k: v for k, v in r.items() if k != "out"} for r in results],
                       "micro": rows, "copy_GBps": copy_bw}, f, indent=1)
    print(f"# check: every configuration within 1.5 x stock's fp32 error + 1e-3: {'ALL OK' if allok else 'FAILED'}")
    return 0 if allok else 1


if __name__ == "__main__":
    sys.exit(main())
