#!/usr/bin/env python3
"""Pull benchmark: hubkern vs huggingface_hub.snapshot_download on the same loopback mirror.

A kernel with one 20-file, ~300 MB variant is published into a store and served by
`hubkern serve --access-log`. Each client pulls build/<variant>/ into a fresh cache (cold) and then
twice again into the same cache (warm: right after the cold pull; warm2: once more). hubkern runs a
second time with HUBKERN_VERIFY=always (every warm use re-hashes every byte, no receipts). Wall time is the median of --reps runs; HTTP requests are counted
from the server's access log. hubkern is timed as a whole process (start to exit); Python's
snapshot_download is timed in-process, without the interpreter start and imports (its best case).

    python3 bench/pull_bench.py --hubkern build/cli/hubkern [--reps 3] [--mb 300]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "bench/pullkern"


def make_kernel(src, total_mb):
    vdir = os.path.join(src, "build", V)
    os.makedirs(vdir)
    # 18 binary files of mixed sizes (a few large LFS files, several mid, a few small git files)
    weights = [30, 20, 12, 8, 6, 5, 4, 3, 3, 2, 2, 1, 1, 1, 0.5, 0.5, 0.01, 0.01]
    scale = total_mb * 1_000_000 / sum(weights)
    block = os.urandom(1 << 20)
    for i, w in enumerate(weights):
        size = max(1000, int(w * scale))
        with open(os.path.join(vdir, f"lib{i:02d}.bin"), "wb") as fh:
            left = size
            n = 0
            while left > 0:
                k = min(left, len(block))
                # vary content per file so that every blob is distinct
                fh.write(bytes([i]) + block[1:k] if n == 0 else block[:k])
                left -= k
                n += 1
    with open(os.path.join(vdir, "__init__.py"), "w") as fh:
        fh.write("# bench kernel\n")
    files = {}
    for name in sorted(os.listdir(vdir)):
        with open(os.path.join(vdir, name), "rb") as fh:
            files[name] = base64.b64encode(hashlib.sha256(fh.read()).digest()).decode()
    meta = {"name": "pullkern", "id": "_pullkern_cpu_0000000", "version": 1, "license": "MIT", "python-depends": [],
            "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256", "files": files}}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)
    return len(os.listdir(vdir)), sum(os.path.getsize(os.path.join(vdir, f)) for f in os.listdir(vdir))


class Mirror:
    def __init__(self, hubkern, store, logpath):
        self.log = open(logpath, "w")
        self.logpath = logpath
        self.proc = subprocess.Popen([hubkern, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                                      "--trust", "bench", "--access-log", "--threads", "8"],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        self.url = line.split("listening on ")[1].strip().rstrip("/")

    def mark(self):
        with open(self.logpath) as fh:
            return sum(1 for line in fh if " access " in line)

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def run_hubkern(hubkern, url, cache, verify=None):
    env = dict(os.environ)
    env.pop("HUBKERN_VERIFY", None)
    if verify:
        env["HUBKERN_VERIFY"] = verify
    t = time.perf_counter()
    r = subprocess.run([hubkern, "pull", REPO, "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache",
                        cache], capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"hubkern failed: {r.stderr}")
    return dt


def run_python(url, cache):
    # in-process, as a library user would; HF_ENDPOINT is read at import, so set it in a child
    code = (
        "import time,sys\n"
        "from huggingface_hub import snapshot_download\n"
        "t=time.perf_counter()\n"
        f"snapshot_download({REPO!r}, repo_type='kernel', revision='v1', cache_dir={cache!r},"
        f" allow_patterns=['build/{V}/*'], ignore_patterns=['*.pyc', '**/__pycache__/**'])\n"
        "print(time.perf_counter()-t)\n")
    env = dict(os.environ, HF_ENDPOINT=url, HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("HF_HUB_OFFLINE", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"snapshot_download failed: {r.stderr}")
    return float(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hubkern", default=os.environ.get("HUBKERN_BIN", "build/cli/hubkern"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    hubkern = os.path.abspath(a.hubkern)
    import huggingface_hub
    work = a.workdir or tempfile.mkdtemp(prefix="hk-pull-bench-")
    try:
        src, store = os.path.join(work, "src"), os.path.join(work, "store")
        nfiles, nbytes = make_kernel(src, a.mb)
        subprocess.run([hubkern, "publish", src, REPO, "--branch", "v1", "--cache", store], check=True,
                       capture_output=True)
        m = Mirror(hubkern, store, os.path.join(work, "access.log"))
        results = {}
        try:
            for tool, fn in (("hubkern", lambda c: run_hubkern(hubkern, m.url, c)),
                             ("hubkern always", lambda c: run_hubkern(hubkern, m.url, c, "always")),
                             ("huggingface_hub", lambda c: run_python(m.url, c))):
                cold, warm, warm2, reqs_cold, reqs_warm = [], [], [], [], []
                for rep in range(a.reps):
                    cache = os.path.join(work, f"cache-{tool.replace(' ', '-')}-{rep}")
                    n0 = m.mark()
                    cold.append(fn(cache))
                    n1 = m.mark()
                    warm.append(fn(cache))
                    n2 = m.mark()
                    warm2.append(fn(cache))
                    reqs_cold.append(n1 - n0)
                    reqs_warm.append(n2 - n1)
                    shutil.rmtree(cache)
                results[tool] = (statistics.median(cold), statistics.median(warm), statistics.median(warm2),
                                 max(reqs_cold), max(reqs_warm))
        finally:
            m.close()
        hk, py = results["hubkern"], results["huggingface_hub"]
        print(f"variant: {nfiles} files, {nbytes / 1e6:.1f} MB; loopback mirror (hubkern serve); "
              f"median of {a.reps}; huggingface_hub {huggingface_hub.__version__}")
        print(f"{'client':<18}{'cold s':>9}{'cold MB/s':>11}{'warm s':>9}{'warm2 s':>9}{'HTTP cold':>11}"
              f"{'HTTP warm':>11}")
        for tool, (c, w, w2, rc, rw) in results.items():
            print(f"{tool:<18}{c:>9.3f}{nbytes / 1e6 / c:>11.0f}{w:>9.3f}{w2:>9.3f}{rc:>11}{rw:>11}")
        print(f"ratio huggingface_hub/hubkern: cold {py[0] / hk[0]:.2f}x, warm {py[1] / hk[1]:.2f}x, "
              f"warm2 {py[2] / hk[2]:.2f}x; requests cold {py[3]}/{hk[3]}, warm {py[4]}/{hk[4]}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
