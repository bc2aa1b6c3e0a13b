#!/usr/bin/env python3
"""CUDA correctness tests of the RMSNorm variants, run on a GPU machine with torch:
the tvm-ffi CUDA variant (through tvm_ffi, torch tensors) and the torch-ext variant (torch.ops).

For each: every dtype pair, many shapes (1 row, 1 column, odd hidden sizes, 128-wide q/k-norm rows,
65536 rows, 3-D, rows wider than the register path), base pointers off 16-byte alignment,
outputs poisoned with NaN, fresh random inputs, every element checked against a float64
reference (|out-ref| <= atol + rtol*|ref|, rtol 1e-2 for 16-bit types, 1e-5 for float32), the
fused op's residual too; invalid inputs raise errors with clear messages; the kernel runs on the
caller's stream (torch's current stream) and not on the default one.

usage: test_cuda.py --hub DIR --variant NAME  (the staged repo root: DIR/build/<variant>/)
Exits non-zero on any failure; prints one line per group."""
import argparse
import sys
from pathlib import Path

import torch

FAILS = []
DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
RTOL = {torch.bfloat16: 1e-2, torch.float16: 1e-2, torch.float32: 1e-5}


def expect(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)


def ref_norm(x, w, eps):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def close(got, ref, dtype):
    """(ok, max relative error over |ref| > 1e-3, norm-relative error)"""
    rtol, atol = RTOL[dtype], (1e-6 if dtype == torch.float32 else 1e-4)
    g = got.double()
    err = (g - ref).abs()
    ok = bool(torch.all(err <= atol + rtol * ref.abs()).item())  # NaN fails
    big = ref.abs() > 1e-3
    mrel = float((err[big] / ref.abs()[big]).max().item()) if big.any() else 0.0
    nrel = float((err.norm() / ref.norm().clamp_min(1e-30)).item())
    return ok, mrel, nrel


def misaligned(shape, dtype, mis):
    """A contiguous tensor of `shape` whose base is `mis` elements past a 256-byte boundary."""
    n = 1
    for s in shape:
        n *= s
    buf = torch.empty(n + 64, dtype=dtype, device="cuda")
    return buf[mis:mis + n].view(shape)


SHAPES = [(1, 1), (1, 8), (3, 7), (1, 4096), (5, 4095), (7, 4097), (65536, 128), (4096, 128),
          (33, 64), (9, 256), (17, 1000), (64, 1024), (8, 2048), (8, 3072), (16, 4096),
          (4, 5120), (4, 8192), (2, 16384), (2, 32768), (2, 40000), (3, 65536), (2, 3, 4096),
          (2, 5, 32, 128), (1000, 4096)]
PAIRS = [("bf16", "bf16"), ("bf16", "f32"), ("f16", "f16"), ("f16", "f32"), ("f32", "f32")]


def check_backend(name, rms_norm, fused):
    for dn, wn in PAIRS:
        dt, wdt = DT[dn], DT[wn]
        worst = 0.0
        worst_n = 0.0
        for shape in SHAPES:
            for mis in (0, 1):
                H = shape[-1]
                x = misaligned(shape, dt, mis)
                x.copy_(torch.randn(shape, device="cuda"))
                w = (1 + 0.5 * torch.randn(H, device="cuda")).to(wdt)
                out = misaligned(shape, dt, mis)
                out.fill_(float("nan"))
                rms_norm(out, x, w, 1e-6)
                torch.cuda.synchronize()
                ok, mrel, nrel = close(out, ref_norm(x, w, 1e-6), dt)
                expect(ok, f"{name} rms_norm {shape} {dn}/{wn} mis={mis} (max rel {mrel:.3g})")
                worst, worst_n = max(worst, mrel), max(worst_n, nrel)
                # fused: residual += x; x = norm(residual) * w
                r = misaligned(shape, dt, mis)
                r.copy_(torch.randn(shape, device="cuda") + 0.5)
                x0, r0 = x.clone(), r.clone()
                fused(x, r, w, 1e-5)
                torch.cuda.synchronize()
                want_r = x0.double() + r0.double()
                ok_r = bool(torch.all((r.double() - want_r).abs() <=
                                      (1e-6 if dt == torch.float32 else 1e-4) + RTOL[dt] * want_r.abs()).item())
                expect(ok_r, f"{name} fused residual {shape} {dn}/{wn} mis={mis}")
                ok, mrel, nrel = close(x, ref_norm(r, w, 1e-5), dt)
                expect(ok, f"{name} fused out {shape} {dn}/{wn} mis={mis} (max rel {mrel:.3g})")
                worst, worst_n = max(worst, mrel), max(worst_n, nrel)
        expect(worst < RTOL[dt], f"{name} {dn}/{wn} max relative error {worst:.3g}")
        print(f"{name:8s} {dn:4s} weight {wn:4s}: {len(SHAPES) * 2} shapes x 2 ops, every element "
              f"within tolerance; max rel err {worst:.3g} (limit {RTOL[dt]:g}), worst "
              f"||out-ref||/||ref|| {worst_n:.3g}", flush=True)


