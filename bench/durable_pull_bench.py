#!/usr/bin/env python3
"""Cold pulls with durability vs curl to file (issue 25, item 1), interleaved in one run.

For each shape (--shape MB:FILES, default 300:20 and 2000:202) a kernel variant is published into
a store (18 weighted binaries making up the MB, plus small files up to FILES, plus __init__.py and
metadata.json) and served by `hubkern serve --threads 8` on loopback. Each rep runs, in order:
every hubkern binary (--bin NAME=PATH; each rep starts with the next one) pulling the variant into a fresh cache (8 parallel
transfers, durable: the binary's own fsync scheme), then `curl -Z --parallel-max 8` of the same
URLs to files (no fsync: the speed limit of the link and the page cache), then the same curl
followed by an fdatasync of every file and an fsync of the folder ("curl+fsync": the limit for
bytes that survive a power cut, done by a tool), and last "disk floor": the same files written from
memory straight to the device (files of 1 MiB or more with O_DIRECT, 4 at a time in 8 MiB writes,
each one's unaligned tail buffered and each fdatasynced; smaller files buffered and made durable
together by one syncfs; beside each file the symbolic link the huggingface_hub layout gives it in
`snapshots/`, as a pull makes one; the folders fsynced): no network and no page cache, the least
time found in which this disk makes these bytes and the layout's entries durable (on a file system
without O_DIRECT, such as tmpfs, those files are written buffered). `sync` runs before each timed
command so that no command pays for the previous one's dirty pages. Wall time; medians of --reps.

    python3 bench/durable_pull_bench.py --bin base=/tmp/hubkern-base --bin new=build/cli/hubkern [--reps 3]
"""
import argparse
import base64
import errno
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

V = "tvm-ffi01-cpu-x86_64-linux"
WEIGHTS = [30, 20, 12, 8, 6, 5, 4, 3, 3, 2, 2, 1, 1, 1, 0.5, 0.5, 0.01, 0.01]


def make_kernel(src, total_mb, nfiles):
    vdir = os.path.join(src, "build", V)
    os.makedirs(vdir)
    scale = total_mb * 1_000_000 / sum(WEIGHTS)
    block = bytearray(os.urandom(1 << 20))
    for i, w in enumerate(WEIGHTS):
        left = max(1000, int(w * scale))
        with open(os.path.join(vdir, f"lib{i:02d}.bin"), "wb") as fh:
            first = True
            while left > 0:
                k = min(left, len(block))
                if first:  # each file's own bytes: no two blobs alike
                    block[0] = i
                    first = False
                fh.write(block[:k])
                left -= k
    for i in range(max(0, nfiles - len(WEIGHTS) - 2)):
        with open(os.path.join(vdir, f"small{i:04d}.py"), "wb") as fh:
            fh.write(os.urandom(2000))
    with open(os.path.join(vdir, "__init__.py"), "w") as fh:
        fh.write("# bench kernel\n")
    files = {}
    for name in sorted(os.listdir(vdir)):
        h = hashlib.sha256()
        with open(os.path.join(vdir, name), "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        files[name] = base64.b64encode(h.digest()).decode()
    meta = {"name": "durkern", "id": "_durkern_cpu_0000000", "version": 1, "license": "MIT", "python-depends": [],
            "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256", "files": files}}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)
    names = sorted(os.listdir(vdir))
    return names, sum(os.path.getsize(os.path.join(vdir, f)) for f in names)


def timed(fn):
    subprocess.run(["sync"], check=True)
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {p.stderr}")


