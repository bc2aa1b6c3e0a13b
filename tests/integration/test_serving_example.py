"""examples/serving (C++17 over hubkern.hpp) against a loopback mirror: it loads hubkern/rmsnorm v1
once, calls it from four threads, and when a new commit is published on branch v1 it picks it up
without a restart: the reload is announced, calls go on across the swap on both commits, none
fails and every result matches the float64 reference. A kernel that does not exist fails at start
with the hk error name and message carried by hubkern::error."""
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time

import pytest

from hk_serve_helpers import Server, publish

BUILD = pathlib.Path(os.environ["HK_BUILD_DIR"])
HUB_SRC = BUILD / "kernels" / "rmsnorm" / "hub"
VARIANT = "tvm-ffi01-cpu-x86_64-linux"
SERVING = BUILD / "examples" / "hk-serving"


def clean_env(cache):
    e = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_TOKEN", "KERNELS_CACHE", "HUBKERN_FRESHNESS_S"):
        e.pop(k, None)
    e.update(HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS="1", OMP_NUM_THREADS="1",
             HUBKERN_RETRY_BASE_MS="1")
    return e


class Lines:
    """stdout of a process, line by line, readable with a deadline."""

    def __init__(self, proc):
        self.lines, self.cv = [], threading.Condition()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc):
        for line in proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()

    def wait_for(self, pattern, timeout):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    m = re.fullmatch(pattern, line)
                    if m:
                        return m
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no line matching {pattern!r} in {timeout} s; got {self.lines}")
                self.cv.wait(left)


@pytest.fixture()
def mirror(tmp_path):
    if not SERVING.exists():
        pytest.skip("hk-serving was not built (no C++ compiler)")
    assert (HUB_SRC / "build" / VARIANT / "metadata.json").is_file(), "build the rmsnorm_hub_variants target"
    src = tmp_path / "src"
    shutil.copytree(HUB_SRC, src, symlinks=True)
    store = tmp_path / "store"
    c1 = publish(src, "hubkern/rmsnorm", "v1", store)
    srv = Server(store, "--trust", "hubkern")
    yield srv, src, store, c1
    srv.stop()


def test_serving_picks_up_a_new_commit_without_restart(mirror, tmp_path):
    srv, src, store, c1 = mirror
    proc = subprocess.Popen([str(SERVING), "--repo", "hubkern/rmsnorm", "--version", "1", "--threads", "4",
                             "--poll-ms", "200", "--backend", "cpu", "--endpoint", srv.url,
                             "--cache", str(tmp_path / "cache")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(tmp_path / "cache"))
    try:
        out = Lines(proc)
        m = out.wait_for(r"loaded hubkern/rmsnorm ([0-9a-f]{40}) (\S+)", 60)
        assert m.group(1) == c1 and m.group(2) == VARIANT
        time.sleep(0.5)  # calls on the first commit

        # a kernel update: a new commit on v1 (the variant's files unchanged, the repo's README new)
        (src / "README.md").write_text("rmsnorm, second release\n")
        c2 = publish(src, "hubkern/rmsnorm", "v1", store)
        assert c2 != c1
        out.wait_for(re.escape(f"reloaded {c1} -> {c2}"), 30)
        time.sleep(0.5)  # calls on the second commit
        proc.stdin.close()
        rc = proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print("\n".join(out.lines))  # pytest -s shows the run
    assert rc == 0, err
    calls = {m.group(1): int(m.group(2))
             for m in (re.fullmatch(r"calls ([0-9a-f]{40}) (\d+)", line) for line in out.lines) if m}
    assert calls.get(c1, 0) > 0 and calls.get(c2, 0) > 0, out.lines
    summary = out.wait_for(r"summary calls=(\d+) failed=(\d+) wrong=(\d+) reloads=(\d+) .*", 1)
    assert summary.group(2) == "0" and summary.group(3) == "0", out.lines
    assert summary.group(4) == "1", out.lines


def test_serving_reports_a_missing_kernel_with_its_code(mirror, tmp_path):
    srv = mirror[0]
    r = subprocess.run([str(SERVING), "--repo", "hubkern/nosuch", "--version", "1", "--backend", "cpu",
                        "--endpoint", srv.url, "--cache", str(tmp_path / "cache")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                       env=clean_env(tmp_path / "cache"))
    assert r.returncode == 1
    assert "[HK_ERR_REPO_NOT_FOUND]" in r.stderr and "hubkern/nosuch" in r.stderr, r.stderr
