"""Helpers to start `hubkern serve` and run `hubkern publish` from Python tests and benchmarks.

Import with the tests' directory on sys.path (pytest does that for tests/integration).
"""

import contextlib
import hashlib
import os
import pathlib
import re
import socket
import subprocess
import threading
import time

SOURCE_DIR = pathlib.Path(os.environ.get("HK_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


BUILD_DIR = pathlib.Path(os.environ.get("HK_BUILD_DIR", SOURCE_DIR / "build"))


def kernels_built() -> bool:
    """False when this build was configured with HK_BUILD_KERNELS=OFF: no staged kernel variants."""
    cache = BUILD_DIR / "CMakeCache.txt"
    return not (cache.exists() and re.search(r"^HK_BUILD_KERNELS:BOOL=OFF$", cache.read_text(), re.M))


def python_clients_env(**extra) -> dict:
    """The environment for the real Python clients (huggingface_hub, kernels): none of the caller's
    HF_*, HUGGING*, KERNELS_* or LOCAL_KERNELS settings, Xet and progress bars off, then extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "LOCAL_KERNELS"))}
    env.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)
    return env


def hubkern_env(url, cache, **extra) -> dict:
    """The environment for a hubkern run against mirror `url` and cache `cache`: none of the
    caller's HF_*, HUGGING*, KERNELS_*, LOCAL_KERNELS or HUBKERN_SIG* settings, fast retries,
    progress bars off, then extra (values made strings)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING", "KERNELS_", "LOCAL_KERNELS", "HUBKERN_SIG"))}
    env.update(HF_ENDPOINT=url, HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS="1", HUBKERN_RETRY_BASE_MS="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def hubkern_bin() -> str:
    b = os.environ.get("HUBKERN_BIN")
    if b:
        return b
    return str(BUILD_DIR / "cli" / "hubkern")


NO_TEST_HOOKS = ("this hubkern was built without HK_TEST_HOOKS, so `serve` has no fault injection "
                 "(--fault-cut-after); configure with -DHK_TEST_HOOKS=ON (scripts/test.sh does) to run this test")


def serve_has_test_hooks(binary=None) -> bool:
    """Whether `hubkern serve` was built with the test hooks (its --help lists --fault-cut-after)."""
    out = subprocess.run([binary or hubkern_bin(), "serve", "--help"], capture_output=True, text=True).stdout
    return "--fault-cut-after" in out


def run_hubkern(*args, check=True, env=None):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, check=check, env=env)


def publish(src, repo_id, branch, cache, *extra) -> str:
    """Run `hubkern publish`; return the commit id it prints."""
    p = run_hubkern("publish", src, repo_id, "--branch", branch, "--cache", cache, *extra)
    commit = p.stdout.strip()
    assert len(commit) == 40, (p.stdout, p.stderr)
    return commit


def two_commit_store(tmp_path, repo_id):
    """The memo tests' store: src/a.txt published as "one\n" to main (c1), then as "two\n" to other
    (c2). Returns (src, store, c1, c2); src is left holding "two\n" for later publishes."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"one\n")
    store = tmp_path / "store"
    c1 = publish(str(src), repo_id, "main", str(store))
    (src / "a.txt").write_bytes(b"two\n")
    c2 = publish(str(src), repo_id, "other", str(store))
    return src, store, c1, c2


def metric_value(text, series):
    """The value of one series (a name with its labels, as /metrics writes it) in Prometheus text,
    as an int; None when the series is absent."""
    m = re.search(r"^%s (\d+)$" % re.escape(series), text, re.M)
    return int(m.group(1)) if m else None


def keepalive_get(conn, path):
    """GET on a kept-alive http.client connection: (status, body)."""
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


def timed_get(url, timeout=10):
    """GET url: (status, headers, body, seconds), an HTTP error status answered like any other."""
    import urllib.error
    import urllib.request
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read(), time.monotonic() - t0


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (
        hashlib.sha256(data).hexdigest().encode(),
        len(data),
    )


class Server:
    """`hubkern serve --port 0` on loopback; .url is its base URL; stderr goes to .log_lines."""

    def __init__(self, cache, *args, env=None, public_url=False):
        port = "0"
        if public_url:  # links and redirects absolute: the port must be known before the start
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
            args = ("--public-url", f"http://127.0.0.1:{port}", *args)
        cmd = [hubkern_bin(), "serve", "--cache", str(cache), "--host", "127.0.0.1", "--port", port, *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on http://"):
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.proc.kill()
            raise RuntimeError(f"hubkern serve did not start: {line!r} {err}")
        self.url = line.split(" ", 2)[2]
        self.log_lines = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log_lines.append(line.rstrip("\n"))

    def stop(self, timeout=10) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(timeout=timeout)
        self._t.join(timeout=timeout)
        return rc

    def wait_log(self, needle, timeout=5.0) -> bool:
        end = time.time() + timeout
        while time.time() < end:
            if any(needle in line for line in self.log_lines):
                return True
            time.sleep(0.05)
        return False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        rc = self.stop()
        if exc_type is None:
            assert rc == 0, "hubkern serve did not exit cleanly:\n" + "\n".join(self.log_lines[-30:])


# The Python kernels package resolving the dependency tree of kernel argv[1] (version 1, cpu, no
# remote code trusted), as the parity tests compare it: one JSON line, {"nodes": [[repo_id,
# revision, variant], ...]} depth-first, or {"error": "Type: message"}.
_KERNELS_TREE_DEF = r"""
import json, sys
from kernels._rust import KernelDependency, KernelVersion
from kernels.deps import resolve_kernel_tree
from kernels.hf_hub import _get_hf_api
from kernels.resolver import HubResolver
def walk(n, out):
    loc = n.location
    out.append([loc.repo_id, loc.revision, loc.variant_str])
    for d in n.deps.values():
        walk(d, out)
def tree(repo):
    try:
        t = resolve_kernel_tree(_get_hf_api(), KernelDependency(repo, KernelVersion.Version(1)), "cpu",
                                HubResolver(trust_remote_code=False))
        out = []
        walk(t, out)
        return {"nodes": out}
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)}
"""
KERNELS_TREE_PY = _KERNELS_TREE_DEF + "print(json.dumps(tree(sys.argv[1])))\n"
# The same for every kernel of argv[1:] in one process (importing kernels is most of a run's time):
# one JSON line, {repo_id: answer}.
KERNELS_TREES_PY = _KERNELS_TREE_DEF + "print(json.dumps({r: tree(r) for r in sys.argv[1:]}))\n"


# ---- the set-up the pull and cache tests share (faultproxy's mirror and publisher) --------------

# a test's `hubkern` runs without the caller's token or offline setting, with fast retries
ISOLATED_UNSET = ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
ISOLATED_ENV = {"HUBKERN_RETRY_BASE_MS": "20", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}


def run_isolated(args, env=None, check=True, timeout=120, **kw):
    """`hubkern ARGS` (faultproxy.run_cli) in the isolated environment, plus env."""
    import faultproxy

    return faultproxy.run_cli(args, env=env, check=check, unset=ISOLATED_UNSET, base_env=ISOLATED_ENV,
                              timeout=timeout, **kw)


@contextlib.contextmanager
def published_mirror(base, repo_id, variant, files, lfs_threshold=None, trust="org"):
    """A store under base holding branch v1 of repo_id, build/<variant>/ of files {relpath: bytes}
    (faultproxy.make_variant), published with --lfs-threshold when given and served on loopback by
    `hubkern serve --trust TRUST`; yields the running faultproxy.Server (its .url)."""
    import faultproxy

    store, src = str(pathlib.Path(base) / "store"), str(pathlib.Path(base) / "src")
    faultproxy.make_variant(src, variant, files)
    faultproxy.publish(src, repo_id, "v1", store, ["--lfs-threshold", str(lfs_threshold)] if lfs_threshold else [])
    with faultproxy.Server(store, ["--trust", trust]) as srv:
        yield srv


SCALE_VARIANT = "tvm-ffi01-cpu-x86_64-linux"


def make_files_kernel(src, n: int, variant: str = SCALE_VARIANT) -> None:
    """A kernel source tree whose one variant holds n tiny distinct .py files in 100 folders, plus
    __init__.py and a metadata.json whose digest lists them all (the files-per-variant scaling
    test and benchmark, issue 25)."""
    import base64
    import json
    vdir = os.path.join(str(src), "build", variant)
    files = {}
    for d in range(min(n, 100)):
        os.makedirs(os.path.join(vdir, f"d{d:02d}"), exist_ok=True)
    for i in range(n):
        rel = f"d{i % 100:02d}/f{i:06d}.py"
        body = f"# {i}\n".encode()
        with open(os.path.join(vdir, rel), "wb") as fh:
            fh.write(body)
        files[rel] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    init = b"# scale\n"
    with open(os.path.join(vdir, "__init__.py"), "wb") as fh:
        fh.write(init)
    files["__init__.py"] = base64.b64encode(hashlib.sha256(init).digest()).decode()
    meta = {"name": "fileskern", "id": "_fileskern_cpu_0000000", "version": 1, "license": "MIT",
            "python-depends": [], "backend": {"type": "cpu"}, "digest": {"algorithm": "sha256", "files": files}}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)


# Forks cmd, waits for it, prints its CPU s, wall s and peak RSS KiB. A child's peak RSS counts the
# RSS of the process it was forked from (Linux keeps the larger across fork and exec), so cmd is
# forked from this small interpreter (python3 -S: ~9 MiB) rather than from the caller (pytest, tens
# of MiB), and what a pull needs above ~9 MiB is what is measured.
_RUNNER = ("import os, sys, time\n"
           "t = time.perf_counter()\n"
           "pid = os.fork()\n"
           "if pid == 0:\n"
           "    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)\n"
           "    try: os.execvp(sys.argv[1], sys.argv[1:])\n"
           "    finally: os._exit(127)\n"
           "_, status, ru = os.wait4(pid, 0)\n"
           "print(ru.ru_utime + ru.ru_stime, time.perf_counter() - t, ru.ru_maxrss, os.waitstatus_to_exitcode(status))\n")


def timed_run(cmd, env=None, strace_out=None):
    """Run cmd to its end, its stdout discarded; (CPU s = user+sys of cmd and its threads, wall s,
    peak RSS MiB), from its rusage (wait4). With strace_out, cmd runs under `strace -c -f -o
    strace_out` (its counts; the times are then strace's). Raises on a non-zero exit."""
    import sys
    if strace_out:
        cmd = ["strace", "-c", "-f", "-o", str(strace_out), *cmd]
    p = subprocess.run([sys.executable, "-S", "-c", _RUNNER, *map(str, cmd)], capture_output=True, text=True, env=env)
    fields = p.stdout.split()
    if p.returncode != 0 or len(fields) != 4 or fields[3] != "0":
        raise RuntimeError(f"{cmd[0]} failed ({fields[3] if len(fields) == 4 else p.returncode}): {p.stderr[-2000:]}")
    return float(fields[0]), float(fields[1]), int(fields[2]) / 1024


def strace_total_calls(path) -> int:
    """The total of calls in a `strace -c` summary."""
    with open(path) as fh:
        for line in fh:
            f = line.split()
            if f and f[-1] == "total":  # % time, seconds, usecs/call, calls, [errors,] total
                return int(f[3])
    raise RuntimeError(f"no total in {path}")