def check_errors(name, rms_norm, fused, exc_types):
    x = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.ones(64, device="cuda", dtype=torch.bfloat16)
    cases = [
        ("dtype mismatch", lambda: rms_norm(torch.empty(8, 64, device="cuda", dtype=torch.float16), x, w, 1e-6)),
        ("contiguous", lambda: rms_norm(torch.empty(8, 32, device="cuda", dtype=torch.bfloat16), x[:, ::2], w[:32], 1e-6)),
        ("expected [64]", lambda: rms_norm(torch.empty_like(x), x, torch.ones(63, device="cuda", dtype=torch.bfloat16), 1e-6)),
        ("shape mismatch", lambda: rms_norm(torch.empty(4, 64, device="cuda", dtype=torch.bfloat16), x, w, 1e-6)),
        ("different devices", lambda: rms_norm(torch.empty(8, 64, dtype=torch.bfloat16), x, w, 1e-6)),
        ("float32", lambda: rms_norm(torch.empty_like(x), x, w.half(), 1e-6)),
        ("supported: float32", lambda: rms_norm(torch.empty(8, 64, device="cuda", dtype=torch.int32),
                                                torch.zeros(8, 64, device="cuda", dtype=torch.int32), w, 1e-6)),
        ("same memory", lambda: fused(x, x, w, 1e-6)),
    ]
    for needle, fn in cases:
        try:
            fn()
            torch.cuda.synchronize()
            expect(False, f"{name}: no error for '{needle}'")
        except exc_types as e:
            expect(needle in str(e), f"{name}: message {str(e)[:200]!r} lacks {needle!r}")
    # still usable afterwards
    out = torch.empty_like(x)
    rms_norm(out, x, w, 1e-6)
    torch.cuda.synchronize()
    expect(close(out, ref_norm(x, w, 1e-6), torch.bfloat16)[0], f"{name}: call after errors")
    print(f"{name:8s} invalid inputs: {len(cases)} cases raise {exc_types} with clear messages", flush=True)


