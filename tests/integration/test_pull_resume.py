"""Interrupted downloads resume, deadlines end dripping answers, an unreachable endpoint fails fast
(issue 17 items 9 and 10, issue 15 "unreachable endpoint"), through the fault proxy in front of a
real `hubkern serve`.

- Resume: a blob's partial bytes live in blobs/<etag>.incomplete (one per blob, the name
  huggingface_hub <= 1.17 resumed), kept when a pull fails on the network, a deadline or a kill -9,
  and continued with `Range: bytes=<kept>-` by the next pull after the kept bytes are re-hashed.
  Kept bytes that are no prefix of the blob (hash mismatch, 416), longer than the blob, or answered
  200 are discarded and the blob fetched again once.
- Deadlines: HUBKERN_REQUEST_TIMEOUT (an API request, every byte of its answer) and
  HUBKERN_PULL_TIMEOUT (the whole pull) end a body dripping at 4 B/s with HK_ERR_TIMEOUT naming them.
  With neither set, HUBKERN_STALL_TIMEOUT (default 30 s) ends a download that gets less than 64 KiB
  in that long (silent mid-body, or dripping), across its resumes; a slow but moving one completes.
- Unreachable: a refused connection fails within about a second (two quick retries, logged), while
  a burst of 503 answers still gets the patient back-off and recovers."""
import ctypes
import glob
import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time

import pytest

from faultproxy import FaultProxy, Rule, hubkern_bin, run_cli
from hk_serve_helpers import published_mirror, run_isolated as run

V = "tvm-ffi01-cpu-x86_64-linux"
BIG = os.urandom(8_000_000)
SHA = hashlib.sha256(BIG).hexdigest()
BIG_RE = f"/resolve/[0-9a-f]+/build/{V}/big.bin"
REFS_RE = "/api/kernels/org/resume/refs"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with published_mirror(tmp_path_factory.mktemp("hub"), "org/resume", V, {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "big.bin": BIG}, lfs_threshold=1000000) as srv:
        yield srv


def pull_args(url, cache):
    return ["pull", "org/resume", "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache", cache]


def pull(url, cache, env=None, check=True, timeout=120):
    return run(pull_args(url, cache), env=env, check=check, timeout=timeout)


def blobs_dir(cache):
    return os.path.join(cache, "kernels--org--resume", "blobs")


def partials(cache):
    """Every temp file of the big blob (the deterministic name and any unique ones)."""
    return sorted(glob.glob(os.path.join(blobs_dir(cache), SHA + "*.incomplete")))


def plant(cache, data):
    os.makedirs(blobs_dir(cache), exist_ok=True)
    with open(os.path.join(blobs_dir(cache), SHA + ".incomplete"), "wb") as fh:
        fh.write(data)


def big_content(out):
    with open(os.path.join(out["snapshot"], "build", V, "big.bin"), "rb") as fh:
        return fh.read()


class FolderEvents:
    """Every name made, renamed or removed in one folder, as inotify reports it (a record, not a
    sample: a name that lives for a microsecond is in it too, and nothing depends on when it is
    read). Events queue in the kernel until read(); IN_Q_OVERFLOW would mean some were lost."""
    IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE, IN_Q_OVERFLOW = 0x40, 0x80, 0x100, 0x200, 0x4000

    def __init__(self, folder):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        mask = self.IN_MOVED_FROM | self.IN_MOVED_TO | self.IN_CREATE | self.IN_DELETE
        assert libc.inotify_add_watch(self.fd, os.fsencode(folder), mask) >= 0, os.strerror(ctypes.get_errno())

    def read(self):
        """[(kind, name, cookie)] in order, kind one of create / moved_from / moved_to / delete."""
        kinds = {self.IN_CREATE: "create", self.IN_MOVED_FROM: "moved_from", self.IN_MOVED_TO: "moved_to",
                 self.IN_DELETE: "delete"}
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            off = 0
            while off < len(buf):
                _, mask, cookie, n = struct.unpack_from("iIII", buf, off)
                assert not mask & self.IN_Q_OVERFLOW, "inotify queue overflow: events were lost"
                name = os.fsdecode(buf[off + 16:off + 16 + n].rstrip(b"\0"))
                out += [(k, name, cookie) for bit, k in kinds.items() if mask & bit]
                off += 16 + n

    def close(self):
        os.close(self.fd)


def assert_clean(cache):
    v = run(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1].startswith("clean"), v.stdout
    assert "leftover" not in v.stdout, v.stdout
    assert partials(cache) == []


