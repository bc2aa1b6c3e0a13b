#!/usr/bin/env python3
"""Load test for `hubkern serve`: N concurrent clients pull one large LFS file, then N concurrent
clients pull a many-file tree (listing with pagination + one GET per file, keep-alive). Every byte
is verified (sha256 of the large file; git blob sha1 of each tree file against the listing's oid and
against the published content), and the server's peak resident memory (VmHWM) is reported.

    python3 bench/serve_load.py                      # 64 clients, 200 MB file, 500-file tree
    python3 bench/serve_load.py --size-mb 2048       # the issue's 2 GB case (needs ~2 GB of disk)

Needs a built hubkern (HUBKERN_BIN, or build/cli/hubkern)."""

import argparse
import hashlib
import http.client
import json
import os
import pathlib
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "integration"))
from hk_serve_helpers import Server, git_blob_sha1, publish  # noqa: E402


def proc_status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop_ev = pid, 0, threading.Event()

    def run(self):
        while not self.stop_ev.is_set():
            try:
                self.peak = max(self.peak, proc_status(self.pid, "VmRSS"))
            except OSError:
                return
            time.sleep(0.05)


def make_large(path: pathlib.Path, size: int) -> str:
    h = hashlib.sha256()
    rnd = random.Random(1)
    chunk = 8 << 20
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(chunk, left)
            b = rnd.randbytes(n)
            f.write(b)
            h.update(b)
            left -= n
    return h.hexdigest()


def make_tree(root: pathlib.Path, n: int) -> dict:
    rnd = random.Random(2)
    files = {}
    for i in range(n):
        rel = f"build/variant-{i % 8}/sub{i % 5}/file-{i:04d}.txt"
        data = (f"file {i}\n" + "x" * rnd.randint(100, 20000) + "\n").encode()
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        files[rel] = git_blob_sha1(data)
    return files


def conn_for(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=120)


def pull_large(url, path, want_sha, size, out, i):
    c = conn_for(url)
    try:
        c.request("GET", path)
        r = c.getresponse()
        if r.status != 200:
            out[i] = (False, 0, f"status {r.status}")
            return
        h = hashlib.sha256()
        got = 0
        buf = bytearray(1 << 20)
        mv = memoryview(buf)
        while True:
            n = r.readinto(buf)
            if not n:
                break
            h.update(mv[:n])
            got += n
        out[i] = (got == size and h.hexdigest() == want_sha, got, "")
    except Exception as e:  # noqa: BLE001
        out[i] = (False, 0, repr(e))
    finally:
        c.close()


def pull_tree(url, repo, rev, files, out, i):
    c = conn_for(url)
    nreq, nbytes, ok, err = 0, 0, True, ""
    try:
        listing = {}
        nxt = f"/api/kernels/{repo}/tree/{rev}?recursive=true"
        while nxt:
            c.request("GET", nxt)
            r = c.getresponse()
            body = r.read()
            nreq += 1
            if r.status != 200:
                raise RuntimeError(f"tree status {r.status}")
            for e in json.loads(body):
                if e["type"] == "file":
                    listing[e["path"]] = e["oid"]
            link = r.getheader("Link")
            nxt = None
            if link:
                u = urllib.parse.urlsplit(link[1: link.index(">")])
                nxt = u.path + "?" + u.query
        if listing != files:
            ok, err = False, "listing differs from the published tree"
        for rel, oid in listing.items():
            c.request("GET", f"/kernels/{repo}/resolve/{rev}/{urllib.parse.quote(rel)}")
            r = c.getresponse()
            data = r.read()
            nreq += 1
            nbytes += len(data)
            if r.status != 200 or git_blob_sha1(data) != oid or r.getheader("ETag") != f'"{oid}"':
                ok, err = False, f"{rel}: status {r.status} or content mismatch"
    except Exception as e:  # noqa: BLE001
        ok, err = False, repr(e)
    finally:
        c.close()
    out[i] = (ok, nbytes, nreq, err)


