#!/usr/bin/env python3
"""Syscalls per keep-alive request of `hubkern serve` (issue 25), main vs a branch in one run.

A small store is published (bench/load: 20 git-stored 24-byte files under build/, branch main);
each server runs under `strace -f -c`, one keep-alive connection sends --n requests per endpoint
(small files by commit, a small file by branch name, the build/ listing, refs), and the syscall
count of the whole run minus an idle run of the same server is divided by the requests.

    python3 bench/mirror_syscalls.py --bin build/cli/hubkern --base <main's hubkern>
"""
import argparse
import http.client
import os
import re
import socket
import subprocess
import tempfile
import time

REPO = "bench/load"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_server(binary, store, paths, n):
    """Total syscalls of a server answering n requests for each of paths (0: idle run)."""
    port = free_port()
    out = tempfile.mktemp(prefix="hk-strace-")
    p = subprocess.Popen(["strace", "-f", "-c", "-o", out, binary, "serve", "--cache", store, "--host",
                          "127.0.0.1", "--port", str(port), "--threads", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for path in paths:
        for _ in range(n):
            c.request("GET", path(_))
            r = c.getresponse()
            r.read()
            assert r.status == 200, (path(0), r.status)
    c.close()
    # the server itself is stopped (strace, signalled, would only detach and leave it running)
    kid = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    for k in kid:
        os.kill(int(k), 15)
    p.wait(timeout=30)
    text = open(out).read()
    os.unlink(out)
    m = re.search(r"^\s*100\.00\s+\S+\s+\S+\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/cli/hubkern")
    ap.add_argument("--base")
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hk-mirror-sys-")
    src = os.path.join(work, "src")
    os.makedirs(os.path.join(src, "build"))
    for i in range(20):
        with open(os.path.join(src, "build", f"f{i:02d}.txt"), "wb") as fh:
            fh.write(os.urandom(12).hex().encode())
    store = os.path.join(work, "store")
    binary = os.path.abspath(a.bin)
    commit = subprocess.run([binary, "publish", src, REPO, "--branch", "main", "--cache", store],
                            check=True, capture_output=True, text=True).stdout.strip()
    time.sleep(2.5)  # past the refs memo's racy window (server/store_refs.c): a ref this new is reread each time
    eps = {
        "small (commit)": lambda i: f"/kernels/{REPO}/resolve/{commit}/build/f{i % 20:02d}.txt",
        "small (branch)": lambda i: f"/kernels/{REPO}/resolve/main/build/f{i % 20:02d}.txt",
        "listing": lambda i: f"/api/kernels/{REPO}/tree/{commit}/build",
        "refs": lambda i: f"/api/kernels/{REPO}/refs",
    }
    bins = [("branch", binary)] + ([("base", os.path.abspath(a.base))] if a.base else [])
    print(f"| endpoint | " + " | ".join(f"{b} syscalls/req" for b, _ in bins) + " |")
    print("|---|" + "---|" * len(bins))
    idle = {b: run_server(path, store, [], 0) for b, path in bins}
    for ep, f in eps.items():
        cells = []
        for b, path in bins:
            total = run_server(path, store, [f], a.n)
            cells.append(f"{(total - idle[b]) / a.n:.1f}")
        print(f"| {ep} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
