"""A snapshot is visible only when its bytes are durable (issue 25, item 1), without one fsync per
blob in the transfer loop.

- Order of the syscalls (strace -f -y): every blob of the pull is fdatasync'd under its final name
  blobs/<etag>, then blobs/ is fsynced, then the staged variant's folder, and only then the rename
  that publishes build/<variant> into snapshots/<commit>/; the folder it lands in is fsynced before
  the ref is renamed into refs/. This is the power-loss argument made checkable without a
  power cut: whatever the disk has kept when the power goes, a ref or a published variant names
  only bytes that an fsync had already returned for.
- kill -9 at random points of many pulls (fresh and reused caches): the cache never shows a
  published variant or a ref whose files are missing or wrong, and the next pull completes.
"""
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import time

import pytest

from faultproxy import hubkern_bin, run_cli
from hk_serve_helpers import ISOLATED_ENV, published_mirror, serve_has_test_hooks

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/durable"
FILES = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n"}
for _i in range(8):
    FILES[f"lib{_i}.bin"] = os.urandom(1_500_000 + _i * 100_000)
FILES["sub/tiny.bin"] = os.urandom(5000)
SHA = {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with published_mirror(tmp_path_factory.mktemp("hub"), REPO, V, FILES, lfs_threshold=1000) as srv:
        yield srv


def pull_cmd(url, cache):
    return [hubkern_bin(), "pull", REPO, "--version", "1", "--variant", V, "-q", "--endpoint", url, "--cache", cache]


def repo_dir(cache):
    return os.path.join(cache, "kernels--org--durable")


def variant_ok(vdir):
    """Every file of the variant present, reading back the published bytes."""
    for rel, sha in SHA.items():
        p = os.path.join(vdir, rel)
        if not os.path.exists(p):
            return f"{rel} missing"
        with open(p, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != sha:
                return f"{rel} has wrong bytes"
    return None


def check_visible_state(cache):
    """What a reader (loader, Python, offline pull) can see must be whole: each published variant
    and the snapshot each ref names. Returns a list of problems."""
    problems = []
    rd = repo_dir(cache)
    snaps = os.path.join(rd, "snapshots")
    for commit in os.listdir(snaps) if os.path.isdir(snaps) else []:
        vdir = os.path.join(snaps, commit, "build", V)
        if os.path.lexists(vdir):
            why = variant_ok(vdir)
            if why:
                problems.append(f"published {commit[:12]}/build/{V}: {why}")
    ref = os.path.join(rd, "refs", "v1")
    if os.path.exists(ref):
        commit = open(ref).read().strip()
        vdir = os.path.join(snaps, commit, "build", V)
        why = variant_ok(vdir) if os.path.isdir(vdir) else "its variant is not published"
        if why:
            problems.append(f"refs/v1 -> {commit[:12]}: {why}")
    return problems


def whole_calls(trace):
    """The lines of an `strace -f` trace with every call that another thread's output interrupted
    ("name(args <unfinished ...>", later "<... name resumed>rest") joined back into one line, in
    the order the calls returned. Any call can be cut so, a rename as well as a flush: the pull
    flushes on a thread of its own while its main thread renames."""
    pending = {}  # pid -> the first half of its interrupted call
    for line in open(trace):
        parts = line.rstrip("\n").split(None, 1)
        if len(parts) < 2:
            continue
        pid, rest = parts
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[:-len("<unfinished ...>")].rstrip()
            continue
        m = re.match(r"<\.\.\. \w+ resumed>(.*)", rest)
        if m:
            if pid in pending:
                yield pending.pop(pid) + m.group(1)
            continue
        yield rest


def flush_and_rename_events(trace, flushes):
    """The successful flush calls (names in the regex alternation `flushes`) and renames of an
    `strace -f -y` trace, as (kind, path[, path2]) in the order the calls returned."""
    events = []
    for call in whole_calls(trace):
        m = re.search(r"\b(" + flushes + r")\(\d+<([^>]*)>\)\s*= 0", call)
        if m:
            events.append((m.group(1), m.group(2)))
            continue
        m = re.search(r"\brename(?:at2?)?\((?:[^,]*, )?\"([^\"]*)\", (?:[^,]*, )?\"([^\"]*)\"", call)
        if m and re.search(r"\)\s*= 0", call):
            events.append(("rename", os.path.realpath(m.group(1)), os.path.realpath(m.group(2))))
    return events


def test_kill9_at_random_points_never_shows_a_broken_snapshot(hub, tmp_path):
    # how long one cold pull takes here, so that the kills land across all of it
    t = time.monotonic()
    subprocess.run(pull_cmd(hub.url, str(tmp_path / "probe")), check=True, capture_output=True,
                   env={**os.environ, **ISOLATED_ENV})
    span = max(time.monotonic() - t, 0.05)
    rng = random.Random(25)
    killed = 0
    cache = str(tmp_path / "c")
    # at least 48 rounds and 16 kills of a running pull: under load a pull's length varies, so the
    # rounds go on (at most 144) until enough kills have landed mid-pull
    for it in range(144):
        if it >= 48 and killed >= 16:
            break
        if it % 4 == 0:  # a fresh cache now and then; otherwise resume what the last kill left
            shutil.rmtree(cache, ignore_errors=True)
        p = subprocess.Popen(pull_cmd(hub.url, cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, **ISOLATED_ENV})
        time.sleep(rng.uniform(0, span))  # a resumed pull is shorter: some end first
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed += 1
        p.wait()
        problems = check_visible_state(cache)
        assert not problems, f"after kill -9 #{it} at a random point: {problems}"
    assert killed >= 16, f"only {killed} of {it + 1} pulls were still running when killed (span {span:.3f} s)"
    # and the cache is usable: the next pull completes and publishes the right bytes
    run_cli(pull_cmd(hub.url, cache)[1:], base_env=ISOLATED_ENV)
    assert check_visible_state(cache) == []
    assert variant_ok(os.path.join(repo_dir(cache), "snapshots", os.listdir(os.path.join(repo_dir(cache), "snapshots"))[0],
                                   "build", V)) is None


def no_leak_check_under_ptrace():
    """LeakSanitizer cannot run under ptrace (strace): in a sanitizer build the traced pull keeps
    ASan's other checks and leaves the leak check to the untraced tests."""
    opts = os.environ.get("ASAN_OPTIONS", "")
    return {"ASAN_OPTIONS": (opts + ":" if opts else "") + "detect_leaks=0"}


def strace_ok():
    if not shutil.which("strace"):
        return False
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "true"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not strace_ok(), reason="strace is missing or ptrace is not permitted here")
def test_blobs_and_folders_are_flushed_before_the_variant_and_the_ref_appear(hub, tmp_path):
    cache = str(tmp_path / "c")
    trace = str(tmp_path / "trace")
    r = subprocess.run(["strace", "-f", "-y", "-qq", "-o", trace, "-e",
                        "trace=fsync,fdatasync,rename,renameat,renameat2"] + pull_cmd(hub.url, cache),
                       capture_output=True, text=True, env={**os.environ, **ISOLATED_ENV, **no_leak_check_under_ptrace()})
    assert r.returncode == 0, r.stderr
    rd = os.path.realpath(repo_dir(cache))
    events = flush_and_rename_events(trace, "fsync|fdatasync")

    def first(pred):
        for i, e in enumerate(events):
            if pred(e):
                return i
        return None

    published = os.path.join(rd, "snapshots")
    i_publish = first(lambda e: e[0] == "rename" and e[2].startswith(published) and e[2].endswith("/build/" + V))
    i_ref = first(lambda e: e[0] == "rename" and e[2] == os.path.join(rd, "refs", "v1"))
    assert i_publish is not None and i_ref is not None, events[-6:]
    assert i_publish < i_ref
    blobs = os.path.join(rd, "blobs")
    names = sorted(os.listdir(blobs))  # every blob of the pull (sha256 for LFS files, git blob sha1 else)
    assert len(names) == len(FILES) + 1, names  # + metadata.json
    for name in names:
        i_named = first(lambda e: e[0] == "rename" and e[2] == os.path.join(blobs, name))
        i_synced = first(lambda e: e[0] in ("fsync", "fdatasync") and e[1] == os.path.join(blobs, name))
        assert i_named is not None, f"blob {name} never renamed into blobs/"
        assert i_synced is not None and i_named < i_synced < i_publish, \
            f"blob {name} not flushed under its final name before the variant was published: {events[-6:]}"
    last_blob_sync = max(first(lambda e, s=s: e[0] in ("fsync", "fdatasync") and e[1] == os.path.join(blobs, s))
                         for s in names)
    i_blobdir = first(lambda e: e[0] == "fsync" and e[1] == blobs)
    assert i_blobdir is not None and last_blob_sync < i_blobdir < i_publish, "blobs/ not fsynced between the blobs and the publish"
    staged_src = events[i_publish][1]
    i_staged = first(lambda e: e[0] == "fsync" and e[1] == staged_src)
    assert i_staged is not None and i_staged < i_publish, "staged variant folder not fsynced before it was published"
    build_dir = os.path.dirname(events[i_publish][2])
    i_build = first(lambda e: e[0] == "fsync" and e[1] == build_dir)
    assert i_build is not None and i_publish < i_build < i_ref, "the folder holding the published variant not fsynced before the ref"
    assert variant_ok(events[i_publish][2]) is None


MANY = {f"m/f{i:03d}.py": f"# {i}\n".encode() for i in range(80)}  # >= HK__SYNCFS_MIN_FILES small blobs
MANY["__init__.py"] = b"from ._ops import *\n"


@pytest.mark.skipif(not strace_ok(), reason="strace is missing or ptrace is not permitted here")
@pytest.mark.parametrize("flush", ["syncfs", "each"])
def test_many_small_blobs_flushed_before_the_variant_either_way(tmp_path, flush):
    """A pull of many small blobs may flush them with one syncfs of the cache's file system
    (util/durable.c's rule; HUBKERN_TEST_FLUSH forces either way in a test build): then that
    syncfs comes after the last blob's rename into blobs/ and before the publish; else every blob
    is fdatasync'd there. A build without test hooks ignores the variable and follows the rule:
    the test then accepts whichever it took, but each blob must be covered."""
    repo = "org/many"
    with published_mirror(tmp_path / "hub", repo, V, MANY) as srv:
        cache, trace = str(tmp_path / "c"), str(tmp_path / "trace")
        cmd = [hubkern_bin(), "pull", repo, "--version", "1", "--variant", V, "-q", "--endpoint", srv.url, "--cache", cache]
        r = subprocess.run(["strace", "-f", "-y", "-qq", "-o", trace, "-e",
                            "trace=fdatasync,syncfs,rename,renameat,renameat2"] + cmd, capture_output=True, text=True,
                           env={**os.environ, **ISOLATED_ENV, **no_leak_check_under_ptrace(), "HUBKERN_TEST_FLUSH": flush})
        assert r.returncode == 0, r.stderr
    rd = os.path.realpath(os.path.join(cache, "kernels--org--many"))
    blobs = os.path.join(rd, "blobs")
    events = flush_and_rename_events(trace, "syncfs|fdatasync")
    i_publish = next(i for i, e in enumerate(events) if e[0] == "rename" and e[2].endswith("/build/" + V))
    names = [n for n in os.listdir(blobs) if "." not in n]
    assert len(names) == len(MANY) + 1, names  # + metadata.json
    renamed = {e[2]: i for i, e in enumerate(events) if e[0] == "rename"}
    syncfs = [i for i, e in enumerate(events) if e[0] == "syncfs" and e[1] == blobs]
    hooks = serve_has_test_hooks()
    if flush == "syncfs" and hooks:
        assert syncfs, f"no syncfs of {blobs}: {events[-6:]}"
    for n in names:
        p = os.path.join(blobs, n)
        i_named = renamed.get(p)
        assert i_named is not None, f"blob {n} never renamed into blobs/"
        synced = [i for i, e in enumerate(events) if e[0] == "fdatasync" and e[1] == p] + syncfs
        assert any(i_named < i < i_publish for i in synced), f"blob {n} not flushed between its rename and the publish"
    if flush == "each" and hooks:
        assert not syncfs, "HUBKERN_TEST_FLUSH=each still ran syncfs"
