#!/usr/bin/env python3
"""A burst of clients on a cold pull-through edge (issue 25). The origin is `hubkern serve` on
loopback over a store holding a published kernel repo (N small files, a few larger ones); the edge
is a fresh `hubkern serve --upstream ORIGIN` over an empty store. K client processes start at the
same instant (a shared start time), each doing what `hubkern pull` does on the wire: the refs, the
commit's tree, then every file over P keep-alive connections. Per binary and K: per-file latency
p50/p99 (client side, ms), the same burst on a warm edge (the clients' own cost), the burst's wall
time, the requests the origin saw, the edge's CPU time and context switches (wait4, all edges), and
whether every file of every client had the right sha256. Each binary serves both tiers; rows of the
binaries alternate within one run so that load is shared.

    python3 bench/edge_burst_bench.py --bin base=../h-edge-base/build/cli/hubkern --bin new=build/cli/hubkern \
        [--ks 1,10,50,100] [--small 12] [--big 2] [--conns 8] [--reps 3] [--edges 1]
"""
import argparse
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from faultproxy import make_variant  # noqa: E402

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "bench/edge"


def serve(binary, store, *extra):
    p = subprocess.Popen([binary, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0", "--trust", "bench",
                          "--access-log", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    if not m:
        p.kill()
        raise RuntimeError(f"serve did not start: {line!r} {p.stderr.read()}")
    lines = []
    t = threading.Thread(target=lambda: [lines.append(x) for x in p.stderr], daemon=True)
    t.start()
    return p, m.group(1).rstrip("/"), lines, t


def stop(p, t):
    """Stop a server; its CPU seconds (all threads, from wait4) and context switches."""
    p.terminate()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    t.join(timeout=20)
    return ru.ru_utime + ru.ru_stime, ru.ru_nvcsw + ru.ru_nivcsw


def get(c, path):
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()


def client(host, port, start_at, conns, want, out):
    """One client: refs, tree, then the files over `conns` connections. Puts (latencies, bad)."""
    while time.time() < start_at:
        time.sleep(max(0.0, min(0.01, start_at - time.time())))
    lat, bad = [], []
    c0 = http.client.HTTPConnection(host, port, timeout=120)
    st, body = get(c0, f"/api/kernels/{REPO}/refs")
    commit = json.loads(body)["branches"][0]["targetCommit"] if st == 200 else None
    st2, body2 = get(c0, f"/api/kernels/{REPO}/tree/{commit}/build/{V}") if commit else (0, b"")
    paths = [e["path"] for e in json.loads(body2) if e.get("type") == "file"] if st2 == 200 else []
    if st != 200 or st2 != 200 or sorted(paths) != sorted(want):
        out.put(([], [f"refs {st} tree {st2} files {len(paths)}"]))
        return
    q = queue.Queue()
    for p in paths:
        q.put(p)
    lock = threading.Lock()

    def worker(c):
        while True:
            try:
                p = q.get_nowait()
            except queue.Empty:
                return
            t = time.perf_counter()
            try:
                s, b = get(c, f"/kernels/{REPO}/resolve/{commit}/{p}")
            except OSError as e:
                s, b = str(e), b""
            dt = time.perf_counter() - t
            with lock:
                lat.append(dt)
                if s != 200 or hashlib.sha256(b).hexdigest() != want[p]:
                    bad.append(f"{p}: {s}")

    cs = [c0] + [http.client.HTTPConnection(host, port, timeout=120) for _ in range(conns - 1)]
    ts = [threading.Thread(target=worker, args=(c,)) for c in cs]
    [t.start() for t in ts]
    [t.join() for t in ts]
    out.put((lat, bad))


def pct(v, q):
    return v[min(len(v) - 1, int(len(v) * q))] * 1e3 if v else float("nan")


def run_clients(addrs, k, conns, want):
    """k clients at once, client i on edge i % len(addrs)."""
    out = mp.Queue()
    start_at = time.time() + 0.5 + k * 0.01  # every process started and waiting by then
    procs = [mp.Process(target=client, args=(*addrs[i % len(addrs)], start_at, conns, want, out)) for i in range(k)]
    [p.start() for p in procs]
    res = [out.get(timeout=300) for _ in procs]
    wall = time.time() - start_at
    [p.join() for p in procs]
    lat = sorted(x for r, _ in res for x in r)
    bad = [b for _, bb in res for b in bb]
    return {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "wall": wall * 1e3, "bad": len(bad), "first_bad": bad[:3]}


def med(rows, key):
    v = sorted(r[key] for r in rows)
    return v[len(v) // 2]


def start_edges(binary, store, upstream, n):
    edges = [serve(binary, store, "--upstream", upstream) for _ in range(n)]
    addrs = []
    for _, url, _, _ in edges:
        host, port = url.split("//")[1].rsplit(":", 1)
        addrs.append((host, int(port)))
    return edges, addrs


def burst(binary, origin_store, k, conns, want, work, n_edges):
    edge_store = tempfile.mkdtemp(dir=work)
    op, ourl, olines, ot = serve(binary, origin_store)
    edges, addrs = start_edges(binary, edge_store, ourl, n_edges)
    cold = run_clients(addrs, k, conns, want)
    used = [stop(ep, et) for ep, _, _, et in edges]
    ecpu, ecsw = sum(u[0] for u in used), sum(u[1] for u in used)
    time.sleep(0.3)  # the origin's last access lines
    origin_reqs = sum(1 for line in olines if " access " in line)
    # the same burst on fresh edges over the store the cold ones filled: what the clients and the
    # machine cost by themselves (every file a hit)
    edges, addrs = start_edges(binary, edge_store, ourl, n_edges)
    warm = run_clients(addrs, k, conns, want)
    for ep, _, _, et in edges:
        stop(ep, et)
    stop(op, ot)
    shutil.rmtree(edge_store, ignore_errors=True)
    return dict(cold, origin=origin_reqs, cpu=ecpu * 1e3, csw=ecsw, warm_p50=warm["p50"],
                bad=cold["bad"] + warm["bad"], first_bad=cold["first_bad"] + warm["first_bad"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable)")
    ap.add_argument("--ks", default="1,10,50,100")
    ap.add_argument("--small", type=int, default=12, help="small files (a few hundred bytes each)")
    ap.add_argument("--big", type=int, default=2, help="larger files (400 kB each)")
    ap.add_argument("--conns", type=int, default=8, help="connections per client (hubkern pull's default: 8)")
    ap.add_argument("--reps", type=int, default=3, help="bursts per binary and K (the median row is printed)")
    ap.add_argument("--edges", type=int, default=1,
                    help="edge processes over one store (client i on edge i %% N: they meet at the store's locks)")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    work = tempfile.mkdtemp(prefix="edge-burst-")
    try:
        files = {f"f{i:03d}.py": (b"# small file %d\n" % i) * 20 for i in range(a.small)}
        for i in range(a.big):
            files[f"big{i}.bin"] = os.urandom(400_000)
        src = os.path.join(work, "src")
        vdir = make_variant(src, V, files)
        want = {}
        for name in os.listdir(vdir):
            with open(os.path.join(vdir, name), "rb") as fh:
                want[f"build/{V}/{name}"] = hashlib.sha256(fh.read()).hexdigest()
        store = os.path.join(work, "origin")
        os.mkdir(store)
        subprocess.run([bins[-1][1], "publish", src, REPO, "--branch", "v1", "--cache", store, "--lfs-threshold",
                        "100000"], check=True, capture_output=True)
        print(f"{len(want)} files per client ({a.small} small, {a.big} x 400 kB, metadata.json), {a.conns} connections "
              f"per client, {a.edges} edge process(es) over one store, median of {a.reps} bursts; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print("| binary | K | file p50 ms | file p99 ms | warm p50 ms | wall ms | origin requests | edge CPU ms | "
              "edge ctx switches | bad files |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for k in [int(x) for x in a.ks.split(",")]:
            rows = {name: [] for name, _ in bins}
            for _ in range(a.reps):
                for name, path in bins:  # alternate: both see the same load
                    rows[name].append(burst(path, store, k, a.conns, want, work, a.edges))
            for name, _ in bins:
                rs = sorted(rows[name], key=lambda r: r["wall"])
                r = rs[len(rs) // 2]
                bad = sum(x["bad"] for x in rs)
                print(f"| {name} | {k} | {r['p50']:.1f} | {r['p99']:.1f} | {r['warm_p50']:.1f} | {r['wall']:.0f} | "
                      f"{'/'.join(str(x['origin']) for x in rs)} | {med(rs, 'cpu'):.0f} | {med(rs, 'csw'):.0f} | {bad} |", flush=True)
                for x in rs:
                    if x["first_bad"]:
                        print(f"  {name} K={k}: {x['first_bad']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
