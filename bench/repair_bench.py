#!/usr/bin/env python3
"""Recovering from one flipped byte (issue 24 item 4), and what the new checks cost a warm pull.

A variant of one 64 MB blob plus 20 small files is served by `hubkern serve` behind the counting
proxy of tests/integration (faultproxy.py, no faults), so the body bytes each client fetched are
measured on the wire. For each binary, per rep, in a fresh cache:
  warm      pull, then time a second pull (nothing to fetch; the variant is intact)
  damaged   flip one byte of a small file's blob, then time `pull` (base: fails HK_ERR_DIGEST)
  rm+pull   the only fix base had: `cache rm` of the repo, then pull again (timed together)
Interleaved: each rep runs every binary once, in order. Median wall over the reps.

    python3 bench/repair_bench.py --bin base=/work/main/build/cli/hubkern --bin new=build/cli/hubkern [--reps 3]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from faultproxy import FaultProxy, Server, make_variant, publish  # noqa: E402

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "bench/repairkern"
FOLDER = "kernels--bench--repairkern"


def hk(binary, args, ok=True):
    env = dict(os.environ, HF_HUB_DISABLE_IMPLICIT_TOKEN="1")
    env.pop("HF_HUB_OFFLINE", None)
    t = time.perf_counter()
    r = subprocess.run([binary, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    if ok and r.returncode != 0:
        sys.exit(f"{binary} {' '.join(args)} failed: {r.stderr}")
    return r, wall


def pull(binary, url, cache, ok=True):
    return hk(binary, ["pull", REPO, "--version", "1", "--variant", V, "--endpoint", url, "--cache", cache, "-q"], ok)


def flip(path):
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:
        b = fh.read(1)
        fh.seek(0)
        fh.write(bytes([b[0] ^ 0x55]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    work = tempfile.mkdtemp(prefix="repair-bench-")
    try:
        src, store = os.path.join(work, "src"), os.path.join(work, "store")
        small = {f"py/m{i:02d}.py": os.urandom(2000) for i in range(20)}
        make_variant(src, V, {"__init__.py": b"#\n", "big.bin": os.urandom(64_000_000), **small})
        publish(src, REPO, "v1", store, ["--lfs-threshold", "1000000"])
        res = {(n, s): [] for n, _ in bins for s in ("warm", "damaged", "rm+pull")}
        with Server(store, ["--trust", "bench"]) as srv, FaultProxy(srv.url) as px:
            for rep in range(a.reps):
                for name, binary in bins:
                    cache = os.path.join(work, f"c-{name}-{rep}")
                    pull(binary, px.url, cache)
                    before = px.sent("GET")
                    _, wall = pull(binary, px.url, cache)
                    res[(name, "warm")].append((wall, px.sent("GET") - before, "ok"))
                    snap = os.path.join(cache, FOLDER, "snapshots")
                    (commit,) = os.listdir(snap)
                    flip(os.path.realpath(os.path.join(snap, commit, "build", V, "py", "m00.py")))  # a small file's blob
                    before = px.sent("GET")
                    r, wall = pull(binary, px.url, cache, ok=False)
                    outcome = "ok" if r.returncode == 0 else ("HK_ERR_DIGEST" if "HK_ERR_DIGEST" in r.stderr
                                                              else f"exit {r.returncode}")
                    res[(name, "damaged")].append((wall, px.sent("GET") - before, outcome))
                    before = px.sent("GET")
                    rm = ["cache", "rm", REPO, "--cache", cache]
                    _, w1 = hk(binary, rm + (["-y"] if "-y" in hk(binary, ["cache", "--help"])[0].stdout else []))
                    _, w2 = pull(binary, px.url, cache)
                    res[(name, "rm+pull")].append((w1 + w2, px.sent("GET") - before, "ok"))
                    shutil.rmtree(cache)
        print(f"| scenario | client | wall s (median of {a.reps}) | body bytes fetched | outcome |")
        print("|---|---|---:|---:|---|")
        for s in ("warm", "damaged", "rm+pull"):
            for name, _ in bins:
                runs = res[(name, s)]
                outs = sorted({o for _, _, o in runs})
                print(f"| {s} | {name} | {statistics.median(w for w, _, _ in runs):.3f} | "
                      f"{int(statistics.median(b for _, b, _ in runs)):,} | {', '.join(outs)} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