def fsync_all(d):
    for n in os.listdir(d):
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        os.fdatasync(fd)
        os.close(fd)
    fd = os.open(d, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def floor_buffer(chunk=8 << 20):
    """The page-aligned source of direct_write, filled before the timing starts."""
    import mmap
    buf = mmap.mmap(-1, chunk)
    buf.write(os.urandom(chunk))
    return buf


def direct_write(out, sizes, buf, threads=4, small=1 << 20):
    """The disk floor: files of `sizes` from `small` up written with O_DIRECT from `buf` (page
    aligned) and fdatasynced; smaller ones buffered and covered by one syncfs (a flush each would
    cost more than the pull pays for them)."""
    import ctypes
    chunk = len(buf)
    large_files, lock = [(i, n) for i, n in enumerate(sizes) if n >= small], threading.Lock()
    links = os.path.join(out, "links")
    os.makedirs(links)
    for i, n in enumerate(sizes):
        if n < small:
            with open(os.path.join(out, str(i)), "wb") as fh:
                fh.write(buf[:n])
        os.symlink(f"../{i}", os.path.join(links, str(i)))

    def worker():
        while True:
            with lock:
                if not large_files:
                    return
                i, size = large_files.pop()
            path = os.path.join(out, str(i))
            aligned = size // 4096 * 4096
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
            except OSError as e:  # EINVAL: the file system has no O_DIRECT
                if e.errno != errno.EINVAL:
                    raise
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            off = 0
            while off < aligned:
                off += os.pwrite(fd, memoryview(buf)[:min(chunk, aligned - off)], off)
            os.close(fd)
            fd = os.open(path, os.O_WRONLY)
            if size > aligned:  # the tail O_DIRECT cannot write
                os.pwrite(fd, buf[:size - aligned], aligned)
            os.fdatasync(fd)
            os.close(fd)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    fd = os.open(out, os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:  # the small files and the links
        raise OSError(ctypes.get_errno(), "syncfs")
    os.fsync(fd)
    os.close(fd)


def bench_shape(a, bins, work, mb, nfiles):
    repo = f"bench/dur{mb}"
    src, store = os.path.join(work, f"src{mb}"), os.path.join(work, f"store{mb}")
    names, total = make_kernel(src, mb, nfiles)
    sizes = [os.path.getsize(os.path.join(src, "build", V, n)) for n in names]
    buf = floor_buffer()
    run([bins[-1][1], "publish", src, repo, "--branch", "v1", "--lfs-threshold", str(a.lfs_threshold), "--cache", store])
    shutil.rmtree(src)
    srv = subprocess.Popen([bins[-1][1], "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                            "--trust", "bench", "--threads", "8"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    url = srv.stdout.readline().split("listening on ")[1].strip().rstrip("/")
    res = {name: [] for name, _ in bins}
    res["curl"], res["curl+fsync"], res["disk floor"] = [], [], []
    try:
        for rep in range(a.reps):
            # each rep starts with another binary: the first pull of a rep runs after the previous
            # rep's curl folders were deleted, which costs it ~0.15 s here (ext4 without a journal
            # scans past recently deleted inodes), so a fixed order biased the first column
            k = rep % len(bins)
            for name, b in bins[k:] + bins[:k]:
                cache = os.path.join(work, f"cache-{name}")
                res[name].append(timed(lambda: run([b, "pull", repo, "--version", "1", "--variant", V, "-q",
                                                    "--progress=none", "--endpoint", url, "--cache", cache])))
                shutil.rmtree(cache)
            for label, sync in (("curl", False), ("curl+fsync", True)):
                out = os.path.join(work, "curl")
                os.makedirs(out)
                cmd = ["curl", "-sSf", "-Z", "--parallel-max", "8"]
                for i, n in enumerate(names):
                    cmd += ["-o", os.path.join(out, f"{i}"), f"{url}/kernels/{repo}/resolve/v1/build/{V}/{n}"]

                def go(cmd=cmd, out=out, sync=sync):
                    run(cmd)
                    if sync:
                        fsync_all(out)

                res[label].append(timed(go))
                shutil.rmtree(out)
            out = os.path.join(work, "direct")
            os.makedirs(out)
            res["disk floor"].append(timed(lambda: direct_write(out, sizes, buf)))
            shutil.rmtree(out)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(store, ignore_errors=True)
    return len(names), total, {k: statistics.median(v) for k, v in res.items()}, res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable; "
                    "the last one publishes and serves)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shape", action="append", help="MB:FILES (repeatable; default 300:20 and 2000:202)")
    ap.add_argument("--lfs-threshold", type=int, default=1000, help="publish: files from this size are LFS "
                    "(sha256 blobs), smaller ones git-stored")
    ap.add_argument("--workdir", default=None, help="where the store and caches live (default: a temp folder)")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    shapes = [tuple(int(x) for x in s.split(":")) for s in (a.shape or ["300:20", "2000:202"])]
    work = tempfile.mkdtemp(prefix="hk-dur-bench-", dir=a.workdir)
    try:
        rows = [bench_shape(a, bins, work, mb, nf) for mb, nf in shapes]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"cold pull, wall s, median of {a.reps} interleaved reps; 8 parallel transfers; loopback mirror")
    # the durable limit: the link's (curl to the page cache) or the disk's, whichever is slower
    print(f"| shape | {' | '.join(n for n, _ in bins)} | curl | curl+fsync | disk floor | "
          + " | ".join(f"{n} / curl | {n} / curl+fsync | {n} / max(curl, floor)" for n, _ in bins) + " |")
    print("|---|" + "---:|" * (len(bins) * 4 + 3))
    for nfiles, total, m, _ in rows:
        limit = max(m["curl"], m["disk floor"])
        cells = [f"{m[n]:.3f}" for n, _ in bins] + [f"{m['curl']:.3f}", f"{m['curl+fsync']:.3f}", f"{m['disk floor']:.3f}"]
        cells += [f"{m[n] / m['curl']:.2f}x | {m[n] / m['curl+fsync']:.2f}x | {m[n] / limit:.2f}x" for n, _ in bins]
        print(f"| {nfiles} files, {total / 1e6:.0f} MB | " + " | ".join(cells) + " |")
    # the spread: a disk shared with other machines' writes makes single reps vary by 10-20 %
    print("\nevery rep, wall s (in the order run):")
    for nfiles, total, _, res in rows:
        for name, v in res.items():
            print(f"  {nfiles} files, {total / 1e6:.0f} MB  {name:>12}: " + " ".join(f"{t:.3f}" for t in v))


if __name__ == "__main__":
    main()
