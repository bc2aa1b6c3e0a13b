#!/usr/bin/env python3
"""Files-per-variant scaling (issue 25): CPU per file of a cold and a warm `hubkern pull` of one
variant of N small files (N = 1k, 5k, 20k by default) from a loopback `hubkern serve`, for one or
more hubkern binaries in the same run (a baseline build and the new one), paired: for each N the
binaries run one after another on the same store. CPU is user+sys of the pull process (rusage of
the child: the 2-core VM's wall time is noisy), per file; RSS is the pull's peak resident set.

    python3 bench/files_bench.py --bin base=../h-perf-base/build/cli/hubkern --bin new=build/cli/hubkern \
        [--sizes 1000,5000,20000] [--reps 1]
"""
import argparse
import base64
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

V = "tvm-ffi01-cpu-x86_64-linux"


def make_kernel(src, n):
    vdir = os.path.join(src, "build", V)
    files = {}
    for i in range(n):
        rel = f"d{i % 100:02d}/f{i:06d}.py"
        p = os.path.join(vdir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        body = f"# {i}\n".encode()
        with open(p, "wb") as fh:
            fh.write(body)
        files[rel] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    with open(os.path.join(vdir, "__init__.py"), "w") as fh:
        fh.write("# bench\n")
    files["__init__.py"] = base64.b64encode(hashlib.sha256(b"# bench\n").digest()).decode()
    meta = {"name": "fileskern", "id": "_fileskern_cpu_0000000", "version": 1, "license": "MIT",
            "python-depends": [], "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256", "files": files}}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)


def pull(binary, url, repo, cache):
    """(cpu s, peak RSS MiB) of one pull, from the child's rusage (wait4)."""
    p = subprocess.Popen([binary, "pull", repo, "--version", "1", "--variant", V, "--json", "-q", "--progress=none",
                          "--endpoint", url, "--cache", cache], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{binary} pull failed: {err}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable)")
    ap.add_argument("--server", default="build/cli/hubkern", help="the hubkern that publishes and serves")
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    server = os.path.abspath(a.server)
    work = tempfile.mkdtemp(prefix="hk-files-bench-")
    rows = []
    try:
        for n in [int(s) for s in a.sizes.split(",")]:
            repo = f"bench/files{n}"
            src, store = os.path.join(work, f"src{n}"), os.path.join(work, f"store{n}")
            make_kernel(src, n)
            subprocess.run([server, "publish", src, repo, "--branch", "v1", "--cache", store], check=True,
                           capture_output=True)
            srv = subprocess.Popen([server, "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                                    "--trust", "bench", "--threads", "4"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
            url = srv.stdout.readline().split("listening on ")[1].strip().rstrip("/")
            try:
                best = {}
                for rep in range(a.reps):
                    for name, b in bins:  # paired: the binaries alternate
                        cache = os.path.join(work, f"cache-{name}-{n}")
                        cold, rss_c = pull(b, url, repo, cache)
                        time.sleep(0.05)  # past the racy-ctime window, so that the warm pull uses receipts
                        pull(b, url, repo, cache)  # the first warm pull writes the receipt
                        warm, rss_w = pull(b, url, repo, cache)
                        shutil.rmtree(cache)
                        o = best.get(name)
                        if o is None or cold < o[0]: o = (cold, o[1] if o else warm, rss_c, rss_w)
                        if warm < o[1]: o = (o[0], warm, o[2], o[3])
                        best[name] = o
                for name, _ in bins:
                    c, w, rc, rw = best[name]
                    rows.append((n, name, c, w, rc, rw))
            finally:
                srv.terminate()
                srv.wait()
            shutil.rmtree(src)
            shutil.rmtree(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"variant of N files (+metadata.json); loopback hubkern serve; CPU = user+sys of the pull, best of {a.reps}")
    print(f"{'files':>7} {'binary':<8}{'cold CPU s':>11}{'cold ms/file':>13}{'warm CPU s':>11}{'warm ms/file':>13}"
          f"{'cold RSS MiB':>13}{'warm RSS MiB':>13}")
    for n, name, c, w, rc, rw in rows:
        print(f"{n:>7} {name:<8}{c:>11.3f}{c / n * 1e3:>13.4f}{w:>11.3f}{w / n * 1e3:>13.4f}{rc:>13.0f}{rw:>13.0f}")


if __name__ == "__main__":
    main()
