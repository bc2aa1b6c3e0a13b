#!/usr/bin/env python3
"""CLI timings: each hubkern command beside its hf / kernels equivalent, on one loopback mirror.

The mirror serves the repository's own RMSNorm kernel (its CPU tvm-ffi variant, staged by the build
in BUILD/kernels/rmsnorm/hub) as hubkern/rmsnorm, branch v1, published and served by `hubkern
publish` / `hubkern serve --trust hubkern` exactly as scripts/demo.sh (README's first command) does.
Every command runs as a whole process (start to exit, as a user meets it), --runs times; the table
shows medians. A cold pull gets a fresh, empty cache on every run; a warm one repeats a pull into
a cache that already holds the variant. The Python clients get the same endpoint and caches
(HF_ENDPOINT, HF_HUB_CACHE, KERNELS_CACHE) and none of the caller's HF_* settings.

With --newcomer it also times README's first path from a fresh clone to a loaded kernel: `git
clone`, configure and build as scripts/demo.sh does (its package set-up skipped: the packages are
installed), then the demo itself (publish, serve, pull, hk_get_kernel, call). That takes minutes.

    python3 bench/cli_timings.py [--build build] [--runs 5] [--newcomer]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPO = "hubkern/rmsnorm"
sys.path.insert(0, str(ROOT / "tests" / "integration"))


def clean_env(endpoint, cache, home):
    """The caller's environment without HF_* / KERNELS_* settings, pointed at the mirror and cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "HUBKERN_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(cache), KERNELS_CACHE=str(cache), HF_HOME=str(home),
               HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1")  # HF_HOME is fresh: no token
    return env


