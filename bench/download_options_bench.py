#!/usr/bin/env python3
"""hf download's options in `hubkern download` (issue 24): --dry-run, --include and --local-dir,
timed against huggingface_hub's own `hf download` with the same options on the same mirror, and
against a hubkern without them (`base`: a full download is all it can do).

A kernel of one 32 MB blob and 20 small files is served by `hubkern serve` behind the counting
proxy of tests/integration (faultproxy.py, no faults), so "body bytes" is what crossed the wire.
Per rep, each client in a fresh cache (and local folder):
  dry-run       list what a download would fetch (nothing cached)
  include *.py  fetch only the 20 small files (base: the whole variant)
  local-dir     fetch into a local folder, cold
  local-dir 2   the same again: everything is there
Interleaved: each rep runs every client once. Median wall over the reps.

    python3 bench/download_options_bench.py --base /work/main/build/cli/hubkern --new build/cli/hubkern [--reps 3]
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
REPO = "bench/dlopts"


def run(cmd, env):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="a hubkern without the options (main)")
    ap.add_argument("--new", required=True, help="this branch's hubkern")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dlopts-bench-")
    hf = shutil.which("hf")
    try:
        src, store = os.path.join(work, "src"), os.path.join(work, "store")
        small = {f"py/m{i:02d}.py": os.urandom(2000) for i in range(20)}
        make_variant(src, V, {"big.so": os.urandom(32_000_000), **small})
        publish(src, REPO, "v1", store, ["--lfs-threshold", "1000000"])
        res = {}
        with Server(store, ["--trust", "bench"]) as srv, FaultProxy(srv.url) as px:
            base_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
            base_env.update(HF_ENDPOINT=px.url, HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_XET="1",
                            HF_HUB_DISABLE_IMPLICIT_TOKEN="1")
            lock = os.path.join(work, "kernels.lock")
            run([a.new, "lock", f"{REPO}=1", "-o", lock], dict(base_env, HF_HUB_CACHE=os.path.join(work, "lc")))

            def clients(cache, ld, scenario):
                hk_dl = ["download", "--lock", lock, "--all-variants", "-q"]
                hf_dl = [hf, "download", REPO, "--repo-type", "kernel", "--revision", "v1"]
                if scenario == "dry-run":
                    return {"new": [a.new, *hk_dl, "--dry-run"], "hf": [*hf_dl, "--dry-run", "--cache-dir", cache]}
                if scenario == "include *.py":
                    return {"base": [a.base, *hk_dl], "new": [a.new, *hk_dl, "--include", "*.py"],
                            "hf": [*hf_dl, "--include", "*.py", "--cache-dir", cache]}
                return {"new": [a.new, *hk_dl, "--local-dir", ld], "hf": [*hf_dl, "--local-dir", ld]}

            scenarios = ("dry-run", "include *.py", "local-dir", "local-dir 2")
            for rep in range(a.reps):
                for name in ("base", "new", "hf"):
                    cache, ld = os.path.join(work, f"c-{name}-{rep}"), os.path.join(work, f"ld-{name}-{rep}")
                    env = dict(base_env, HF_HUB_CACHE=cache, HF_HOME=os.path.join(work, f"h-{name}-{rep}"))
                    for s in scenarios:
                        cmd = clients(cache, ld, s.replace(" 2", "")).get(name)
                        if not cmd:
                            continue
                        before = px.sent("GET")
                        wall = run(cmd, env)
                        res.setdefault((s, name), []).append((wall, px.sent("GET") - before))
                        if s == "include *.py":
                            shutil.rmtree(cache, ignore_errors=True)  # the local-dir runs start cold
                    shutil.rmtree(cache, ignore_errors=True)
                    shutil.rmtree(ld, ignore_errors=True)
        print(f"| scenario | client | wall s (median of {a.reps}) | body bytes fetched |")
        print("|---|---|---:|---:|")
        for s in scenarios:
            for name in ("base", "new", "hf"):
                runs = res.get((s, name))
                if runs:
                    print(f"| {s} | {name} | {statistics.median(w for w, _ in runs):.3f} | "
                          f"{int(statistics.median(b for _, b in runs)):,} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
