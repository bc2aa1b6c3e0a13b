"""The client's request economy (issue 13), counted from the mirror's --access-log:

- a cold `hubkern pull` sends at most files + 2 requests (refs, which carries the publisher's trust
  answer on a hubkern mirror, and one recursive listing of the commit that also says there is no
  kernel-status.toml), a warm one at most 1 (the refs);
- a repeat hk_get_kernel of a kernel loaded in the process sends nothing within the freshness
  window (hk_get_kernel_options.freshness_s), asks again after it, and then sees a moved branch;
- with the window off (HUBKERN_FRESHNESS_S=0) every get asks again, but within one get each
  question is asked once (files + 2 cold, 2 warm).

The loaded kernel is our RMSNorm tvm-ffi CPU variant; tests/helpers/get_repeat.c drives the gets."""
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from hk_serve_helpers import Server, hubkern_bin, publish

BUILD = pathlib.Path(os.environ["HK_BUILD_DIR"])
HUB_SRC = BUILD / "kernels" / "rmsnorm" / "hub"
VARIANT = "tvm-ffi01-cpu-x86_64-linux"
REPO = "econ/rmsnorm"
GET_REPEAT = BUILD / "tests" / "hk-get-repeat"


def clean_env(**extra):
    e = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_TOKEN", "KERNELS_CACHE", "HUBKERN_FRESHNESS_S"):
        e.pop(k, None)
    e.update(HF_HUB_DISABLE_IMPLICIT_TOKEN="1", HUBKERN_RETRY_BASE_MS="20", OMP_NUM_THREADS="1")
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Mirror:
    def __init__(self, store):
        self.srv = Server(store, "--trust", "econ", "--access-log")

    def count(self):
        """Access-log lines so far, once the log has stopped growing (lines follow the answers)."""
        last, stable_since = -1, time.time()
        while True:
            n = sum(1 for line in self.srv.log_lines if " access " in line)
            if n != last:
                last, stable_since = n, time.time()
            elif time.time() - stable_since > 0.3:
                return n
            time.sleep(0.05)

    def lines(self, since):
        return [line for line in self.srv.log_lines if " access " in line][since:]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    assert (HUB_SRC / "build" / VARIANT / "metadata.json").is_file(), "build the rmsnorm_hub_variants target"
    store = tmp_path_factory.mktemp("store")
    commit = publish(HUB_SRC, REPO, "v1", store)
    m = Mirror(store)
    m.store, m.commit = store, commit
    yield m
    m.srv.stop()


def pull(url, cache, **env):
    r = subprocess.run([hubkern_bin(), "pull", REPO, "--version", "1", "--variant", VARIANT, "--json", "--endpoint",
                        url, "--cache", str(cache)], capture_output=True, text=True, env=clean_env(**env), timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_cold_pull_at_most_files_plus_2_and_warm_at_most_1(mirror, tmp_path):
    cache = tmp_path / "c"
    n0 = mirror.count()
    out = pull(mirror.srv.url, cache)
    n1 = mirror.count()
    files = len(out["files"])
    assert out["files_downloaded"] == files > 0
    cold = mirror.lines(n0)
    assert n1 - n0 <= files + 2, "\n".join(cold)
    assert not any("/overview" in line or "kernel-status.toml" in line for line in cold), "\n".join(cold)
    warm = pull(mirror.srv.url, cache)
    n2 = mirror.count()
    assert warm["files_downloaded"] == 0 and warm["commit"] == out["commit"]
    assert n2 - n1 <= 1, "\n".join(mirror.lines(n1))


class Getter:
    """One hk-get-repeat process: .get() runs hk_get_kernel once more and returns (commit, same)."""

    def __init__(self, url, cache, freshness=None, **env):
        args = [str(GET_REPEAT), url, str(cache), REPO, "1"] + ([str(freshness)] if freshness is not None else [])
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=clean_env(**env))

    def get(self):
        self.p.stdin.write("get\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        assert line and line[0] == "ok", (line, self.p.stderr.read() if self.p.poll() is not None else "")
        return line[1], line[2] == "same"

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=30) == 0, self.p.stderr.read()


def test_repeat_get_in_window_sends_nothing_and_a_moved_branch_is_seen_after_it(mirror, tmp_path):
    cache = tmp_path / "c"
    window = 3.0
    g = Getter(mirror.srv.url, cache, freshness=window)
    try:
        n0 = mirror.count()
        commit, _ = g.get()  # cold: resolves, pulls, loads
        t_first = time.monotonic()
        assert commit == mirror.commit
        n1 = mirror.count()
        assert n1 > n0
        again, same = g.get()  # in the window: the loaded handle, no request at all
        assert time.monotonic() - t_first < window, "the box was too slow to stay inside the window"
        assert (again, same) == (commit, True)
        assert mirror.count() == n1, "\n".join(mirror.lines(n1))
        # the branch moves (a new commit on v1: the same build plus a README at the root)
        src = tmp_path / "src2"
        shutil.copytree(HUB_SRC, src)
        (src / "README.md").write_text("moved\n")
        moved = publish(src, REPO, "v1", mirror.store)
        assert moved != commit
        time.sleep(max(0.0, window - (time.monotonic() - t_first)) + 0.5)
        n2 = mirror.count()
        after, same = g.get()  # past the window: asked again, and the new commit is found
        assert mirror.count() > n2
        assert after == moved and not same
        n3 = mirror.count()
        again, same = g.get()  # the new commit's handle, in its window: nothing asked
        assert again == moved and mirror.count() == n3, "\n".join(mirror.lines(n3))
    finally:
        g.close()


def test_window_off_asks_every_time(mirror, tmp_path):
    cache = tmp_path / "c"
    g = Getter(mirror.srv.url, cache, HUBKERN_FRESHNESS_S="0")
    try:
        n0 = mirror.count()
        g.get()
        n1 = mirror.count()
        # within one get each question is asked once, window or not: files + refs + listing
        files = sum(1 for line in mirror.lines(n0) if "/resolve/" in line)
        assert n1 - n0 <= files + 2, "\n".join(mirror.lines(n0))
        _, same = g.get()
        again = mirror.lines(n1)
        assert same and any("/refs" in line for line in again)  # every get asks again
        assert len(again) <= 2, "\n".join(again)  # refs + the commit's listing, once each
    finally:
        g.close()
