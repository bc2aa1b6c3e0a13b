"""Fault cases through the fault proxy in front of a real `hubkern serve`: each ends in success or
the specific error, and `hubkern cache verify` finds the cache clean afterwards. Also: eight
concurrent pulls share the work (each blob fetched once), a full disk, a bad metadata digest, and
flat memory for a large file."""
import hashlib
import json
import os
import re
import resource
import subprocess
import time

import pytest

from faultproxy import FaultProxy, Rule, Server, hubkern_bin, make_variant, publish
from hk_serve_helpers import run_isolated as run

V = "tvm-ffi01-cpu-x86_64-linux"
SO = f"build/{V}/_testkern.so"
BIG = os.urandom(4_000_000)
SO_RE = "/resolve/[0-9a-f]+/build/" + V + "/_testkern.so"
TOKEN = "hf_SECRETtoken1234567890"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store = str(base / "store")
    src = str(base / "src")
    files = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "_testkern.so": BIG}
    for i in range(6):
        files[f"data/part{i}.bin"] = os.urandom(200_000 + i)
    make_variant(src, V, files)
    publish(src, "org/faulty", "v1", store, ["--lfs-threshold", "1000000"])
    bad = str(base / "bad")
    make_variant(bad, V, {"__init__.py": b"x = 1\n", "b.py": b"y = 2\n"},
                 tamper=lambda d: d.update({"__init__.py": d["b.py"], "gone.py": d["b.py"]}))
    publish(bad, "org/baddigest", "v1", store)
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


def pull(url, cache, *extra, env=None, check=True):
    return run(["pull", "org/faulty", "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache", cache,
                *extra], env=env, check=check)


def assert_clean(cache):
    v = run(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1].startswith("clean"), v.stdout
    assert "leftover" not in v.stdout, v.stdout


def blob_path(cache, data):
    return os.path.join(cache, "kernels--org--faulty", "blobs", hashlib.sha256(data).hexdigest())


def so_content(cache, out):
    with open(os.path.join(out["snapshot"], SO), "rb") as fh:
        return fh.read()


def test_cut_mid_body_resumes_with_range(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("cut", SO_RE, count=2, after=1_500_000)]) as px:
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", SO_RE)
    assert so_content(cache, out) == BIG
    assert len(gets) == 3 and gets[0]["range"] is None
    # the resumes asked for the rest only
    assert gets[1]["range"] and re.fullmatch(r"bytes=(\d+)-", gets[1]["range"])
    assert int(gets[1]["range"][6:-1]) > 0 and int(gets[2]["range"][6:-1]) > int(gets[1]["range"][6:-1])
    assert_clean(cache)


def test_200_answer_to_range_restarts_cleanly(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("cut", SO_RE, count=1, after=1_000_000), Rule("ignore_range", SO_RE, count=1)]
    with FaultProxy(hub.url, rules=rules) as px:
        out = json.loads(pull(px.url, cache).stdout)
        gets = px.requests("GET", SO_RE)
    assert len(gets) == 2 and gets[1]["range"] and gets[1]["fault"] == "ignore_range"
    assert so_content(cache, out) == BIG
    assert_clean(cache)


def test_429_retry_after_is_honoured(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("status", SO_RE, count=2, status=429, headers={"Retry-After": "4"}),
             Rule("status", "/api/kernels/org/faulty/refs", count=1, status=429, headers={"Retry-After": "2"})]
    with FaultProxy(hub.url, rules=rules) as px:
        t0 = time.monotonic()
        env = {"HUBKERN_RETRY_BASE_MS": "100"}  # delays are (Retry-After + 1) x 100 ms here
        out = json.loads(pull(px.url, cache, env=env).stdout)
        took = time.monotonic() - t0
        assert len(px.requests("GET", SO_RE)) == 3
    assert took >= 0.3 + 0.5 + 0.5  # refs wait + two file waits (not the 1 s default back-off each)
    assert so_content(cache, out) == BIG
    assert_clean(cache)


def test_503_burst_then_success_and_persistent_503_fails(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("status", "/resolve/[0-9a-f]+/build/", count=6, status=503),
             Rule("status", "/tree/", count=2, status=502)]
    with FaultProxy(hub.url, rules=rules) as px:
        out = json.loads(pull(px.url, cache).stdout)
        assert len(px.requests("GET", "/resolve/[0-9a-f]+/build/")) == 10 + 6
    assert so_content(cache, out) == BIG
    assert_clean(cache)
    cache2 = str(tmp_path / "c2")
    with FaultProxy(hub.url, rules=[Rule("status", SO_RE, count=None, status=503)]) as px:
        r = pull(px.url, cache2, check=False)
        assert len(px.requests("GET", SO_RE)) == 6  # first try + 5 retries
    assert r.returncode == 1 and "HK_ERR_HTTP" in r.stderr and "503" in r.stderr
    assert not os.path.exists(blob_path(cache2, BIG))
    assert_clean(cache2)


