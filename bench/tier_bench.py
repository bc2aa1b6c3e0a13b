#!/usr/bin/env python3
"""Tier benchmark: a cold wave of N clients (hubkern pull and huggingface_hub.snapshot_download, half
each) pulling one kernel, (a) every client straight at the origin, (b) through edge → regional →
origin pull-through mirrors (`hubkern serve --upstream`). Prints, per setup, the requests and bytes
the origin served, and the time until the last client was done. Counts come from the access logs.

    python3 bench/tier_bench.py --hubkern build/cli/hubkern [--clients 64] [--mb 50]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from faultproxy import make_variant, publish  # noqa: E402
from hk_serve_helpers import Server  # noqa: E402

V = "tvm-ffi01-cpu-x86_64-linux"


def env_for(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    e.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **kw)
    return e


def origin_totals(srv):
    n = b = 0
    for line in srv.log_lines:
        m = re.search(r'access \S+ "(?:GET|HEAD|POST) \S+" \d+ (\d+)', line)
        if m:
            n += 1
            b += int(m.group(1))
    return n, b


def wave(hubkern, url, n, work):
    os.makedirs(work)
    t0 = time.monotonic()
    procs = [subprocess.Popen([hubkern, "pull", "bench/tierkern", "--version", "1", "--variant", V, "--endpoint", url,
                               "--cache", os.path.join(work, f"hk{i}")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env_for()) for i in range(n // 2)]
    procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "..", "tests", "integration",
                                                                "upstream_clients.py"), "hf", str(n - n // 2),
                                   "bench/tierkern", work], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env_for(HF_ENDPOINT=url)))
    bad = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        bad += p.returncode != 0 or (b'"errors": []' not in out if isinstance(out, bytes) and out else False)
    return time.monotonic() - t0, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hubkern", default=os.environ.get("HUBKERN_BIN", "build/cli/hubkern"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--mb", type=int, default=50)
    a = ap.parse_args()
    os.environ["HUBKERN_BIN"] = os.path.abspath(a.hubkern)
    base = tempfile.mkdtemp(prefix="tierbench")
    files = {"__init__.py": b"x = 1\n"}
    for i in range(8):
        files[f"lib{i}.bin"] = os.urandom(a.mb * 1_000_000 // 8)
    make_variant(os.path.join(base, "src"), V, files)
    store = os.path.join(base, "origin")
    os.makedirs(store)
    publish(os.path.join(base, "src"), "bench/tierkern", "v1", store)
    many = ("--max-connections-per-ip", "4096", "--max-connections", "8192")
    print(f"{a.clients} clients, {len(files) + 1} files, {a.mb} MB; loopback")
    print(f"{'setup':<28} {'origin reqs':>12} {'origin MB':>10} {'last done s':>12} {'failed':>7}")
    with Server(store, "--trust", "bench", "--access-log", *many) as o:
        dt, bad = wave(a.hubkern, o.url, a.clients, os.path.join(base, "direct"))
        n, b = origin_totals(o)
        print(f"{'direct to origin':<28} {n:>12} {b / 1e6:>10.1f} {dt:>12.2f} {bad:>7}")
    with Server(store, "--trust", "bench", "--access-log", *many) as o:
        os.makedirs(os.path.join(base, "reg"))
        os.makedirs(os.path.join(base, "edge"))
        with Server(os.path.join(base, "reg"), "--upstream", o.url, *many) as r, \
                Server(os.path.join(base, "edge"), "--upstream", r.url, *many) as e:
            dt, bad = wave(a.hubkern, e.url, a.clients, os.path.join(base, "tier"))
        n, b = origin_totals(o)
        print(f"{'edge -> regional -> origin':<28} {n:>12} {b / 1e6:>10.1f} {dt:>12.2f} {bad:>7}")


if __name__ == "__main__":
    main()
