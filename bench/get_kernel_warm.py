#!/usr/bin/env python3
"""Warm get_kernel latency: hubkern's hk_get_kernel (C) vs Python kernels.get_kernel, on the same
cache, offline, for the RMSNorm CPU tvm-ffi variant.

Setup: publish kernels/rmsnorm's staged Hub variant to a temporary store, serve it on loopback,
pull it into a temporary cache with `hubkern pull`, stop the server. Then, both offline
(HF_HUB_OFFLINE=1) on that cache:
  C:      bench/get_kernel_warm.c, compiled here against the build's libhubkern.so: one cold call,
          then N warm hk_get_kernel calls (each resolves refs/v1, lists the variants, resolves for
          the machine and finds the loaded handle);
  Python: kernels.get_kernel once, then N warm calls (kernels caches the imported module).
Prints a table (median, p90, min per call; ratio) and writes bench/results/get_kernel_warm.md.

usage: bench/get_kernel_warm.py [--build BUILD_DIR] [-n N]
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    os.environ["HUBKERN_BIN"] = str(build / "cli" / "hubkern")
    from hk_serve_helpers import Server, publish, run_hubkern

    hub_src = build / "kernels" / "rmsnorm" / "hub"
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hk-bench-"))
    store, cache = tmp / "store", tmp / "cache"
    publish(hub_src, "hubkern/rmsnorm", "v1", store)
    srv = Server(store, "--trust", "hubkern")
    try:
        run_hubkern("pull", "hubkern/rmsnorm", "--version", "1", "--backend", "cpu", "--endpoint", srv.url,
                    "--cache", cache)
    finally:
        srv.stop()

    driver = tmp / "get_kernel_warm"
    subprocess.run(["cc", "-O2", "-o", str(driver), str(ROOT / "bench" / "get_kernel_warm.c"),
                    "-I", str(ROOT / "libhub" / "include"), "-L", str(build / "libhub"), "-lhubkern",
                    f"-Wl,-rpath,{build / 'libhub'}"], check=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS="1")
    env.pop("LOCAL_KERNELS", None)
    c = json.loads(subprocess.run([str(driver), "hubkern/rmsnorm", "1", str(cache), str(args.n), "cpu"],
                                  capture_output=True, text=True, check=True, env=env).stdout)

    py_script = f"""
import json, time, warnings, logging
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import kernels
m = kernels.get_kernel("hubkern/rmsnorm", version=1, backend="cpu")
cold = (time.perf_counter() - t0) * 1e6
ts = []
for _ in range({args.n}):
    s = time.perf_counter()
    m2 = kernels.get_kernel("hubkern/rmsnorm", version=1, backend="cpu")
    ts.append((time.perf_counter() - s) * 1e6)
    assert m2 is m
ts.sort()
print(json.dumps(dict(cold_us=cold, median_us=ts[len(ts)//2], p90_us=ts[len(ts)*9//10], min_us=ts[0], n=len(ts))))
"""
    py = json.loads(subprocess.run([sys.executable, "-c", py_script], capture_output=True, text=True, check=True,
                                   env=env).stdout.strip().splitlines()[-1])

    ratio = py["median_us"] / c["median_us"]
    rows = [("hubkern hk_get_kernel (C)", c), ("kernels.get_kernel (Python)", py)]
    lines = [
        f"Warm get_kernel, offline, same cache, RMSNorm {c['variant']}, N={args.n} calls "
        f"({platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')})",
        "",
        "| client | first call in process | median | p90 | min |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        lines.append(f"| {name} | {r['cold_us'] / 1000:.1f} ms | {r['median_us']:.1f} µs | {r['p90_us']:.1f} µs | "
                     f"{r['min_us']:.1f} µs |")
    lines += ["", f"Median ratio Python / C: {ratio:.1f}x. Target for hubkern: median < 1 ms: "
              f"{'met' if c['median_us'] < 1000 else 'NOT met'}.",
              "",
              "The first call includes machine detection (hubkern runs one short Python interpreter call to "
              "find site-packages; Python imports kernels) and loading libtvm_ffi + the kernel library.",
              "", "Reproduce: `python3 bench/get_kernel_warm.py --build build`"]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench" / "results" / "get_kernel_warm.md"
    out.write_text(text + "\n")


if __name__ == "__main__":
    main()