def test_stalled_server_times_out_and_recovers(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("stall", SO_RE, count=1, seconds=4), Rule("stall", "/api/kernels/org/faulty/refs", count=1, seconds=4)]
    with FaultProxy(hub.url, rules=rules) as px:
        t0 = time.monotonic()
        out = json.loads(pull(px.url, cache, env={"HF_HUB_DOWNLOAD_TIMEOUT": "1", "HF_HUB_ETAG_TIMEOUT": "1"}).stdout)
        took = time.monotonic() - t0
        assert len(px.requests("GET", SO_RE)) == 2
    assert 2.0 <= took < 4.0  # two ~1 s timeouts, not the 4 s stalls
    assert so_content(cache, out) == BIG
    assert_clean(cache)
    cache2 = str(tmp_path / "c2")
    with FaultProxy(hub.url, rules=[Rule("stall", SO_RE, count=None, seconds=3)]) as px:
        r = pull(px.url, cache2, env={"HF_HUB_DOWNLOAD_TIMEOUT": "1"}, check=False)
    assert r.returncode == 1 and "HK_ERR_TIMEOUT" in r.stderr and "HF_HUB_DOWNLOAD_TIMEOUT" in r.stderr
    assert_clean(cache2)


@pytest.mark.parametrize("delta", [-10, 10])
def test_wrong_size_is_an_integrity_error(hub, tmp_path, delta):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("resize", SO_RE, count=None, delta=delta)]) as px:
        r = pull(px.url, cache, check=False)
    assert r.returncode == 1 and "HK_ERR_INTEGRITY" in r.stderr and "size mismatch" in r.stderr
    assert str(len(BIG)) in r.stderr and str(len(BIG) + delta) in r.stderr
    blobs = os.listdir(os.path.join(cache, "kernels--org--faulty", "blobs"))
    assert hashlib.sha256(BIG).hexdigest() not in blobs and not [b for b in blobs if ".incomplete" in b]
    assert not os.path.exists(os.path.join(cache, "kernels--org--faulty", "refs", "v1"))
    assert_clean(cache)


def test_wrong_hash_is_an_integrity_error(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("corrupt", SO_RE, count=None)]) as px:
        r = pull(px.url, cache, check=False)
    corrupted = bytearray(BIG)
    corrupted[len(BIG) // 2] ^= 0xFF
    assert r.returncode == 1 and "HK_ERR_INTEGRITY" in r.stderr
    assert hashlib.sha256(BIG).hexdigest() in r.stderr  # expected
    assert hashlib.sha256(bytes(corrupted)).hexdigest() in r.stderr  # actual
    blobs = os.listdir(os.path.join(cache, "kernels--org--faulty", "blobs"))
    assert hashlib.sha256(BIG).hexdigest() not in blobs and not [b for b in blobs if ".incomplete" in b]
    assert_clean(cache)


@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"])
def test_redirect_to_another_host_never_carries_the_token(hub, tmp_path, other_host):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, host=other_host) as cdn:
        rules = [Rule("redirect", "/resolve/[0-9a-f]+/build/", count=None, target=cdn.url)]
        with FaultProxy(hub.url, rules=rules) as px:
            r = pull(px.url, cache, env={"HF_TOKEN": TOKEN, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "0",
                                         "HUBKERN_VERBOSE": "2"})
            api = px.requests("GET", "/api/")
            redirected = px.requests("GET", "/resolve/[0-9a-f]+/build/")
            cdn_gets = cdn.requests("GET")
    assert api and all(e["auth"] == "Bearer " + TOKEN for e in api)  # the token does go to the endpoint
    assert redirected and all(e["status"] == 302 for e in redirected)
    assert len(cdn_gets) == len(redirected) and all(e["auth"] is None for e in cdn_gets)
    assert TOKEN not in r.stderr and TOKEN not in r.stdout  # never logged, even at debug level
    assert "token not sent" in r.stderr
    out = json.loads(r.stdout)
    assert so_content(cache, out) == BIG
    assert_clean(cache)


def test_listing_with_dotdot_names_is_refused(hub, tmp_path):
    cache = str(tmp_path / "c")

    def inject(doc):
        doc.append({"type": "file", "oid": "0" * 40, "size": 5, "path": f"build/{V}/../../../../../evil.txt"})
        return doc

    with FaultProxy(hub.url, rules=[Rule("json", "/tree/.*recursive=true", count=None, fn=inject)]) as px:
        r = pull(px.url, cache, check=False)
        assert px.requests("GET", "/resolve/.*/build/") == []  # refused before any download
    assert r.returncode == 1 and "HK_ERR_UNSAFE_PATH" in r.stderr and "evil.txt" in r.stderr
    for dirpath, _, names in os.walk(str(tmp_path)):
        assert "evil.txt" not in names
    assert_clean(cache)