# ---- resume -----------------------------------------------------------------------------------
def test_kill9_mid_download_then_the_next_pull_resumes(hub, tmp_path):
    cache = str(tmp_path / "c")
    env = dict(os.environ, HUBKERN_RETRY_BASE_MS="20", HF_HUB_DISABLE_IMPLICIT_TOKEN="1")
    env.pop("HF_HUB_OFFLINE", None)
    drip = Rule("drip", BIG_RE, count=None, rate=1_500_000, chunk=32768)
    with FaultProxy(hub.url, rules=[drip]) as px:
        kept = []
        for threshold in (1_500_000, 3_500_000, 5_500_000):
            p = subprocess.Popen([hubkern_bin(), *pull_args(px.url, cache)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 30:
                got = partials(cache)
                if got and os.path.getsize(got[0]) >= threshold:
                    break
                time.sleep(0.02)
            p.send_signal(signal.SIGKILL)
            p.wait()
            got = partials(cache)
            assert got == [os.path.join(blobs_dir(cache), SHA + ".incomplete")], got  # one temp file, not one per try
            kept.append(os.path.getsize(got[0]))
        assert kept[0] >= 1_500_000 and kept[1] > kept[0] and kept[2] > kept[1], kept
        before = len(px.requests("GET", BIG_RE))
        px.rules = []
        out = json.loads(pull(px.url, cache).stdout)
        last = px.requests("GET", BIG_RE)[before:]
        total = px.sent("GET", BIG_RE)
    assert big_content(out) == BIG
    assert len(last) == 1 and last[0]["range"] == f"bytes={kept[2]}-", last
    assert last[0]["sent"] == len(BIG) - kept[2]
    # 3 kills and a finish: about the blob's size in all, not size x attempts (each kill loses at
    # most what was in flight: the 1 MiB write-behind buffer and the socket buffers)
    assert total < len(BIG) + 3 * 2_500_000, total
    assert_clean(cache)


def test_a_pull_that_runs_out_of_time_keeps_its_bytes_for_the_next(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("drip", BIG_RE, count=None, after=3_000_000, rate=2000, chunk=200)]
    with FaultProxy(hub.url, rules=rules) as px:
        t0 = time.monotonic()
        r = pull(px.url, cache, env={"HUBKERN_PULL_TIMEOUT": "3"}, check=False, timeout=60)
        took = time.monotonic() - t0
        assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr and "HUBKERN_PULL_TIMEOUT" in r.stderr, r.stderr
        assert "deadline of 3 s" in r.stderr and "big.bin" in r.stderr
        assert 2.5 < took < 10, took
        got = partials(cache)
        assert len(got) == 1 and os.path.getsize(got[0]) > 3_000_000, got
        kept = os.path.getsize(got[0])
        first = px.sent("GET", BIG_RE)
        px.rules = []
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", BIG_RE)
    assert big_content(out) == BIG
    assert gets[-1]["range"] == f"bytes={kept}-"
    assert first + gets[-1]["sent"] <= len(BIG) + 300_000  # what was sent: once, plus what was in flight
    assert_clean(cache)


def test_cuts_within_one_pull_use_one_temp_file(hub, tmp_path):
    # Every name of the big blob made in blobs/ during the pull, from inotify: one temp file made
    # for all 5 attempts (none per try, no unique one), and no other made, renamed or removed but
    # that file on its way to the blob's name (the finished file is claimed under a unique name and
    # then renamed into place, partial.c: the same file all along, and never a new one).
    cache = str(tmp_path / "c")
    os.makedirs(blobs_dir(cache))  # there to be watched before the pull's first file
    events = FolderEvents(blobs_dir(cache))
    rules = [Rule("cut", BIG_RE, count=4, after=1_500_000)]
    try:
        with FaultProxy(hub.url, rules=rules) as px:
            p = subprocess.run([hubkern_bin(), *pull_args(px.url, cache)], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, HUBKERN_RETRY_BASE_MS="20", HF_HUB_DISABLE_IMPLICIT_TOKEN="1"))
            assert p.returncode == 0, p.stderr
            gets = px.requests("GET", BIG_RE)
            total = px.sent("GET", BIG_RE)
        seen = [e for e in events.read() if e[1].startswith(SHA)]
    finally:
        events.close()
    assert len(gets) == 5 and [g["range"] is not None for g in gets] == [False, True, True, True, True]
    assert [(k, n) for k, n, _ in seen if k in ("create", "delete")] == [("create", SHA + ".incomplete")], seen
    moves = [e for e in seen if e[0].startswith("moved")]
    assert len(moves) % 2 == 0, seen
    at = SHA + ".incomplete"  # each rename takes the one file from where the last one left it
    for (k1, src, c1), (k2, dst, c2) in zip(moves[::2], moves[1::2]):
        assert (k1, src, k2) == ("moved_from", at, "moved_to") and c1 == c2, seen
        assert re.fullmatch(SHA + r"(\.[0-9a-f]{8}\.incomplete)?", dst), seen
        at = dst
    assert at == SHA, seen  # and it ends as the blob
    assert total == len(BIG)  # every byte once
    assert_clean(cache)


def test_kept_bytes_that_are_no_prefix_are_discarded_and_fetched_again(hub, tmp_path):
    cache = str(tmp_path / "c")
    plant(cache, os.urandom(1_000_000))  # what a server that changed the file would leave
    with FaultProxy(hub.url) as px:
        r = pull(px.url, cache, env={"HUBKERN_VERBOSE": "1"})
        gets = px.requests("GET", BIG_RE)
    assert [g["range"] for g in gets] == ["bytes=1000000-", None], gets
    assert "hash mismatch" in r.stderr and "downloading it again" in r.stderr
    assert big_content(json.loads(r.stdout)) == BIG
    assert_clean(cache)


def test_kept_part_longer_than_the_blob_is_discarded(hub, tmp_path):
    cache = str(tmp_path / "c")
    plant(cache, BIG + b"tail")
    with FaultProxy(hub.url) as px:
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", BIG_RE)
    assert [g["range"] for g in gets] == [None]
    assert big_content(out) == BIG
    assert_clean(cache)


def test_a_complete_kept_part_needs_no_request(hub, tmp_path):
    cache = str(tmp_path / "c")
    plant(cache, BIG)
    with FaultProxy(hub.url) as px:
        out = json.loads(pull(px.url, cache).stdout)
        assert px.requests("GET", BIG_RE) == []
    assert big_content(out) == BIG
    assert_clean(cache)


def test_200_to_a_resume_restarts_from_zero(hub, tmp_path):
    cache = str(tmp_path / "c")
    plant(cache, BIG[:2_000_000])
    with FaultProxy(hub.url, rules=[Rule("ignore_range", BIG_RE, count=1)]) as px:
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", BIG_RE)
    assert len(gets) == 1 and gets[0]["range"] == "bytes=2000000-" and gets[0]["status"] == 200
    assert big_content(out) == BIG
    assert_clean(cache)


def test_416_to_a_resume_discards_the_kept_bytes_once(hub, tmp_path):
    cache = str(tmp_path / "c")
    plant(cache, BIG[:2_000_000])
    with FaultProxy(hub.url, rules=[Rule("answer", BIG_RE, count=1, status=416, body=b"")]) as px:
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", BIG_RE)
    assert [g["range"] for g in gets] == ["bytes=2000000-", None]
    assert big_content(out) == BIG
    assert_clean(cache)


def test_huggingface_hub_next_to_a_hubkern_partial(hub, tmp_path):
    """huggingface_hub 2.x downloads to a unique <etag>.<rand8>.incomplete and never resumes: it
    fetches the whole file, leaves hubkern's partial alone and the blob it writes is correct."""
    hf = pytest.importorskip("huggingface_hub")
    cache = str(tmp_path / "c")
    plant(cache, BIG[:3_000_000])
    with FaultProxy(hub.url) as px:
        env = {"HF_ENDPOINT": px.url, "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0"}
        code = ("import huggingface_hub as h,sys;print(h.hf_hub_download('org/resume','build/%s/big.bin',"
                "repo_type='kernel',revision='v1',cache_dir=sys.argv[1]))" % V)
        r = subprocess.run(["python3", "-c", code, cache], capture_output=True, text=True,
                           env=dict(os.environ, **env), timeout=120)
        assert r.returncode == 0, r.stderr
        gets = px.requests("GET", f"/resolve/[^/]+/build/{V}/big.bin")
    assert [g["range"] for g in gets] == [None], gets  # no resume of the kept 3 MB
    with open(r.stdout.strip(), "rb") as fh:
        assert fh.read() == BIG
    assert os.path.getsize(os.path.join(blobs_dir(cache), SHA + ".incomplete")) == 3_000_000
    del hf


# ---- deadlines --------------------------------------------------------------------------------
def test_an_api_answer_dripping_at_4_bytes_per_second_hits_the_request_deadline(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("drip", REFS_RE, count=None, rate=4)]) as px:
        t0 = time.monotonic()
        r = pull(px.url, cache, env={"HUBKERN_REQUEST_TIMEOUT": "2"}, check=False, timeout=60)
        took = time.monotonic() - t0
    assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr, r.stderr
    assert "deadline of 2 s" in r.stderr and "HUBKERN_REQUEST_TIMEOUT" in r.stderr, r.stderr
    assert 1.5 < took < 6, took


