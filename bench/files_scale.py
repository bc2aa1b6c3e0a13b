#!/usr/bin/env python3
"""Files-per-variant scaling (issue 25): one variant of N tiny files (N = 10, 1k, 10k, 100k by
default) published to a loopback `hubkern serve` that pages its tree listings as the Hub does
(1000 entries a page), pulled cold (fresh cache) and warm (the same cache again, receipts written)
by each hubkern binary given (a baseline build and the new one, paired: they alternate on the same
mirror) and by huggingface_hub's snapshot_download on the same mirror (up to --hf-max files).

Per client and N: CPU per file (user+sys of the process and its threads, from wait4's rusage: the
2-core VM's wall time is noisy; best of --reps), wall per file (best of --reps), peak RSS, and
syscalls per file (one more run under `strace -c -f`, up to --strace-max files). For
snapshot_download CPU and wall are taken in-process around the call (time.process_time, perf_counter:
without the interpreter start and imports, its best case); its syscalls less those of a run that only
imports huggingface_hub; its RSS includes the interpreter.

The caches live under --cache-dir (default /dev/shm when it exists): this VM's root file system is
ext4 without a journal, where every new inode scans past the inodes deleted in the last ~30 s
(ext4 recently_deleted), so a pull right after `rm -rf` of an earlier cache pays the deletion's
cost again; tmpfs measures the client, not that.

    python3 bench/files_scale.py --bin base=/tmp/hubkern-base --bin new=build/cli/hubkern \\
        [--sizes 10,1000,10000,100000] [--reps 3] [--hf-max 10000] [--strace-max 100000]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from hk_serve_helpers import (SCALE_VARIANT as V, Server, make_files_kernel, publish, python_clients_env,  # noqa: E402
                              strace_total_calls, timed_run)

HF_PULL = ("import sys, time\n"
           "from huggingface_hub import snapshot_download\n"
           "c, t = time.process_time(), time.perf_counter()\n"
           "if sys.argv[1] != '-':\n"
           "    snapshot_download(sys.argv[1], repo_type='kernel', revision='v1', cache_dir=sys.argv[2],\n"
           f"                      allow_patterns=['build/{V}/*'], ignore_patterns=['*.pyc', '**/__pycache__/**'])\n"
           "open(sys.argv[3], 'w').write(f'{time.process_time() - c} {time.perf_counter() - t}')\n")


def hubkern_pull(binary, url, repo, cache):
    return [binary, "pull", repo, "--version", "1", "--variant", V, "--json", "-q", "--progress=none",
            "--endpoint", url, "--cache", cache]


def measure(cmd_of, env, reps, strace, work):
    """{cold,warm}: (cpu, wall, rss, syscalls or None), best of reps; cmd_of(cache) the command."""
    best = {}
    for rep in range(reps + (1 if strace else 0)):
        traced = strace and rep == reps  # the counting run last, apart from the timed ones
        cache = tempfile.mkdtemp(prefix="cache-", dir=work)
        for phase in ("cold", "prime", "warm"):  # prime: the first warm use writes the receipt
            out = os.path.join(work, f"strace-{phase}") if traced and phase != "prime" else None
            cpu, wall, rss = timed_run(cmd_of(cache), env=env, strace_out=out)
            if os.path.exists(os.path.join(work, "inproc")):  # snapshot_download's own CPU and wall
                with open(os.path.join(work, "inproc")) as fh:
                    cpu, wall = map(float, fh.read().split())
                os.unlink(os.path.join(work, "inproc"))
            if phase == "prime":
                continue
            if traced:
                b = best[phase]
                best[phase] = (b[0], b[1], b[2], strace_total_calls(out))
                continue
            o = best.get(phase)
            best[phase] = (min(cpu, o[0]), min(wall, o[1]), max(rss, o[2]), None) if o else (cpu, wall, rss, None)
        shutil.rmtree(cache)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a hubkern binary (repeatable)")
    ap.add_argument("--server", default="build/cli/hubkern", help="the hubkern that publishes and serves")
    ap.add_argument("--sizes", default="10,1000,10000,100000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hf-max", type=int, default=10000, help="largest N snapshot_download runs for")
    ap.add_argument("--strace-max", type=int, default=100000, help="largest N the syscalls are counted for")
    ap.add_argument("--cache-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    os.environ["HUBKERN_BIN"] = os.path.abspath(a.server)  # Server and publish run this one
    work = tempfile.mkdtemp(prefix="hk-files-scale-", dir=a.cache_dir)
    env = python_clients_env()
    rows = []
    try:
        base = {}
        if a.hf_max > 0:  # the interpreter and the imports alone, taken off snapshot_download's figures
            b = measure(lambda cache: [sys.executable, "-c", HF_PULL, "-", cache, os.path.join(work, "inproc")], env, a.reps, True, work)
            base = {k: v for k, v in b.items()}
        for n in [int(s) for s in a.sizes.split(",")]:
            repo = f"bench/files{n}"
            src, store = os.path.join(work, f"src{n}"), os.path.join(work, f"store{n}")
            make_files_kernel(src, n)
            publish(src, repo, "v1", store)
            shutil.rmtree(src)
            with Server(store, "--trust", "bench", "--threads", "4", "--page-size", "1000", public_url=True) as srv:
                strace = n <= a.strace_max and shutil.which("strace") is not None
                for name, b in bins:
                    r = measure(lambda cache: hubkern_pull(b, srv.url, repo, cache), env, a.reps, strace, work)
                    rows.append((n, name, r))
                if n <= a.hf_max:
                    hf_env = dict(env, HF_ENDPOINT=srv.url)
                    r = measure(lambda cache: [sys.executable, "-c", HF_PULL, repo, cache, os.path.join(work, "inproc")], hf_env, a.reps, strace,
                                work)
                    r = {k: (v[0], v[1], v[2], None if v[3] is None else v[3] - base[k][3]) for k, v in r.items()}
                    rows.append((n, "hf", r))
            shutil.rmtree(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files = len(str(max(r[0] for r in rows)))
    print(f"variant of N files (+__init__.py, metadata.json); loopback hubkern serve, 1000 entries a listing page; "
          f"caches in {a.cache_dir or tempfile.gettempdir()}; CPU = user+sys, best of {a.reps}; hf = snapshot_download "
          f"timed in-process (no interpreter start or imports)")
    hdr = (f"{'files':>{max(files, 5)}} {'client':<6}{'cold CPU':>10}{'cold wall':>10}{'warm CPU':>10}{'warm wall':>10}"
           f"{'cold RSS':>9}{'warm RSS':>9}{'cold sys':>9}{'warm sys':>9}")
    print(hdr)
    print(f"{'':>{max(files, 5)}} {'':<6}{'ms/file':>10}{'ms/file':>10}{'ms/file':>10}{'ms/file':>10}"
          f"{'MiB':>9}{'MiB':>9}{'/file':>9}{'/file':>9}")
    for n, name, r in rows:
        c, w = r["cold"], r["warm"]
        sc = f"{c[3] / n:>9.1f}" if c[3] is not None else f"{'-':>9}"
        sw = f"{w[3] / n:>9.1f}" if w[3] is not None else f"{'-':>9}"
        print(f"{n:>{max(files, 5)}} {name:<6}{c[0] / n * 1e3:>10.4f}{c[1] / n * 1e3:>10.4f}{w[0] / n * 1e3:>10.4f}"
              f"{w[1] / n * 1e3:>10.4f}{c[2]:>9.0f}{w[2]:>9.0f}{sc}{sw}")
    per = {(n, name): r["cold"][0] / n for n, name, r in rows}
    warm = {(n, name): r["warm"][0] / n for n, name, r in rows}
    sizes = sorted({n for n, _, _ in rows})
    if 1000 in sizes:
        for name, _ in bins:
            print(f"{name}: CPU per file at N / at 1000 files: " + ", ".join(
                f"{n}: cold {per[(n, name)] / per[(1000, name)]:.2f}x warm {warm[(n, name)] / warm[(1000, name)]:.2f}x"
                for n in sizes if n > 1000))


if __name__ == "__main__":
    main()
