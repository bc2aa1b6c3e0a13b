#!/usr/bin/env python3
"""CPU while waiting on a slow link (issue 25): a variant of F files (default 40 x 100 kB, plus
__init__.py and metadata.json: 42) served by `hubkern serve` behind the fault proxy of
tests/integration, which drips every /resolve/ body at --kbps kB/s per connection (16 kB steps).
Each hubkern binary pulls it into a fresh cache with 8 parallel transfers; curl (`curl -Z
--parallel-max 8`) fetches the same 42 URLs through the same proxy to files: the limit. CPU is
user+sys of the client process (rusage of the child); the proxy's own CPU is not counted.
Interleaved: each rep runs every client once, in order.

    python3 bench/slow_link_bench.py --bin base=/tmp/hubkern-base --bin new=build/cli/hubkern [--reps 2] [--kbps 128]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from faultproxy import FaultProxy, Rule  # noqa: E402

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "bench/slowkern"


def make_kernel(src, nfiles, size):
    vdir = os.path.join(src, "build", V)
    os.makedirs(vdir)
    files = {}
    for i in range(nfiles):
        body = os.urandom(size)
        with open(os.path.join(vdir, f"lib{i:02d}.bin"), "wb") as fh:
            fh.write(body)
        files[f"lib{i:02d}.bin"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    with open(os.path.join(vdir, "__init__.py"), "w") as fh:
        fh.write("#\n")
    files["__init__.py"] = base64.b64encode(hashlib.sha256(b"#\n").digest()).decode()
    meta = {"name": "slowkern", "id": "_slowkern_cpu_0000000", "version": 1, "license": "MIT", "python-depends": [],
            "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256", "files": files}}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)
    return sorted(files) + ["metadata.json"]


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed: {err}")
    return ru.ru_utime + ru.ru_stime, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--kbps", type=int, default=128, help="per-connection rate of the proxy, kB/s")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    work = tempfile.mkdtemp(prefix="hk-slow-bench-")
    res = {name: [] for name, _ in bins + [("curl", None)]}
    try:
        src, store = os.path.join(work, "src"), os.path.join(work, "store")
        names = make_kernel(src, a.files, a.size)
        subprocess.run([bins[-1][1], "publish", src, REPO, "--branch", "v1", "--cache", store], check=True,
                       capture_output=True)
        srv = subprocess.Popen([bins[-1][1], "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                                "--trust", "bench", "--threads", "4"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        url = srv.stdout.readline().split("listening on ")[1].strip().rstrip("/")
        step = 16384
        rule = Rule("drip", r"/resolve/", count=None, chunk=step, rate=a.kbps * 1000)
        try:
            with FaultProxy(url, rules=[rule]) as px:
                for rep in range(a.reps):
                    for name, b in bins:
                        cache = os.path.join(work, f"cache-{name}-{rep}")
                        res[name].append(timed([b, "pull", REPO, "--version", "1", "--variant", V, "-q",
                                                "--progress=none", "--json", "--endpoint", px.url, "--cache", cache]))
                        shutil.rmtree(cache)
                    out = os.path.join(work, "curl")
                    os.makedirs(out)
                    cmd = ["curl", "-sSf", "-Z", "--parallel-max", "8"]
                    for i, n in enumerate(names):
                        cmd += ["-o", os.path.join(out, f"{i}"), f"{px.url}/kernels/{REPO}/resolve/v1/build/{V}/{n}"]
                    res["curl"].append(timed(cmd))
                    shutil.rmtree(out)
        finally:
            srv.terminate()
            srv.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = a.files * a.size
    print(f"{len(names)} files, {total / 1e6:.1f} MB, proxy drips {a.kbps} kB/s per connection, 8 parallel; "
          f"median of {a.reps}")
    print(f"{'client':<8}{'CPU s':>8}{'wall s':>8}{'CPU / curl':>12}")
    cc = statistics.median(c for c, _ in res["curl"])
    for name, v in res.items():
        c = statistics.median(x for x, _ in v)
        w = statistics.median(y for _, y in v)
        print(f"{name:<8}{c:>8.3f}{w:>8.2f}{c / cc:>11.1f}x")


if __name__ == "__main__":
    main()