def test_a_download_dripping_at_4_bytes_per_second_hits_the_pull_deadline(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("drip", BIG_RE, count=None, rate=4)]) as px:
        t0 = time.monotonic()
        r = pull(px.url, cache, env={"HUBKERN_PULL_TIMEOUT": "3"}, check=False, timeout=60)
        took = time.monotonic() - t0
    assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr, r.stderr
    assert "pull's deadline of 3 s" in r.stderr and "HUBKERN_PULL_TIMEOUT" in r.stderr, r.stderr
    assert 2.5 < took < 7, took


def assert_only_a_resumable_prefix(cache):
    """No blob of big.bin under its name and no stray temp file: at most the resumable
    <sha>.incomplete, holding a prefix of the blob that the next pull continues."""
    names = os.listdir(blobs_dir(cache)) if os.path.isdir(blobs_dir(cache)) else []
    assert SHA not in names, names
    assert [n for n in names if n.endswith((".incomplete", ".tmp")) and n != SHA + ".incomplete"] == [], names
    got = partials(cache)
    if got:
        with open(got[0], "rb") as fh:
            kept = fh.read()
        assert len(kept) < len(BIG) and BIG.startswith(kept)


def test_a_body_that_goes_silent_fails_on_the_stall_limit(hub, tmp_path):
    # 300 kB, then silence on every attempt: the stall limit (HF_HUB_DOWNLOAD_TIMEOUT stays at its
    # 10 s) ends it; each resume got 300 kB more, and took 10 s a time, without it (a pull of minutes)
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("cut", BIG_RE, count=None, after=300_000, stall=30)]) as px:
        t0 = time.monotonic()
        r = pull(px.url, cache, env={"HUBKERN_STALL_TIMEOUT": "2"}, check=False, timeout=40)
        took = time.monotonic() - t0
        assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr, r.stderr
        assert "big.bin" in r.stderr and "made no progress for 2 s" in r.stderr, r.stderr
        assert "HUBKERN_STALL_TIMEOUT" in r.stderr, r.stderr
        assert 1.8 < took < 6, took
        assert len(px.requests("GET", BIG_RE)) == 1
        assert_only_a_resumable_prefix(cache)
        px.rules = []
        out = json.loads(pull(px.url, cache).stdout)
    assert big_content(out) == BIG
    assert_clean(cache)


