#!/usr/bin/env python3
"""Flushing a pull's many small blobs (issue 25, item 3): one fdatasync per file, 8 at a time (what
cache/blobs.c hk__cache_blobs_durable does), against one syncfs(2) of the cache's file system,
on the disk under --dir. Each rep writes N files of S bytes as a pull does (write, then
sync_file_range(SYNC_FILE_RANGE_WRITE) to start the writeback, then a rename into place), then
flushes them one way, then fsyncs the folder; the two ways alternate, after a `sync`, so both see
the same machine. With --busy MB, another process keeps writing (no fsync) MB of its own into the
same file system while the flush runs: syncfs has to flush that data too, the per-file flush does
not. Prints wall seconds of the flush alone (median of --reps) per N, method and load.

    python3 bench/syncfs_bench.py --dir /tmp --sizes 100,1000,2000 --file-bytes 2048 --reps 5 --busy 0,200
"""
import argparse
import ctypes
import ctypes.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
SYNC_FILE_RANGE_WRITE = 2


def write_files(d, n, size):
    paths = []
    body = os.urandom(size)
    for i in range(n):
        tmp, final = os.path.join(d, f"f{i:06d}.tmp"), os.path.join(d, f"f{i:06d}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, body)
        libc.sync_file_range(fd, ctypes.c_longlong(0), ctypes.c_longlong(0), SYNC_FILE_RANGE_WRITE)
        os.close(fd)
        os.rename(tmp, final)
        paths.append(final)
    return paths


def flush_each(paths):
    def one(p):
        fd = os.open(p, os.O_RDONLY)
        os.fdatasync(fd)
        os.close(fd)
    with ThreadPoolExecutor(8) as ex:  # hk__fdatasync_all: 8 at a time
        list(ex.map(one, paths))


def flush_syncfs(d):
    fd = os.open(d, os.O_RDONLY)
    if libc.syncfs(fd) != 0:
        raise OSError(ctypes.get_errno(), "syncfs")
    os.close(fd)


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--sizes", default="100,1000,2000")
    ap.add_argument("--file-bytes", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--busy", default="0,200", help="MB another writer dirties during the flush (comma list)")
    a = ap.parse_args()
    rows = []
    for busy in [int(b) for b in a.busy.split(",")]:
        for n in [int(s) for s in a.sizes.split(",")]:
            t = {"fdatasync x N": [], "syncfs": []}
            for rep in range(a.reps):
                for method in (("fdatasync x N", "syncfs") if rep % 2 == 0 else ("syncfs", "fdatasync x N")):
                    d = tempfile.mkdtemp(prefix="syncfs-bench-", dir=a.dir)
                    paths = write_files(d, n, a.file_bytes)
                    w = None
                    if busy:
                        w = subprocess.Popen(["dd", "if=/dev/zero", f"of={d}/busy", "bs=1M", f"count={busy}"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(0.3)  # its pages dirty before the flush starts
                    t0 = time.perf_counter()
                    flush_each(paths) if method != "syncfs" else flush_syncfs(d)
                    fsync_dir(d)
                    t[method].append(time.perf_counter() - t0)
                    if w:
                        w.wait()
                    shutil.rmtree(d)
                    subprocess.run(["sync"])
            rows.append((busy, n, {k: statistics.median(v) for k, v in t.items()}))
    print(f"flush of N files of {a.file_bytes} bytes in {a.dir} (+ fsync of the folder); wall s, median of {a.reps}")
    print(f"{'busy MB':>8} {'files':>6} {'fdatasync x N':>14} {'syncfs':>9} {'syncfs / each':>14}")
    for busy, n, m in rows:
        print(f"{busy:>8} {n:>6} {m['fdatasync x N']:>14.3f} {m['syncfs']:>9.3f} {m['syncfs'] / m['fdatasync x N']:>13.2f}x")


if __name__ == "__main__":
    sys.exit(main())