def timed(cmd, env, cwd=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return dt


GET_KERNEL = ("import kernels; k = kernels.get_kernel('hubkern/rmsnorm', version=1, backend='cpu'); "
              "assert hasattr(k, 'rms_norm')")


def rows(hubkern, variant_src):
    """(operation, hubkern command, [(baseline name, command)], kind): None and cold get a fresh,
    empty cache per run; warm and listed the cache a hubkern pull filled (the layout is shared, so
    every client finds the kernel there)."""
    py = sys.executable
    hf = shutil.which("hf") or "hf"
    kernels = shutil.which("kernels") or "kernels"
    pull = [hubkern, "pull", REPO, "--version", "1", "--backend", "cpu", "-q"]
    hf_dl = [hf, "download", REPO, "--repo-type", "kernel", "--revision", "v1", "--quiet"]
    get = [py, "-c", GET_KERNEL]
    return [
        ("--help", [hubkern, "--help"], [("hf --help", [hf, "--help"]), ("kernels --help", [kernels, "--help"])],
         None),
        ("env", [hubkern, "env"], [("hf env", [hf, "env"])], None),
        ("variants (local dir)", [hubkern, "variants", variant_src, "--backend", "cpu"], [], None),
        ("versions", [hubkern, "versions", REPO], [("kernels versions", [kernels, "versions", REPO])], None),
        ("info", [hubkern, "info", REPO], [("kernels info", [kernels, "info", REPO, "--version", "1"])], None),
        ("pull, cold", pull, [("hf download", hf_dl), ("kernels.get_kernel", get)], "cold"),
        ("pull, warm", pull, [("hf download", hf_dl), ("kernels.get_kernel", get)], "warm"),
        ("load (get + dlopen), warm", [hubkern, "load", REPO, "--version", "1", "--backend", "cpu"],
         [("kernels.get_kernel", get)], "warm"),
        ("cache ls", [hubkern, "cache", "ls"], [("hf cache ls", [hf, "cache", "ls"])], "listed"),
        ("cache verify", [hubkern, "cache", "verify"],
         [("hf cache verify", [hf, "cache", "verify", REPO, "--repo-type", "kernel", "--revision", "v1"])],
         "listed"),
    ]


def median_time(cmd, kind, mirror, work, runs, filled):
    times = []
    for _ in range(runs):
        run_dir = pathlib.Path(tempfile.mkdtemp(dir=work))
        cache = filled if kind in ("warm", "listed") else run_dir / "cache"
        env = clean_env(mirror.url, cache, run_dir / "hf_home")
        times.append(timed(cmd, env))
        shutil.rmtree(run_dir, ignore_errors=True)
    return statistics.median(times)


def newcomer(work):
    """README's first path on a fresh clone: clone, configure, build as scripts/demo.sh, run the demo."""
    clone = work / "fresh"
    build = clone / "build-demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "HUBKERN_"))}
    steps = []
    t = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    steps.append(("git clone", time.perf_counter() - t))
    t = time.perf_counter()
    subprocess.run(["cmake", "-S", clone, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DHK_BUILD_TESTS=OFF",
                    "-DHK_KERNELS_CUDA=OFF"], check=True, capture_output=True, env=env)
    steps.append(("configure", time.perf_counter() - t))
    t = time.perf_counter()
    subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)], check=True, capture_output=True,
                   env=env)
    steps.append(("build", time.perf_counter() - t))
    # the demo minus its set-up step (apt-get / pip: installed here); it finds the build just made
    demo = (clone / "scripts" / "demo.sh").read_text().replace('"$root/scripts/setup.sh"', "true")
    t = time.perf_counter()
    r = subprocess.run(["bash", "-c", demo, str(clone / "scripts" / "demo.sh")], env={**env, "BUILD_DIR": str(build)},
                       capture_output=True, text=True, cwd=clone)  # $0: the demo finds the clone from it
    if r.returncode != 0 or "demo ok" not in r.stdout:
        raise RuntimeError(f"demo failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    steps.append(("demo (publish, serve, pull, get, call)", time.perf_counter() - t))
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--newcomer", action="store_true", help="also time README's path from a fresh clone")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    hubkern = str(build / "cli" / "hubkern")
    variant_src = str(build / "kernels" / "rmsnorm" / "hub")
    if not list(pathlib.Path(variant_src).glob("build/tvm-ffi*-cpu-*")):
        sys.exit(f"cli_timings: no staged RMSNorm CPU variant in {variant_src} (build with the kernels)")
    work = pathlib.Path(tempfile.mkdtemp(prefix="hk-cli-timings-", dir=a.workdir))
    os.environ["HUBKERN_BIN"] = hubkern  # the helpers' publish and serve run this build's hubkern
    from hk_serve_helpers import Server, publish

    publish(variant_src, REPO, "v1", work / "store")  # as scripts/demo.sh: the staged variant, branch v1
    mirror = Server(work / "store", "--trust", "hubkern")
    try:
        filled = work / "filled"  # what cache ls / verify list: the kernel, pulled by each client
        env = clean_env(mirror.url, filled, work / "hf_home")
        timed([hubkern, "pull", REPO, "--version", "1", "--backend", "cpu", "-q"], env)
        out = []
        for op, cmd, baselines, kind in rows(hubkern, variant_src):
            h = median_time(cmd, kind, mirror, work, a.runs, filled)
            base = [(name, median_time(c, kind, mirror, work, a.runs, filled)) for name, c in baselines]
            out.append((op, h, base))
            print(f"  {op}: done", file=sys.stderr)
    finally:
        mirror.stop()
    print(f"CLI timings, median of {a.runs} runs (seconds, whole process); mirror {REPO} on loopback\n")
    print("| operation | hubkern | baseline | baseline s | baseline / hubkern |")
    print("|---|---:|---|---:|---:|")
    for op, h, base in out:
        if not base:
            print(f"| {op} | {h:.3f} | (no equivalent) | | |")
        for i, (name, b) in enumerate(base):
            print(f"| {op if i == 0 else ''} | {f'{h:.3f}' if i == 0 else ''} | `{name}` | {b:.3f} | {b / h:.1f}x |")
    if a.newcomer:
        steps = newcomer(work)
        print("\nNewcomer path (README's first command from a fresh clone to a loaded, called kernel):\n")
        print("| step | s |")
        print("|---|---:|")
        for name, s in steps:
            print(f"| {name} | {s:.1f} |")
        print(f"| total | {sum(s for _, s in steps):.1f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