def test_eight_processes_share_the_work(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url) as px:
        env = dict(os.environ, HUBKERN_RETRY_BASE_MS="20")
        env.pop("HF_HUB_OFFLINE", None)
        procs = [subprocess.Popen([hubkern_bin(), "pull", "org/faulty", "--version", "1", "--variant", V, "--json",
                                   "--endpoint", px.url, "--cache", cache], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
        outs = [p.communicate(timeout=120) for p in procs]
        gets = px.requests("GET", "/resolve/[0-9a-f]+/build/")
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    paths = [g["path"] for g in gets]
    assert len(paths) == 10 and len(set(paths)) == 10  # 10 files, each fetched exactly once overall
    assert sum(json.loads(o[0])["files_downloaded"] for o in outs) == 10
    assert_clean(cache)


def test_full_disk_leaves_no_partial_blob(hub, tmp_path):
    mnt = str(tmp_path / "small")
    os.makedirs(mnt)
    inner = (f"mount -t tmpfs -o size=3m tmpfs {mnt} && "
             f"{hubkern_bin()} pull org/faulty --version 1 --variant {V} --endpoint {hub.url} --cache {mnt}/c; "
             f"echo rc=$?; ls -a {mnt}/c/kernels--org--faulty/blobs; "
             f"{hubkern_bin()} cache verify --cache {mnt}/c; echo verify=$?")
    cmd = ["sh", "-c", inner] if os.geteuid() == 0 else ["unshare", "-rm", "sh", "-c", inner]
    env = dict(os.environ, HUBKERN_RETRY_BASE_MS="20")
    env.pop("HF_HUB_OFFLINE", None)
    if os.geteuid() == 0:
        cmd = ["unshare", "-m", "sh", "-c", inner]  # private mount namespace: nothing leaks out
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert "rc=1" in r.stdout, r.stdout + r.stderr
    assert "HK_ERR_DISK_FULL" in r.stderr
    assert hashlib.sha256(BIG).hexdigest() not in r.stdout and ".incomplete" not in r.stdout
    assert "verify=0" in r.stdout


def test_bad_metadata_digest_reports_each_violation(hub, tmp_path):
    cache = str(tmp_path / "c")
    r = run(["pull", "org/baddigest", "--version", "1", "--variant", V, "--endpoint", hub.url, "--cache", cache],
            check=False)
    assert r.returncode == 1 and "HK_ERR_DIGEST" in r.stderr
    assert "HashMismatch: __init__.py" in r.stderr and "MissingFile: gone.py" in r.stderr
    assert "2 violations" in r.stderr
    assert not os.path.exists(os.path.join(cache, "kernels--org--baddigest", "refs", "v1"))


def test_memory_stays_flat_for_a_large_file(tmp_path):
    size = 256 * 1024 * 1024
    src = str(tmp_path / "src")
    vdir = os.path.join(src, "build", V)
    os.makedirs(vdir)
    with open(os.path.join(vdir, "big.bin"), "wb") as fh:
        chunk = os.urandom(1 << 20)
        for _ in range(size >> 20):
            fh.write(chunk)
    make_variant(src, V, {"__init__.py": b"\n"}, digest=False)
    store = str(tmp_path / "store")
    publish(src, "org/big", "v1", store)
    with Server(store, ["--trust", "org"]) as srv:
        # a wrapper process whose only child is hubkern: its RUSAGE_CHILDREN max RSS is hubkern's
        wrapper = ("import resource,subprocess,sys;r=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
                   "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
                   "sys.stderr.write(r.stderr)")
        env = dict(os.environ)
        env.pop("HF_HUB_OFFLINE", None)
        r = subprocess.run(["python3", "-c", wrapper, hubkern_bin(), "pull", "org/big", "--version", "1", "--variant",
                            V, "--endpoint", srv.url, "--cache", str(tmp_path / "c")],
                           capture_output=True, text=True, env=env, timeout=300)
    rc, rss_kb = (int(x) for x in r.stdout.split())
    assert rc == 0, r.stderr
    with open(os.path.join(tmp_path, "c", "kernels--org--big", "refs", "v1")) as fh:
        commit = fh.read()
    assert os.path.getsize(os.path.join(tmp_path, "c", "kernels--org--big", "snapshots", commit, "build", V,
                                        "big.bin")) == size
    limit = 32 * 1024
    if os.environ.get("HK_SANITIZED") == "1" or "asan" in os.environ.get("HK_BUILD_DIR", ""):
        limit = 128 * 1024  # AddressSanitizer's shadow memory and quarantine; still far below 256 MB
    assert rss_kb < limit, f"max RSS {rss_kb} kB for a {size >> 20} MB file"
