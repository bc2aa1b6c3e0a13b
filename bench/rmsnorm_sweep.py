#!/usr/bin/env python3
"""RMSNorm sweep on one GPU: our CUDA kernel (one or more builds of kernels/rmsnorm/rmsnorm_cuda/
rmsnorm.cu, loaded with ctypes, so that two versions run side by side) against F.rms_norm and
torch.compile, all in one run, over rows x hidden x (dtype, weight dtype).

Liger-kernel (pure Triton; its wheel travels to the device, put it on PYTHONPATH) is a baseline
when it imports: liger_kernel.ops.rms_norm.rms_norm_forward in its default "llama" casting mode and
in "gemma" mode with offset 0 (fp32 math throughout, our semantics), the faster of the two that
passes the float64 check. Method, as bench/rmsnorm/bench.py (whose timing helpers this imports):
copy ceiling measured in the same run (1 GiB device-to-device copy, read + write counted); every
method timed as the GPU time per call inside a CUDA graph that calls it once per buffer set, with
enough sets of fresh randn inputs to exceed the L2 four times over; CUDA events around replays,
median of 25 after warm-up. GB/s = (read x + read w + write y) / time. Semantics of every method:
y = (x * rsqrt(mean(x^2) + eps) * w) in x's dtype, fp32 math; F.rms_norm gets the weight cast
to x's dtype once, outside the timing (it wants one dtype). Before any timing, each build passes
a correctness pass: outputs poisoned with NaN, every element against float64 (|err| <= 1e-4 +
1e-2|ref| for 16-bit outputs), many shapes including misaligned bases and both ops.

FlashInfer (--flashinfer DIR: the package that ../shared/tools/flashinfer/ built for sm_90a, its JIT off;
bench/rmsnorm/flashinfer_prep.sh makes it) is a baseline: flashinfer.norm.rmsnorm with
its defaults (the CUDA norm module, programmatic dependent launch on where the device has it), the
weight cast to x's dtype as for F.rms_norm. --triton FILE adds the Triton anchor (the Liger-style
row kernel of shared/anchors/h200_triton_rmsnorm.py, executed from that file). --compile-per-hidden
compiles one torch.compile function per (hidden size, dtypes) with the row dimension marked
dynamic (what torch.compile does for a model's layer; the default one dynamic=True function
compiles a looped reduction for every width). --only-alloc times the builds with a fresh output per
call only (like for like with the baselines, which allocate theirs).

--rounds N times every method N times per shape, in alternating order, and keeps each method's
best (the same rule for every method). --shapes x/w:RxH,... times only those shapes (the same checks first). --pdl-chain adds, for each
build with the _ex entry points, a chain of dependent launches y[i+1] = rms(y[i]) (32 calls in one
graph, so each call reads what the previous one wrote) with programmatic dependent launch off and
on; the chain's outputs must be bit-identical both ways and its first call right against float64.
--pdl also times every build launched with programmatic dependent launch (its _ex entry point with
RMSNORM_CUDA_PDL: the kernel's launch overlaps the previous node's tail), as the Hub variants'
bindings launch it and as FlashInfer launches its norm by default; those columns are NAME+pdl, and
the last one is the one the ratio column compares.

--copy-lib PATH (bench/rmsnorm/copy_kernel.cu built as a shared library) adds the ceiling of the
shape itself: a plain SM copy of the same bytes (read rows x H, write rows x H into a fresh
output, as the +alloc columns do), timed the same way in every configuration the library has, the
fastest kept; "% same copy" is that copy's time over the last build's. It shows what part of a
shape's distance from the 1 GiB ceiling is the size (ramp-up and drain of a short kernel), which
no kernel can remove, and what part is ours. Shapes under 4 MB are not copied (fixed costs only).

usage: rmsnorm_sweep.py --lib NAME=PATH [--lib NAME=PATH ...] [--grid full|quick] [--json F]
                        [--shapes LIST] [--pdl-chain] [--pdl] [--rounds N]"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "rmsnorm"))
from bench import copy_ceiling, graph_time, load_triton, nsets_for  # noqa: E402

DT = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
NAME = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
EPS = 1e-6
BASES = ("F.rms_norm", "compile", "liger", "triton", "flashinfer")
PDL = 1  # RMSNORM_CUDA_PDL (rmsnorm_cuda.h)


def load(path):
    lib = ctypes.CDLL(path)
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.rmsnorm_cuda_rms_norm.argtypes = [vp, vp, vp, ctypes.c_int, ctypes.c_int, i64, i64, ctypes.c_float, ctypes.c_int, vp]
    lib.rmsnorm_cuda_fused_add_rms_norm.argtypes = lib.rmsnorm_cuda_rms_norm.argtypes
    lib.has_ex = hasattr(lib, "rmsnorm_cuda_rms_norm_ex")
    if lib.has_ex:
        lib.rmsnorm_cuda_rms_norm_ex.argtypes = lib.rmsnorm_cuda_rms_norm.argtypes + [ctypes.c_uint]
    return lib


def ours_ex(lib, out, x, w, flags):
    rc = lib.rmsnorm_cuda_rms_norm_ex(out.data_ptr(), x.data_ptr(), w.data_ptr(), DT[x.dtype], DT[w.dtype],
                                      x.shape[0], x.shape[-1], EPS, x.device.index or 0,
                                      torch.cuda.current_stream().cuda_stream, flags)
    if rc:
        raise RuntimeError(f"rmsnorm_cuda_rms_norm_ex: {rc}")


PDL_SHAPES = [(64, 128), (1024, 128), (8192, 128), (64, 4096), (1024, 4096), (8192, 4096), (65536, 4096)]


def pdl_chain(name, lib, n=32):
    """Per-call µs of a chain of n dependent calls in one graph, PDL off and on; None on a check failure."""
    print(f"\nPDL chain, {name}: y[i+1] = rms(y[i]), {n} calls in one graph, bf16/bf16, median of 25 replays")
    print("| rows x H | MB | off µs/call | PDL µs/call | PDL/off |\n|---|---|---|---|---|")
    out = []
    for rows, h in PDL_SHAPES:
        w = (1 + 0.1 * torch.randn(h, device="cuda")).to(torch.bfloat16)
        res = {}
        for flags in (0, 1):
            ys = [torch.randn(rows, h, device="cuda", dtype=torch.bfloat16)]
            ys += [torch.full_like(ys[0], float("nan")) for _ in range(n)]
            calls = [lambda i=i: ours_ex(lib, ys[i + 1], ys[i], w, flags) for i in range(n)]
            t = graph_time(calls)  # already per call
            torch.manual_seed(1)  # the same input both ways, then one checked run of the chain
            ys[0].copy_(torch.randn(rows, h, device="cuda", dtype=torch.bfloat16))
            for y in ys[1:]:
                y.fill_(float("nan"))
            for c in calls:
                c()
            torch.cuda.synchronize()
            if not ok16(ys[1], ref64(ys[0], w)):
                print(f"FAIL {name} pdl={flags} {rows}x{h}: first call vs float64")
                return None
            res[flags] = (t, ys[-1].clone())
        if not torch.equal(res[0][1], res[1][1]):
            print(f"FAIL {name} {rows}x{h}: PDL chain output differs from the plain chain")
            return None
        mb = rows * h * 4 / 1e6
        print(f"| {rows}x{h} | {mb:.1f} | {1e3 * res[0][0]:.2f} | {1e3 * res[1][0]:.2f} | {res[1][0] / res[0][0]:.3f} |", flush=True)
        out.append({"rows": rows, "hidden": h, "off_us": 1e3 * res[0][0], "pdl_us": 1e3 * res[1][0]})
    return out


def ours(lib, out, x, w):
    rc = lib.rmsnorm_cuda_rms_norm(out.data_ptr(), x.data_ptr(), w.data_ptr(), DT[x.dtype], DT[w.dtype],
                                   x.shape[0], x.shape[-1], EPS, x.device.index or 0,
                                   torch.cuda.current_stream().cuda_stream)
    if rc:
        raise RuntimeError(f"rmsnorm_cuda_rms_norm: {rc}")


def ours_fused(lib, x, r, w):
    rc = lib.rmsnorm_cuda_fused_add_rms_norm(x.data_ptr(), r.data_ptr(), w.data_ptr(), DT[x.dtype], DT[w.dtype],
                                             x.shape[0], x.shape[-1], EPS, x.device.index or 0,
                                             torch.cuda.current_stream().cuda_stream)
    if rc:
        raise RuntimeError(f"rmsnorm_cuda_fused_add_rms_norm: {rc}")


def ref64(x, w):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def ok16(got, ref):
    err = (got.double() - ref).abs()
    return bool(torch.all(err <= 1e-4 + 1e-2 * ref.abs()).item())  # NaN fails


def norm_ref(x, w):  # the compiled baseline; same semantics as ours
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def view_at(n, dtype, mis):
    buf = torch.empty(n + 64, dtype=dtype, device="cuda")
    return buf[mis:mis + n]


def correctness(name, lib):
    """Poisoned outputs, fresh inputs, float64 reference; returns the number of failures."""
    shapes = [(1, 128), (3, 128), (100, 128), (1000, 128), (2111, 128), (2112, 128), (8448, 128), (70000, 128),
              (263, 512), (264, 512), (2111, 256), (2111, 1024), (2112, 1024), (263, 2048), (264, 2048),
              (1, 8), (5, 24), (1, 2048), (64, 2048), (1055, 2048), (1056, 2048), (2000, 2048),
              (1, 4096), (64, 4096), (500, 4096), (1057, 4096), (64, 7168), (1055, 7168), (1056, 8192),
              (3, 16384), (2, 40000), (7, 4097), (5, 4095), (33, 1000), (9, 256),
              # whole-block rows sized to the row (v6): widths of 96..1024 threads, 1 and 2 rows a block
              (1, 1032), (300, 1032), (263, 5120), (264, 5120), (1000, 5120), (7, 6144), (513, 6144),
              (263, 10240), (301, 10240), (5, 12288), (300, 12288), (300, 24576), (9, 32768)]
    fails, n = 0, 0
    for dt, wdt in ((torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32), (torch.float16, torch.float16),
                    (torch.float16, torch.float32), (torch.float32, torch.float32)):  # f32: same loose bound
        if True:
            for rows, h in shapes:
                for mis in (0, 1):
                    x = view_at(rows * h, dt, mis).view(rows, h).normal_()
                    w = (1 + 0.1 * torch.randn(h, device="cuda")).to(wdt)
                    out = view_at(rows * h, dt, mis).view(rows, h).fill_(float("nan"))
                    ours(lib, out, x, w)
                    r = view_at(rows * h, dt, 0).view(rows, h).normal_()
                    xf, rf = x.clone(), r.clone()
                    ours_fused(lib, xf, rf, w)
                    torch.cuda.synchronize()
                    s = (x.double() + r.double()).to(dt)
                    good = ok16(out, ref64(x, w)) and ok16(xf, ref64(s, w)) and ok16(rf, s.double())
                    n += 1
                    if not good:
                        fails += 1
                        print(f"FAIL {name} {NAME[dt]}/{NAME[wdt]} {rows}x{h} misaligned={mis}", flush=True)
    print(f"correctness {name}: {n - fails}/{n} cases ok (rms_norm + fused, poisoned outputs, float64)", flush=True)
    return fails


def grid(kind):
    rows = [1, 64, 256, 1024, 8192, 65536, 262144]
    hidden = [128, 512, 2048, 4096, 7168, 16384]
    if kind == "quick":
        rows, hidden = [64, 8192, 65536], [128, 4096, 7168]
    if kind == "quickwide":
        rows, hidden = [64, 8192, 65536], [128, 4096, 7168, 12288]
    if kind == "wide":  # issue 23: hidden sizes that are not powers of two, 64 MB - 2 GB
        out = []
        for h in (1280, 1536, 2560, 3072, 5120, 6144, 8192, 10240, 12288):
            out += [(r, h) for r in (1, 64, 1024, 4096, 8192, 32768, 65536, 98304) if r * h * 4 <= 2.2e9]
        return out
    return [(r, h) for r in rows for h in hidden if r * h * 2 <= 1.1e9]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", required=True, help="NAME=PATH of a build of rmsnorm.cu")
    ap.add_argument("--grid", default="full", help="bf16/bf16 grid: full or quick")
    ap.add_argument("--other-grid", default="quick", help="grid of the other dtype pairs")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--shapes", default=None, help="x/w:RxH,... only these shapes")
    ap.add_argument("--pdl-chain", action="store_true")
    ap.add_argument("--pdl", action="store_true", help="also time each build launched with PDL (NAME+pdl)")
    ap.add_argument("--alloc", action="store_true",
                    help="also time each build allocating its output per call, as F.rms_norm, compile and Liger do "
                         "(inside a graph the pool hands every call the same block, which stays in L2); "
                         "the ratios then compare that column")
    ap.add_argument("--flashinfer", default=None, help="dir holding the prebuilt flashinfer package")
    ap.add_argument("--triton", default=None, help="the Triton anchor file (shared/anchors/h200_triton_rmsnorm.py)")
    ap.add_argument("--compile-per-hidden", action="store_true")
    ap.add_argument("--only-alloc", action="store_true")
    ap.add_argument("--wide-grid", action="store_true", help="add the wide-row grid (H 5120..12288, to 2 GB)")
    ap.add_argument("--copy-lib", default=None, help="bench/rmsnorm/copy_kernel.cu built as a .so: a same-size copy per shape")
    ap.add_argument("--rounds", type=int, default=1, help="time every method this often, alternating order; keep each one's best")
    args = ap.parse_args()
    torch.manual_seed(0)
    libs = [(s.split("=", 1)[0], load(s.split("=", 1)[1])) for s in args.lib]
    if sum(correctness(n, l) for n, l in libs):
        print("correctness failures: no timing")
        return 1
    copy = copy_ceiling()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, copy ceiling {copy:.0f} GB/s; "
          )
    comp = torch.compile(norm_ref, dynamic=True)
    try:
        from liger_kernel.ops.rms_norm import rms_norm_forward as liger_fwd
        import liger_kernel
        liger_note = f"Liger-kernel {getattr(liger_kernel, '__version__', '?')}: measured"
    except Exception as e:  # noqa: BLE001
        liger_fwd, liger_note = None, f"Liger-kernel not importable ({type(e).__name__}): not measured"
    print(liger_note)
    fi_norm = None
    if args.flashinfer:
        sys.path.insert(0, args.flashinfer)
        os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")
        os.environ.setdefault("FLASHINFER_USE_CUDA_NORM", "1")
        try:
            import flashinfer
            import flashinfer.norm as fi_mod
            fi_norm = fi_mod.rmsnorm
            print(f"FlashInfer {flashinfer.__version__} from {os.path.dirname(flashinfer.__file__)}: measured "
                  f"(JIT disabled={os.environ['FLASHINFER_DISABLE_JIT']}, CUDA norm={os.environ['FLASHINFER_USE_CUDA_NORM']})")
        except Exception as e:  # noqa: BLE001
            print(f"FlashInfer not importable ({type(e).__name__}: {e}): not measured")
    copy_lib = None
    if args.copy_lib:
        copy_lib = ctypes.CDLL(os.path.abspath(args.copy_lib))
        copy_lib.hk_bench_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        print(f"same-size copy: {args.copy_lib}, {copy_lib.hk_bench_copy_configs()} configurations, fastest kept")

    def same_copy(x, cfg):
        y = torch.empty_like(x)
        rc = copy_lib.hk_bench_copy(y.data_ptr(), x.data_ptr(), x.numel() * x.element_size(), cfg,
                                    torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(f"copy config {cfg}: CUDA error {rc}")
        return y

    tri = load_triton(args.triton) if args.triton else None
    if tri is not None:
        print(f"Triton anchor {args.triton}: measured")
    comps = {}
    for k in ("recompile_limit", "cache_size_limit"):  # one function per width sees every row count
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 64)

    def compiled(h, dt, wdt):
        if not args.compile_per_hidden:
            return comp
        key = (h, dt, wdt)
        if key not in comps:
            comps[key] = torch.compile(norm_ref, dynamic=False)
        return comps[key]

    if args.only_alloc:
        args.alloc = True
    names = [m for n, _ in libs for m in ([n + "+alloc"] if args.only_alloc else [n, n + "+alloc"] if args.alloc else [n])]
    if args.pdl:
        if not all(lib.has_ex for _, lib in libs):
            print("--pdl: every build needs the _ex entry points")
            return 1
        names += [m + "+pdl" for m in names]
    cols = " | ".join(f"{n} µs | {n} %copy" for n in names)
    ccols = " same copy µs | % same copy |" if copy_lib else ""
    print(f"\n| x/w | rows x H | MB | {cols} | F.rms_norm µs | compile µs | Liger µs | triton µs | FlashInfer µs | best baseline | {names[-1]}/best |{ccols}")
    print("|" + "---|" * (9 + 2 * len(names) + (2 if copy_lib else 0)))
    rec = []
    pairs = [(torch.bfloat16, torch.bfloat16, args.grid), (torch.bfloat16, torch.float32, args.other_grid),
             (torch.float16, torch.float16, args.other_grid), (torch.float16, torch.float32, args.other_grid)]
    by_name = {v: k for k, v in NAME.items()}
    todo = [(dt, wdt, rows, h) for dt, wdt, g in pairs for rows, h in grid(g)]
    if args.wide_grid:
        todo = [(torch.bfloat16, torch.bfloat16, rows, h) for rows, h in grid("wide")] + todo
    if args.shapes:
        todo = []
        for spec in args.shapes.split(","):
            xw, rh = spec.split(":")
            todo.append((by_name[xw.split("/")[0]], by_name[xw.split("/")[1]], *map(int, rh.split("x"))))
    if True:
        for dt, wdt, rows, h in todo:
            nbytes = rows * h * 2 * 2 + h * (4 if wdt == torch.float32 else 2)
            nsets = nsets_for(nbytes)
            xs = [torch.randn(rows, h, device="cuda", dtype=dt) for _ in range(nsets)]
            ws = [(1 + 0.1 * torch.randn(h, device="cuda")).to(wdt) for _ in range(nsets)]
            wc = [w.to(dt) for w in ws]
            ys = [torch.empty_like(x) for x in xs]
            row = {"x": NAME[dt], "w": NAME[wdt], "rows": rows, "hidden": h, "MB": nbytes / 1e6}
            methods = {}
            for n, lib in libs:  # float64 check at this shape, poisoned output, before timing
                ys[0].fill_(float("nan"))
                ours(lib, ys[0], xs[0], ws[0])
                if not ok16(ys[0], ref64(xs[0], ws[0])):
                    print(f"FAIL {n} at {rows}x{h}")
                    return 1
                if not args.only_alloc:
                    methods[n] = [lambda x=x, w=w, y=y, lib=lib: ours(lib, y, x, w) for x, w, y in zip(xs, ws, ys)]
                if args.alloc:  # like the baselines: a fresh output from torch's allocator per call
                    methods[n + "+alloc"] = [lambda x=x, w=w, lib=lib: ours(lib, torch.empty_like(x), x, w) for x, w in zip(xs, ws)]
                if args.pdl:
                    if not args.only_alloc:
                        methods[n + "+pdl"] = [lambda x=x, w=w, y=y, lib=lib: ours_ex(lib, y, x, w, PDL)
                                               for x, w, y in zip(xs, ws, ys)]
                    if args.alloc:
                        methods[n + "+alloc+pdl"] = [lambda x=x, w=w, lib=lib: ours_ex(lib, torch.empty_like(x), x, w, PDL)
                                                     for x, w in zip(xs, ws)]
            methods["F.rms_norm"] = [lambda x=x, w=w: F.rms_norm(x, (h,), w, EPS) for x, w in zip(xs, wc)]
            if not args.no_compile:
                cf = compiled(h, dt, wdt)
                if args.compile_per_hidden and rows > 1:  # a size-1 dim is always specialised
                    for x in xs:
                        torch._dynamo.mark_dynamic(x, 0)
                cf(xs[0], ws[0])
                if ok16(cf(xs[0], ws[0]), ref64(xs[0], ws[0])):
                    methods["compile"] = [lambda x=x, w=w, cf=cf: cf(x, w) for x, w in zip(xs, ws)]
                else:
                    print(f"# compile off vs float64 at {NAME[dt]}/{NAME[wdt]} {rows}x{h}: not timed")
            if tri is not None:
                if ok16(tri(xs[0], wc[0], EPS), ref64(xs[0], wc[0])):
                    methods["triton"] = [lambda x=x, w=w: tri(x, w, EPS) for x, w in zip(xs, wc)]
                else:
                    print(f"# triton off vs float64 at {NAME[dt]}/{NAME[wdt]} {rows}x{h}: not timed")
            if fi_norm is not None:
                got = torch.full_like(xs[0], float("nan"))
                fi_norm(xs[0], wc[0], EPS, out=got)
                if ok16(got, ref64(xs[0], wc[0])):
                    methods["flashinfer"] = [lambda x=x, w=w: fi_norm(x, w, EPS) for x, w in zip(xs, wc)]
                else:
                    print(f"# flashinfer off vs float64 at {NAME[dt]}/{NAME[wdt]} {rows}x{h}: not timed")
            if liger_fwd is not None:
                for mode in ("llama", "gemma"):
                    got = liger_fwd(xs[0], ws[0], EPS, 0.0, mode, None)[0]
                    if ok16(got, ref64(xs[0], ws[0])):
                        methods["liger-" + mode] = [lambda x=x, w=w, mode=mode: liger_fwd(x, w, EPS, 0.0, mode, None)
                                                    for x, w in zip(xs, ws)]
                    else:
                        print(f"# liger-{mode} off vs float64 at {NAME[dt]}/{NAME[wdt]} {rows}x{h}: not timed")
            # rounds > 1: the methods again in reverse order, each method's best round kept (the
            # first method timed after a large shape was seen to pay a transient, NOTES v4)
            order = list(methods)
            for r in range(args.rounds):
                for m in (order if r % 2 == 0 else order[::-1]):
                    t = 1e3 * graph_time(methods[m])
                    row.setdefault(m + "_rounds", []).append(t)
                    row[m] = min(row.get(m, math.inf), t)
            del methods
            ctext = ""
            if copy_lib and nbytes >= 4e6:
                for c in range(copy_lib.hk_bench_copy_configs()):  # each configuration copies every byte
                    if not torch.equal(same_copy(xs[0], c), xs[0]):
                        print(f"FAIL same-size copy (configuration {c}) at {rows}x{h}")
                        return 1
                row["copy"] = min(1e3 * graph_time([lambda x=x, c=c: same_copy(x, c) for x in xs])
                                  for c in range(copy_lib.hk_bench_copy_configs()))
                ctext = f" {row['copy']:.2f} | {100 * row['copy'] / row[names[-1]]:.0f}% |"
            elif copy_lib:
                ctext = " - | - |"
            for k in ("compile", "triton", "flashinfer"):
                row.setdefault(k, math.nan)
            row["liger"] = min([row[k] for k in ("liger-llama", "liger-gemma") if k in row], default=math.nan)
            base = {k: row[k] for k in BASES if not math.isnan(row[k])}
            best = min(base, key=base.get)
            pct = " | ".join(f"{row[n]:.2f} | {100 * nbytes / (row[n] * 1e-6) / 1e9 / copy:.0f}%" for n in names)
            print(f"| {NAME[dt]}/{NAME[wdt]} | {rows}x{h} | {nbytes / 1e6:.1f} | {pct} | {row['F.rms_norm']:.2f} | "
                  f"{row['compile']:.2f} | {row['liger']:.2f} | {row['triton']:.2f} | {row['flashinfer']:.2f} | {best} | {base[best] / row[names[-1]]:.2f}x |{ctext}", flush=True)
            rec.append(row)
            del xs, ws, wc, ys
            torch.cuda.empty_cache()
    chains = {}
    if args.pdl_chain:
        for n, lib in libs[-1:]:  # the build under test
            if lib.has_ex:
                chains[n] = pdl_chain(n, lib)
                if chains[n] is None:
                    return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_GBps": copy, "rows": rec, "pdl_chain": chains}, f, indent=1)
    n = names[-1]
    sp = [min(r[k] for k in BASES if not math.isnan(r[k])) / r[n] for r in rec]
    print(f"\n{n}: vs best baseline median {statistics.median(sp):.2f}x, min {min(sp):.2f}x over {len(sp)} shapes")
    if len(names) > 1:
        ratio = [r[names[0]] / r[n] for r in rec]
        print(f"{n} vs {names[0]}: median {statistics.median(ratio):.3f}x, min {min(ratio):.3f}x, max {max(ratio):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
