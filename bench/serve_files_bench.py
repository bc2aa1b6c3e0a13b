#!/usr/bin/env python3
"""Small-file requests to the mirror: hubkern binaries vs nginx on the same store (issue 25, item 2).

A repo of --files 24-byte files (git-stored: snapshot links into blobs/) is published; every
--bin NAME=PATH runs `hubkern serve --threads 4`, and nginx serves the same snapshot folder at the
same URL paths (alias; it follows the links). Two measures, in one run:

- syscalls per request: `strace -c -f` attached to the server while one keep-alive client makes
  --probe requests (the count, not the time, is what realpath() inflated);
- requests/s at C keep-alive connections (--conns 1,16,64): C Python client threads, each
  GETting random files for --secs seconds. On this 2-core VM the Python clients are the limit at
  high C (the figures are a floor on the servers, compared within the run).

    python3 bench/serve_files_bench.py --bin base=/tmp/hubkern-base --bin new=build/cli/hubkern
"""
import argparse
import http.client
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = "bench/small"


def start_hubkern(binary, store):
    p = subprocess.Popen([binary, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0", "--threads", "4"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().split("listening on ")[1].strip().rstrip("/")
    return p, int(url.rsplit(":", 1)[1])


def start_nginx(work, snapshots):
    conf = os.path.join(work, "nginx.conf")
    port = 18000 + random.randrange(1000)
    with open(conf, "w") as fh:
        fh.write(f"""worker_processes 2; daemon off; pid {work}/nginx.pid; error_log {work}/nginx.err;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000;
  client_body_temp_path {work}/nb; proxy_temp_path {work}/np; fastcgi_temp_path {work}/nf;
  uwsgi_temp_path {work}/nu; scgi_temp_path {work}/ns;
  server {{ listen 127.0.0.1:{port}; location /kernels/{REPO}/resolve/ {{ alias {snapshots}/; }} }} }}
""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, port


def load(port, paths, conns, secs):
    counts, errors = [0] * conns, [0] * conns
    stop = time.monotonic() + secs

    def client(i):
        rng = random.Random(i)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.monotonic() < stop:
            try:
                c.request("GET", rng.choice(paths))
                r = c.getresponse()
                r.read()
                if r.status == 200:
                    counts[i] += 1
                else:
                    errors[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.close()

    ts = [threading.Thread(target=client, args=(i,)) for i in range(conns)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - t0), sum(errors)


def syscalls_per_request(pid, port, paths, n):
    out = tempfile.mktemp()
    s = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(n):
        c.request("GET", paths[i % len(paths)])
        c.getresponse().read()
    c.close()
    time.sleep(0.3)
    s.terminate()
    s.wait()
    text = open(out).read()
    os.unlink(out)
    total = [ln.split() for ln in text.splitlines() if ln.strip().endswith("total")]
    return int(total[-1][3]) / n  # % time, seconds, usecs/call, calls, [errors], "total"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--conns", default="1,16,64")
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--probe", type=int, default=500)
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    work = tempfile.mkdtemp(prefix="hk-files-bench-")
    os.chmod(work, 0o755)  # nginx's workers run as another user: they must reach the store
    procs = []
    try:
        src = os.path.join(work, "src")
        os.makedirs(os.path.join(src, "build"))
        for i in range(a.files):
            with open(os.path.join(src, "build", f"f{i:04d}.txt"), "wb") as fh:
                fh.write(os.urandom(12).hex().encode())  # 24 bytes
        store = os.path.join(work, "store")
        commit = subprocess.run([bins[-1][1], "publish", src, REPO, "--branch", "v1", "--cache", store],
                                check=True, capture_output=True, text=True).stdout.strip()
        paths = [f"/kernels/{REPO}/resolve/{commit}/build/f{i:04d}.txt" for i in range(a.files)]
        servers = []
        for name, b in bins:
            p, port = start_hubkern(b, store)
            procs.append(p)
            servers.append((name, p, port))
        p, port = start_nginx(work, os.path.join(store, "kernels--bench--small", "snapshots"))
        procs.append(p)
        servers.append(("nginx", p, port))
        conns = [int(x) for x in a.conns.split(",")]
        rows = {name: {} for name, _, _ in servers}
        have_strace = shutil.which("strace") is not None
        for name, p, port in servers:
            if name == "nginx":  # its workers are children of the master: -p of the master misses them
                rows[name]["sys"] = None
            elif have_strace:
                rows[name]["sys"] = syscalls_per_request(p.pid, port, paths, a.probe)
        for c in conns:  # interleaved: each concurrency runs every server in turn
            for name, p, port in servers:
                rows[name][c] = load(port, paths, c, a.secs)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.files} files of 24 bytes, GET /resolve/<commit>/build/<file>, keep-alive Python clients, "
          f"{a.secs:g} s per cell")
    print("| server | syscalls / request | " + " | ".join(f"req/s @{c}" for c in conns) + " | errors |")
    print("|---|---:|" + "---:|" * len(conns) + "---:|")
    for name, r in rows.items():
        sysc = f"{r['sys']:.1f}" if r.get("sys") is not None else "-"
        errs = sum(r[c][1] for c in conns)
        print(f"| {name} | {sysc} | " + " | ".join(f"{r[c][0]:.0f}" for c in conns) + f" | {errs} |")


if __name__ == "__main__":
    sys.exit(main())