def check_stream(name, rms_norm):
    """On a side stream s: sleep, then our kernel. A copy taken at once on the default stream must
    still see the poison (our kernel is queued behind the sleep on s), and s's result is right."""
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s
        rms_norm(out, x, w, 1e-6)
    early = out.clone()  # default stream, runs while s sleeps
    torch.cuda.synchronize()
    expect(bool(torch.isnan(early).all().item()), f"{name}: kernel did not wait on the caller's stream")
    expect(close(out, ref_norm(x, w, 1e-6), torch.bfloat16)[0], f"{name}: stream result wrong")
    # and inside CUDA graph capture (needs the capture stream)
    out2 = torch.full_like(x, float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        rms_norm(out2, x, w, 1e-6)
    g.replay()
    torch.cuda.synchronize()
    expect(close(out2, ref_norm(x, w, 1e-6), torch.bfloat16)[0], f"{name}: graph replay wrong")
    print(f"{name:8s} stream: runs on torch's current stream (side stream + graph capture)", flush=True)


def check_chain(name, rms_norm, fused):
    """A chain of dependent calls, each reading what the one before wrote: the bindings launch with
    programmatic dependent launch, so a call may start before the previous one ends and must wait
    for its writes. Eager, in a CUDA graph (programmatic edges) and with a producer kernel that is
    not ours (an add) between calls: bit-identical to calls separated by a device synchronisation,
    and the first call right against float64."""
    n, w = 12, torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    for rows in (1, 64, 8192):
        x0 = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
        want = [x0]
        for i in range(n):  # the reference: every call alone on the device
            y = torch.empty_like(x0)
            rms_norm(y, want[-1], w, 1e-6)
            torch.cuda.synchronize()
            if i == 0:
                expect(close(y, ref_norm(x0, w, 1e-6), torch.bfloat16)[0], f"{name} chain first call {rows} rows")
            want.append(y.add_(1.0))
            torch.cuda.synchronize()

        def run(ys):
            for i in range(n):
                rms_norm(ys[i + 1], ys[i], w, 1e-6)
                ys[i + 1].add_(1.0)  # a kernel not ours reads our output and writes the next input

        ys = [x0] + [torch.full_like(x0, float("nan")) for _ in range(n)]
        run(ys)
        torch.cuda.synchronize()
        expect(all(torch.equal(a, b) for a, b in zip(ys, want)), f"{name} eager chain {rows} rows")
        gs = [x0] + [torch.full_like(x0, float("nan")) for _ in range(n)]
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            run(gs)  # warm-up, outside the capture
        torch.cuda.current_stream().wait_stream(s)
        for t in gs[1:]:
            t.fill_(float("nan"))
        with torch.cuda.graph(g):
            run(gs)
        g.replay()
        torch.cuda.synchronize()
        expect(all(torch.equal(a, b) for a, b in zip(gs, want)), f"{name} graph chain {rows} rows")
        # fused: x += residual chain, each call's residual the previous call's output
        r = torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16)
        a, b = x0.clone(), r.clone()
        for _ in range(n):
            fused(a, b, w, 1e-6)
            a, b = b, a
        torch.cuda.synchronize()
        a2, b2 = x0.clone(), r.clone()
        for _ in range(n):
            fused(a2, b2, w, 1e-6)
            torch.cuda.synchronize()
            a2, b2 = b2, a2
        expect(torch.equal(a, a2) and torch.equal(b, b2), f"{name} fused chain {rows} rows")
    print(f"{name:8s} chains: dependent calls eager, in a graph and fused match calls run one at a time", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hub", required=True)
    ap.add_argument("--variant", required=True, help="one variant per process: the tvm-ffi and "
                    "torch builds share the kernel id, so one process imports only one of them")
    args = ap.parse_args()
    hub = Path(args.hub)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cc {torch.cuda.get_device_capability()}")
    from kernels import get_local_kernel

    for vdir in [hub / "build" / args.variant]:
        v = vdir.name
        if v.startswith("tvm-ffi") and "-cu" in v:
            import tvm_ffi
            mod = get_local_kernel(vdir)
            print(f"loaded {v} as {mod.__name__}")
            check_backend("tvm-ffi", mod.rms_norm, mod.fused_add_rms_norm)
            check_errors("tvm-ffi", mod.rms_norm, mod.fused_add_rms_norm, (ValueError, TypeError))
            check_stream("tvm-ffi", mod.rms_norm)
            check_chain("tvm-ffi", mod.rms_norm, mod.fused_add_rms_norm)
            del tvm_ffi
        elif v.startswith("torch"):
            mod = get_local_kernel(vdir)
            print(f"loaded {v} as {mod.__name__}")
            check_backend("torch", mod.rms_norm, mod.fused_add_rms_norm)
            check_errors("torch", mod.rms_norm, mod.fused_add_rms_norm, (RuntimeError,))
            check_stream("torch", mod.rms_norm)
            check_chain("torch", mod.rms_norm, mod.fused_add_rms_norm)
            # the layer, as kernelize would use it
            layer = torch.nn.Module()
            layer.weight = torch.nn.Parameter(torch.randn(4096, device="cuda", dtype=torch.bfloat16))
            layer.variance_epsilon = 1e-6
            x = torch.randn(3, 5, 4096, device="cuda", dtype=torch.bfloat16)
            y = mod.layers.RMSNorm.forward(layer, x)
            expect(close(y, ref_norm(x, layer.weight, 1e-6), torch.bfloat16)[0], "layers.RMSNorm")
            # torch.compile can trace the op (Meta impl)
            f = torch.compile(lambda a, b: mod.layers.RMSNorm.forward(layer, a) + b, fullgraph=True)
            y2 = f(x, x)
            expect(torch.allclose(y2.float(), (y + x).float(), rtol=2e-2, atol=2e-2),
                   "torch.compile of layers.RMSNorm")
            print("torch    layers.RMSNorm forward and torch.compile(fullgraph) ok", flush=True)
    print(f"{len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
