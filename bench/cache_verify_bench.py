#!/usr/bin/env python3
"""`hubkern cache verify` of a cache of --repos repos (3 blobs of --kb kB each, linked from one
snapshot variant, with the variant's metadata.json and its digest of the three, as a pull leaves
them; --no-digest: the variant without metadata.json) vs the limit, hashing every blob once
(issue 25, item 3). For each rep every
hubkern binary (--bin NAME=PATH) verifies the cache in turn; the limit is this script reading and
sha256-hashing every blob in-process (no process start); `sha256sum` and `openssl dgst -sha256`
over every blob (1000 paths a process) show what coreutils' and OpenSSL's code cost for the same
bytes. Wall and CPU (user+sys of the child) medians; syscalls of one run of each binary from
`strace -f -c`.

    python3 bench/cache_verify_bench.py --bin base=/tmp/perf2-base/hubkern --bin new=build/cli/hubkern
"""
import argparse
import base64
import glob
import json
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def make_cache(root, repos, kb, digest=True):
    for r in range(repos):
        rd = f"{root}/kernels--org--k{r:04d}"
        commit = hashlib.sha1(str(r).encode()).hexdigest()
        vd = f"{rd}/snapshots/{commit}/build/tvm-ffi01-cpu-x86_64-linux"
        os.makedirs(vd)
        os.makedirs(rd + "/blobs")
        os.makedirs(rd + "/refs")
        files = {}
        for i in range(3):
            data = os.urandom(kb * 1000)
            h = hashlib.sha256(data).hexdigest()
            with open(f"{rd}/blobs/{h}", "wb") as fh:
                fh.write(data)
            os.symlink(f"../../../../blobs/{h}", f"{vd}/f{i}.bin")
            files[f"f{i}.bin"] = base64.b64encode(hashlib.sha256(data).digest()).decode()
        if digest:  # metadata.json is a small git blob (named by its git SHA-1), as the Hub lists it
            meta = json.dumps({"python-depends": [], "digest": {"algorithm": "sha256", "files": files}}).encode()
            oid = hashlib.sha1(b"blob %d\0" % len(meta) + meta).hexdigest()
            with open(f"{rd}/blobs/{oid}", "wb") as fh:
                fh.write(meta)
            os.symlink(f"../../../../blobs/{oid}", f"{vd}/metadata.json")
        with open(rd + "/refs/v1", "w") as fh:
            fh.write(commit)


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, cmd
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def hash_all(root):
    t, c = time.perf_counter(), time.process_time()
    for p in glob.glob(f"{root}/*/blobs/*"):
        with open(p, "rb") as fh:
            hashlib.sha256(fh.read()).hexdigest()
    return time.perf_counter() - t, time.process_time() - c


def tool_cpu(tool, root):
    """CPU of an outside hasher (`sha256sum`, `openssl dgst -sha256`) over every blob, with its
    process starts: what hashing costs per byte with coreutils' and with OpenSSL's code."""
    paths = sorted(glob.glob(f"{root}/*/blobs/*"))
    wall, cpu = 0.0, 0.0
    for i in range(0, len(paths), 1000):
        w, c = timed(tool + paths[i:i + 1000])
        wall, cpu = wall + w, cpu + c
    return wall, cpu


def syscalls(cmd):
    out = tempfile.mktemp()
    subprocess.run(["strace", "-f", "-c", "-o", out] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [ln.split() for ln in open(out).read().splitlines() if ln.strip().endswith("total")]
    os.unlink(out)
    return int(rows[-1][3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--repos", type=int, default=1000)
    ap.add_argument("--kb", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-digest", action="store_true", help="variants without metadata.json")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    root = tempfile.mkdtemp(prefix="hk-verify-bench-")
    try:
        make_cache(root, a.repos, a.kb, not a.no_digest)
        res = {n: [] for n, _ in bins}
        res["hash every blob once"] = []
        tools = {"sha256sum blobs/*": ["sha256sum"], "openssl dgst -sha256 blobs/*": ["openssl", "dgst", "-sha256"]}
        tools = {n: t for n, t in tools.items() if shutil.which(t[0])}
        for n in tools:
            res[n] = []
        for _ in range(a.reps):
            for n, b in bins:
                res[n].append(timed([b, "cache", "verify", "--cache", root]))
            res["hash every blob once"].append(hash_all(root))
            for n, t in tools.items():
                res[n].append(tool_cpu(t, root))
        sysc = {n: syscalls([b, "cache", "verify", "--cache", root]) for n, b in bins} if shutil.which("strace") else {}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lim = statistics.median(w for w, _ in res["hash every blob once"])
    lim_cpu = statistics.median(c for _, c in res["hash every blob once"])
    print(f"{a.repos} repos x 3 blobs of {a.kb} kB{'' if a.no_digest else ' + metadata.json with their digest'}; "
          f"median of {a.reps} interleaved reps")
    print("| what | wall s | CPU s | wall / limit | CPU / limit | syscalls |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, v in res.items():
        w, c = statistics.median(x for x, _ in v), statistics.median(y for _, y in v)
        print(f"| {n} | {w:.3f} | {c:.3f} | {w / lim:.2f}x | {c / lim_cpu:.2f}x | {sysc.get(n, '-')} |")


if __name__ == "__main__":
    main()
