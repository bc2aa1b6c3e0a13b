#!/usr/bin/env python3
"""256 clients behind one proxy (issue 25): every connection comes from one address. Opens C
simultaneous keep-alive connections from 127.0.0.1 to `hubkern serve` (default flags), sends one
GET of the refs on each, then a second one on each (keep-alive), and counts the answers and the
connections the server closed instead. One row per hubkern binary, in the same run.

    python3 bench/per_ip_bench.py --bin base=../h-perf-base/build/cli/hubkern --bin new=build/cli/hubkern [--conns 256]
"""
import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time

REPO = "bench/perip"


def get(s, host):
    s.sendall(f"GET /api/kernels/{REPO}/refs HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            return False
        body += chunk
    return head.startswith(b"HTTP/1.1 200")


def run(binary, store, conns):
    srv = subprocess.Popen([binary, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0", "--trust", "bench",
                            "--threads", "4"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = srv.stdout.readline().split("listening on ")[1].strip().rstrip("/")
    host = url.split("//")[1]
    h, p = host.rsplit(":", 1)
    ok = failed = 0
    socks = []
    try:
        for _ in range(conns):
            s = socket.create_connection((h, int(p)), timeout=5)
            socks.append(s)
        time.sleep(0.2)
        for rnd in range(2):
            for i, s in enumerate(socks):
                if s is None:
                    continue
                try:
                    good = get(s, host)
                except OSError:
                    good = False
                if good:
                    ok += 1
                else:
                    failed += 1
                    s.close()
                    socks[i] = None
    finally:
        for s in socks:
            if s:
                s.close()
        srv.terminate()
        srv.wait()
    return ok, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--conns", type=int, default=256)
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    work = tempfile.mkdtemp(prefix="hk-perip-")
    try:
        src, store = os.path.join(work, "src"), os.path.join(work, "store")
        os.makedirs(os.path.join(src, "build", "torch-cpu"))
        with open(os.path.join(src, "build", "torch-cpu", "__init__.py"), "w") as fh:
            fh.write("#\n")
        subprocess.run([bins[-1][1], "publish", src, REPO, "--branch", "v1", "--cache", store], check=True,
                       capture_output=True)
        print(f"{a.conns} simultaneous keep-alive connections from 127.0.0.1, 2 requests each; default serve flags")
        print(f"{'binary':<8}{'answered':>10}{'refused/closed':>16}")
        for name, b in bins:
            ok, failed = run(b, store, a.conns)
            print(f"{name:<8}{ok:>10}{failed:>16}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