def run_phase(fn, args_list):
    threads = [threading.Thread(target=fn, args=a) for a in args_list]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--size-mb", type=int, default=200, help="large LFS file size in MB (10^6 bytes)")
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--threads", type=int, default=4, help="hubkern serve --threads")
    ap.add_argument("--page-size", type=int, default=100, help="hubkern serve --page-size")
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()

    work = pathlib.Path(args.dir) if args.dir else pathlib.Path(tempfile.mkdtemp(prefix="hk-serve-load-"))
    try:
        store = work / "store"
        big_src, tree_src = work / "big", work / "tree"
        big_src.mkdir(parents=True, exist_ok=True)
        size = args.size_mb * 1000 * 1000
        t0 = time.perf_counter()
        want_sha = make_large(big_src / "weights.bin", size)
        files = make_tree(tree_src, args.files)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        c_big = publish(big_src, "bench/big", "v1", store)
        c_tree = publish(tree_src, "bench/tree", "v1", store)
        t_pub = time.perf_counter() - t0
        (big_src / "weights.bin").unlink()  # the store holds the only copy now

        srv = Server(store, "--threads", args.threads, "--page-size", args.page_size)
        pid = srv.proc.pid
        sampler = RssSampler(pid)
        sampler.start()
        rss_idle = proc_status(pid, "VmRSS")
        rows = []
        try:
            out = [None] * args.clients
            dt = run_phase(pull_large, [(srv.url, f"/kernels/bench/big/resolve/{c_big}/weights.bin", want_sha, size, out, i)
                                        for i in range(args.clients)])
            ok = all(o and o[0] for o in out)
            total = sum(o[1] for o in out if o)
            rows.append(("large LFS file", f"{args.clients} x {args.size_mb} MB", args.clients, total, dt, ok,
                         proc_status(pid, "VmHWM")))
            bad = [o for o in out if not (o and o[0])]
            if bad:
                print("large-file failures:", bad[:3], file=sys.stderr)

            out = [None] * args.clients
            dt = run_phase(pull_tree, [(srv.url, "bench/tree", c_tree, files, out, i) for i in range(args.clients)])
            ok = all(o and o[0] for o in out)
            total = sum(o[1] for o in out if o)
            nreq = sum(o[2] for o in out if o)
            rows.append(("500-file tree" if args.files == 500 else f"{args.files}-file tree",
                         f"{args.clients} x {args.files} files", nreq, total, dt, ok, proc_status(pid, "VmHWM")))
            bad = [o for o in out if not (o and o[0])]
            if bad:
                print("tree failures:", bad[:3], file=sys.stderr)
        finally:
            sampler.stop_ev.set()
            hwm = proc_status(pid, "VmHWM")
            rc = srv.stop()

        print(f"hubkern serve load test: {args.clients} concurrent clients, server --threads {args.threads}, "
              f"{os.cpu_count()} CPUs; data generated in {t_gen:.1f} s, published in {t_pub:.1f} s")
        print()
        print("| phase | transfers | requests | bytes | seconds | throughput | req/s | every byte matched | server VmHWM after |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, what, nreq, total, dt, ok, hw in rows:
            print(f"| {name} | {what} | {nreq} | {total / 1e6:.0f} MB | {dt:.2f} | {total / 1e6 / dt:.0f} MB/s | "
                  f"{nreq / dt:.0f} | {'yes' if ok else 'NO'} | {hw / 2**20:.1f} MiB |")
        print()
        print(f"server resident memory: idle {rss_idle / 2**20:.1f} MiB, peak (VmHWM) {hwm / 2**20:.1f} MiB "
              f"(limit 64 MiB: {'ok' if hwm < 64 * 2**20 else 'EXCEEDED'}); clean exit on SIGTERM: "
              f"{'yes' if rc == 0 else f'no (rc {rc})'}")
        all_ok = all(r[5] for r in rows) and hwm < 64 * 2**20 and rc == 0
        return 0 if all_ok else 1
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