def test_a_body_dripping_at_4_bytes_per_second_fails_on_the_stall_limit(hub, tmp_path):
    # no pull deadline set: the stall limit is what ends it (before, it ran for as long as the drip)
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("drip", BIG_RE, count=None, rate=4)]) as px:
        t0 = time.monotonic()
        r = pull(px.url, cache, env={"HUBKERN_STALL_TIMEOUT": "2"}, check=False, timeout=40)
        took = time.monotonic() - t0
    assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr, r.stderr
    assert "made no progress for 2 s" in r.stderr and "HUBKERN_STALL_TIMEOUT" in r.stderr, r.stderr
    assert 1.8 < took < 6, took
    assert_only_a_resumable_prefix(cache)


def test_a_slow_but_moving_body_outlives_the_stall_limit(hub, tmp_path):
    # the last 600 kB at 150 kB/s: 4 s, twice the stall limit, but 64 KiB every 0.5 s
    cache = str(tmp_path / "c")
    rules = [Rule("drip", BIG_RE, count=None, after=len(BIG) - 600_000, rate=150_000, chunk=5000)]
    with FaultProxy(hub.url, rules=rules) as px:
        t0 = time.monotonic()
        out = json.loads(pull(px.url, cache, env={"HUBKERN_STALL_TIMEOUT": "2"}, timeout=40).stdout)
        took = time.monotonic() - t0
        assert len(px.requests("GET", BIG_RE)) == 1
    assert took > 3.5, took
    assert big_content(out) == BIG
    assert_clean(cache)


# ---- unreachable endpoint -----------------------------------------------------------------------
def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_refused_connection_fails_fast_with_what_to_check(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}"
    t0 = time.monotonic()
    # the default back-off (HUBKERN_RETRY_BASE_MS unset): the quick retries are what keeps it short
    r = run_cli(["pull", "org/none", "--version", "1", "--endpoint", url, "--cache", str(tmp_path / "c")], check=False,
                unset=("HF_HUB_OFFLINE", "HUBKERN_RETRY_BASE_MS"), env={"HUBKERN_VERBOSE": "1"}, timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 1 and "HK_ERR_NETWORK" in r.stderr, r.stderr
    assert took < 3, took
    assert "connection refused" in r.stderr and "HF_ENDPOINT" in r.stderr and url in r.stderr, r.stderr
    assert r.stderr.count("retrying in") == 2, r.stderr  # each quick retry is logged


def test_a_503_burst_still_gets_the_patient_back_off(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("status", REFS_RE, count=3, status=503)]) as px:
        t0 = time.monotonic()
        out = json.loads(pull(px.url, cache, env={"HUBKERN_RETRY_BASE_MS": "200"}).stdout)
        took = time.monotonic() - t0
        assert len(px.requests("GET", REFS_RE)) == 4
    assert took >= 0.2 + 0.4 + 0.8  # 1, 2, 4 x base
    assert big_content(out) == BIG
