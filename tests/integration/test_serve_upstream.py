"""Pull-through tiers (`hubkern serve --upstream`): a three-tier chain edge → regional → origin under a
wave of 64 concurrent clients (hubkern pull, huggingface_hub.snapshot_download, kernels.install_kernel),
several mirror processes over one store, HTTP caching headers, /metrics, and upstream faults through
the fault proxy (cut body, 429 Retry-After, 503 burst, lying size and hash, redirect to another host,
upstream gone → stale by branch, hit by commit; the upstream process killed mid-wave; the mirror
stopped mid-transfer). The origin is an ordinary `hubkern serve` over a published store; every
count below is read from the access logs."""
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from faultproxy import FaultProxy, Rule, make_variant, publish, run_cli
from hk_serve_helpers import Server

HERE = os.path.dirname(os.path.abspath(__file__))
V = "tvm-ffi01-cpu-x86_64-linux"
SO = f"build/{V}/_testkern.so"
BIG = os.urandom(1_500_000)
TOKEN = "hf_UPSTREAMsecret0987654321"


def clean_env(**kw):
    # (kernels 0.17.2 builds an invalid User-Agent, ending in "; ", when telemetry is disabled)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    e.pop("DO_NOT_TRACK", None)
    e.pop("DISABLE_TELEMETRY", None)
    e.update({"HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HUBKERN_RETRY_BASE_MS": "20"})
    e.update(kw)
    return e


def files_of(tag):
    f = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = %d\n" % len(tag), "_testkern.so": BIG}
    for i in range(4):
        f[f"data/part{i}.bin"] = hashlib.sha256(tag.encode() + bytes([i])).digest() * 2000
    return f


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    base = tmp_path_factory.mktemp("origin")
    store = base / "store"
    store.mkdir()
    commits = {}
    for name in ("tiered", "shared", "cut", "r429", "r503", "liesize", "liehash", "redir", "gone", "killed"):
        src = base / ("src-" + name)
        make_variant(str(src), V, files_of(name))
        commits[name] = publish(str(src), f"org/{name}", "v1", str(store), ["--lfs-threshold", "100000"]).strip()
    with Server(store, "--trust", "org", "--access-log") as srv:
        srv.commits = commits
        yield srv


def resolve_gets(server, repo):
    """GETs of each file of repo in server's access log: {path: count}."""
    c = collections.Counter()
    for line in server.log_lines:
        m = re.search(r'"GET /kernels/org/%s/resolve/[0-9a-f]{40}/(\S+)" 200' % repo, line)
        if m:
            c[m.group(1)] += 1
    return c


def count(server, needle, want=None):
    """Access-log lines of server holding needle. The log is read by a thread, so the line of a
    request just answered may still be on its way: with want, wait (at most 5 s) until the count
    reaches it, then a little longer, so that a count over want shows too."""
    def now():
        return sum(1 for line in server.log_lines if needle in line)
    if want is None:
        return now()
    end = time.time() + 5
    while now() < want and time.time() < end:
        time.sleep(0.05)
    time.sleep(0.3)
    return now()


def check_snapshot(path, tag):
    want = {f"build/{V}/{k}": v for k, v in files_of(tag).items()}
    for rel, data in want.items():
        p = os.path.join(path, rel) if not path.rstrip("/").endswith(V) else os.path.join(path, rel.split(V + "/", 1)[1])
        with open(p, "rb") as fh:
            assert fh.read() == data, rel


def pull(url, cache, repo, check=True):
    r = run_cli(["pull", f"org/{repo}", "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache", cache],
                check=check, unset=("HF_HUB_OFFLINE", "HF_TOKEN"), timeout=120)
    return r


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_three_tier_wave_of_64(origin, tmp_path):
    regional = Server(tmp_path / "regional-store", "--upstream", origin.url, "--access-log") if (
        tmp_path / "regional-store").mkdir() is None else None
    edge_store = tmp_path / "edge-store"
    edge_store.mkdir()
    with regional, Server(edge_store, "--upstream", regional.url, "--access-log", "--max-connections-per-ip", "1024") as edge:
        out = tmp_path / "clients"
        out.mkdir()
        procs = []
        for i in range(24):  # 24 hubkern pull processes
            procs.append(subprocess.Popen(
                [run_cli.__globals__["hubkern_bin"](), "pull", "org/tiered", "--version", "1", "--variant", V, "--json",
                 "--endpoint", edge.url, "--cache", str(out / f"hk-{i}")], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=clean_env()))
        py = [subprocess.Popen([sys.executable, os.path.join(HERE, "upstream_clients.py"), kind, str(n), "org/tiered",
                                str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=clean_env(HF_ENDPOINT=edge.url))
              for kind, n in (("hf", 24), ("kernels", 16))]
        for p in procs:
            so, se = p.communicate(timeout=120)
            assert p.returncode == 0, se
            check_snapshot(json.loads(so)["snapshot"], "tiered")
        for p in py:
            so, se = p.communicate(timeout=120)
            assert p.returncode == 0, se
            res = json.loads(so.strip().splitlines()[-1])
            assert not res["errors"], (res["errors"][:1], [l for l in edge.log_lines if "overview" in l][:20])
            for path in res["ok"]:
                check_snapshot(path, "tiered")
        # the origin served each blob exactly once, and the regional tier fetched each once
        o = resolve_gets(origin, "tiered")
        assert o and set(o.values()) == {1}, o
        assert len(o) == len(files_of("tiered")) + 1  # + metadata.json
        assert set(resolve_gets(regional, "tiered").values()) == {1}
        assert count(origin, "/api/kernels/org/tiered/revision/v1", want=1) == 1
        assert count(regional, "coalesced") + count(edge, "coalesced") > 0
        m = get(edge.url + "/metrics")[2].decode()
        assert "hubkern_coalesced_waits_total" in m and re.search(r"hubkern_upstream_errors_total 0\b", m), m
        fetched = int(re.search(r"hubkern_upstream_fetches_total (\d+)", m).group(1))
        assert fetched <= len(o) + 4, m  # blobs + revision by branch + by commit + refs + overview


def test_two_processes_over_one_store(origin, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    # The first upstream transfer of the big blob ends slowly (its last 100 kB over ~2 s), so the
    # other clients' requests for it certainly arrive while it runs, however slowly their
    # processes start on a loaded machine: the coalescing count below is then deterministic.
    slow = Rule("drip", r"/org/shared/resolve/.*_testkern\.so$", count=1, after=len(BIG) - 100_000,
                chunk=2000, rate=50_000)
    with FaultProxy(origin.url, rules=[slow]) as proxy, \
            Server(store, "--upstream", proxy.url, "--access-log") as a, \
            Server(store, "--upstream", proxy.url, "--access-log") as b:
        errs = []

        def client(i):
            url = (a if i % 2 else b).url
            r = pull(url, str(tmp_path / f"c{i}"), "shared", check=False)
            if r.returncode != 0:
                errs.append(r.stderr)
            else:
                check_snapshot(json.loads(r.stdout)["snapshot"], "shared")

        ts = [threading.Thread(target=client, args=(i,)) for i in range(12)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errs, errs[:2]
        assert set(resolve_gets(origin, "shared").values()) == {1}, resolve_gets(origin, "shared")
        assert slow.hits == 1
        assert count(a, "coalesced") + count(b, "coalesced") > 0


def test_commit_recorded_by_manifest_alone_resolves(origin, tmp_path):
    # Another process records a revision as manifest, then snapshot folder. A commit asked for between
    # the two steps must resolve from the manifest (it once answered 404 "Invalid rev id" there).
    store = tmp_path / "store"
    store.mkdir()
    c = origin.commits["shared"]
    time.sleep(0.3)  # the origin's log lines of earlier tests read in
    asked = count(origin, f"/api/kernels/org/shared/revision/{c}")
    with Server(store, "--upstream", origin.url, "--access-log") as edge:
        st, _, _ = get(f"{edge.url}/api/kernels/org/shared/revision/{c}")
        assert st == 200
        snaps = list(store.glob(f"*shared/snapshots/{c}"))
        assert len(snaps) == 1 and not any(snaps[0].iterdir())
        snaps[0].rmdir()  # as between the two steps
        st, _, body = get(f"{edge.url}/api/kernels/org/shared/tree/{c}/build/{V}?recursive=true")
        assert st == 200, body
        names = {e["path"] for e in json.loads(body) if e["type"] == "file"}
        assert names == {f"build/{V}/{k}" for k in files_of("shared")} | {f"build/{V}/metadata.json"}
        assert snaps[0].is_dir()
    assert count(origin, f"/api/kernels/org/shared/revision/{c}", want=asked + 1) == asked + 1  # no second upstream question


def blobs_are_whole(store):
    """Every blob of every repo folder under store is complete: its sha256 (64-hex names) or git blob
    sha1 (40-hex) is its name. huggingface_hub's `.incomplete` resume files are allowed, nothing else."""
    seen = 0
    for d in store.glob("*--*/blobs"):
        for b in d.iterdir():
            if b.name.endswith(".incomplete"):
                continue
            data = b.read_bytes()
            digest = hashlib.sha256(data).hexdigest() if len(b.name) == 64 else \
                hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            assert digest == b.name, f"{b}: {len(data)} bytes, not the blob its name promises"
            seen += 1
    return seen


def test_upstream_process_killed_mid_wave(origin, tmp_path):
    # The upstream is a process (the fault proxy in front of the origin) that is SIGKILLed while a
    # wave of 12 hubkern pulls and 6 huggingface_hub clients waits on its first transfer of the big
    # blob (held open by a slow drip). Each client must end whole or with a clear error; the edge's
    # store and every client cache must hold no partial blob; a later edge over the same store, with
    # a live upstream, must then serve every client.
    drip = {"kind": "drip", "match": r"/org/killed/resolve/.*_testkern\.so$", "count": None,
            "after": len(BIG) - 400_000, "chunk": 2000, "rate": 20_000}  # 20 s: killed long before
    proxy = subprocess.Popen([sys.executable, os.path.join(HERE, "faultproxy.py"), "--upstream", origin.url,
                              "--rule", json.dumps(drip)], stdout=subprocess.PIPE, text=True)
    try:
        purl = proxy.stdout.readline().split()[-1]
        store = tmp_path / "edge"
        store.mkdir()
        out = tmp_path / "clients"
        # --upstream-retry-after 1: the waiters' 503s say come back in 1 s, not the default 5 (the
        # huggingface_hub clients honour it on each of their retries: 30 s of this test's wall time)
        with Server(store, "--upstream", purl, "--access-log", "--max-connections-per-ip", "1024",
                    "--upstream-retry-after", "1") as edge:
            hk = [subprocess.Popen(
                [run_cli.__globals__["hubkern_bin"](), "pull", "org/killed", "--version", "1", "--variant", V, "--json",
                 "--endpoint", edge.url, "--cache", str(out / f"hk-{i}")], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=clean_env()) for i in range(12)]
            py = subprocess.Popen([sys.executable, os.path.join(HERE, "upstream_clients.py"), "hf", "6", "org/killed",
                                   str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=clean_env(HF_ENDPOINT=edge.url, HF_HUB_DOWNLOAD_TIMEOUT="30"))
            # kill once the big blob's transfer is in its drip (its temporary file past the fast part)
            blobs = store / "kernels--org--killed" / "blobs"

            def dripping():  # the big blob's temporary file is past the fast part
                for b in (os.listdir(blobs) if blobs.exists() else []):
                    try:
                        if b.endswith(".tmp") and os.stat(blobs / b).st_size >= len(BIG) - 400_000:
                            return True
                    except FileNotFoundError:  # renamed meanwhile
                        pass
                return False

            # ... and every huggingface_hub client has its file list (its downloads start at once)
            end = time.time() + 60
            while time.time() < end and not (dripping() and count(edge, "/api/kernels/org/killed/revision/v1") >= 6):
                time.sleep(0.02)
            assert time.time() < end, "the big blob's transfer never started"
            time.sleep(1.0)
            proxy.kill()
            proxy.wait(timeout=10)
            failed = []
            for i, p in enumerate(hk):
                so, se = p.communicate(timeout=120)
                if p.returncode == 0:
                    check_snapshot(json.loads(so)["snapshot"], "killed")
                else:  # a clear error: what failed, that it is worth another try, and its code; every
                    # waiter is told what the leader was (503: unavailable, with Retry-After), not a 502
                    assert "org/killed" in se and "try again later" in se and re.search(r"\[HK_ERR_[A-Z_]+\]", se), se
                    assert "HTTP 503" in se, se
                    failed.append(i)
            so, se = py.communicate(timeout=120)
            res = json.loads(so.strip().splitlines()[-1])
            for path in res["ok"]:
                check_snapshot(path, "killed")
            assert failed and res["errors"], "nobody was waiting on the killed upstream: the test proved nothing"
            assert get(edge.url + "/metrics")[0] == 200  # the edge is still up
            st, h, _ = get(f"{edge.url}/kernels/org/killed/resolve/{origin.commits['killed']}/{SO}")
            assert st == 503 and h.get("Retry-After") == "1", (st, h)  # the upstream is still gone
        assert not [b for b in blobs.iterdir() if b.name.endswith(".tmp")] if blobs.exists() else True
        blobs_are_whole(store)
        for c in out.iterdir():
            blobs_are_whole(c)
        # the upstream is back (a new edge process over the same store): every failed client completes
        with Server(store, "--upstream", origin.url, "--access-log") as edge2:
            for i in failed:
                r = pull(edge2.url, str(out / f"hk-{i}"), "killed")
                check_snapshot(json.loads(r.stdout)["snapshot"], "killed")
            assert hashlib.sha256(BIG).hexdigest() in os.listdir(blobs)
        blobs_are_whole(store)
    finally:
        proxy.kill()
        proxy.wait(timeout=10)


def test_stop_during_upstream_transfer_is_prompt(origin, tmp_path):
    # SIGTERM while an upstream transfer drips (20 s to go): the transfer is abandoned, the edge
    # exits 0 within a couple of seconds, and its temporary file is gone.
    drip = Rule("drip", r"/org/killed/resolve/.*_testkern\.so$", count=1, after=len(BIG) - 400_000,
                chunk=2000, rate=20_000)
    with FaultProxy(origin.url, rules=[drip]) as proxy:
        (tmp_path / "s").mkdir()
        edge = Server(tmp_path / "s", "--upstream", proxy.url)
        c = origin.commits["killed"]
        def fetch():
            try:
                get(f"{edge.url}/kernels/org/killed/resolve/{c}/{SO}")
            except OSError:  # the connection closed by the stop: expected
                pass

        t = threading.Thread(target=fetch, daemon=True)
        t.start()
        blobs = tmp_path / "s" / "kernels--org--killed" / "blobs"
        end = time.time() + 30
        while time.time() < end and not (blobs.exists() and any(b.endswith(".tmp") for b in os.listdir(blobs))):
            time.sleep(0.02)
        time.sleep(0.5)
        t0 = time.time()
        assert edge.stop(timeout=15) == 0
        assert time.time() - t0 < 3, time.time() - t0
        assert drip.hits == 1 and not [b for b in os.listdir(blobs) if b.endswith(".tmp")]


def test_cache_headers_and_304(origin, tmp_path):
    (tmp_path / "s").mkdir()
    with Server(tmp_path / "s", "--upstream", origin.url, "--revision-ttl", "30") as e:
        c = origin.commits["tiered"]
        st, h, _ = get(f"{e.url}/kernels/org/tiered/resolve/{c}/{SO}")
        assert st == 200 and h["Cache-Control"] == "public, max-age=31536000, immutable", h
        etag = h["ETag"]
        st, h, body = get(f"{e.url}/kernels/org/tiered/resolve/{c}/{SO}", {"If-None-Match": etag})
        assert st == 304 and body == b"" and h["ETag"] == etag
        st, h, _ = get(f"{e.url}/kernels/org/tiered/resolve/v1/{SO}")
        assert st == 200 and h["Cache-Control"] == "public, max-age=30", h
        st, h, _ = get(f"{e.url}/api/kernels/org/tiered/revision/{c}")
        assert "immutable" in h["Cache-Control"]
        st, h, _ = get(f"{e.url}/api/kernels/org/nope/revision/v1")
        assert st == 404 and "Cache-Control" not in h


def with_proxy(origin, tmp_path, rules, *extra):
    (tmp_path / "s").mkdir(exist_ok=True)
    proxy = FaultProxy(origin.url, rules=rules)
    edge = Server(tmp_path / "s", "--upstream", proxy.url, "--access-log", *extra)
    return proxy, edge


def so_gets(proxy, repo):
    return [e for e in proxy.requests("GET", f"/kernels/org/{repo}/resolve/.*_testkern.so")]


def blobs_in(tmp_path, repo):
    d = tmp_path / "s" / f"kernels--org--{repo}" / "blobs"
    return sorted(os.listdir(d)) if d.exists() else []


def test_fault_cut_body_is_fetched_again(origin, tmp_path):
    proxy, edge = with_proxy(origin, tmp_path, [Rule("cut", "_testkern.so", after=200_000)])
    with proxy, edge:
        r = pull(edge.url, str(tmp_path / "c"), "cut")
        check_snapshot(json.loads(r.stdout)["snapshot"], "cut")
        assert len(so_gets(proxy, "cut")) == 2  # the cut one and one more
        assert hashlib.sha256(BIG).hexdigest() in blobs_in(tmp_path, "cut")
        assert not [b for b in blobs_in(tmp_path, "cut") if b.endswith(".tmp")]


@pytest.mark.parametrize("kind", ["resize", "corrupt"])
def test_fault_lying_upstream_gets_502_and_nothing_kept(origin, tmp_path, kind):
    repo = "liesize" if kind == "resize" else "liehash"
    # a short body is taken for a cut one and asked for once more; a wrong digest is not
    rules = [Rule(kind, "_testkern.so", count=2 if kind == "resize" else 1, **({"delta": -7} if kind == "resize" else {}))]
    proxy, edge = with_proxy(origin, tmp_path, rules)
    with proxy, edge:
        c = origin.commits[repo]
        st, h, body = get(f"{edge.url}/kernels/org/{repo}/resolve/{c}/{SO}")
        assert st == 502, (st, body)
        assert hashlib.sha256(BIG).hexdigest() not in blobs_in(tmp_path, repo)
        assert not [b for b in blobs_in(tmp_path, repo) if b.endswith(".tmp")]
        # the lie is over: the next client gets the real bytes
        st, h, body = get(f"{edge.url}/kernels/org/{repo}/resolve/{c}/{SO}")
        assert st == 200 and body == BIG
        assert "hubkern_upstream_rejected_total" in get(edge.url + "/metrics")[2].decode()


def test_fault_429_retry_after_shared_by_clients(origin, tmp_path):
    proxy, edge = with_proxy(origin, tmp_path, [Rule("status", "/revision/", status=429, headers={"Retry-After": "2"})])
    with proxy, edge:
        for _ in range(5):  # five clients inside the back-off: one upstream request in all
            st, h, _ = get(f"{edge.url}/api/kernels/org/r429/revision/v1")
            assert st == 429 and 1 <= int(h["Retry-After"]) <= 2, (st, h)
        assert len(proxy.requests("GET", "/revision/")) == 1
        time.sleep(2.2)
        st, h, _ = get(f"{edge.url}/api/kernels/org/r429/revision/v1")
        assert st == 200 and len(proxy.requests("GET", "/revision/")) == 2


def test_fault_503_burst_then_success(origin, tmp_path):
    proxy, edge = with_proxy(origin, tmp_path, [Rule("status", "/revision/", count=3, status=503)])
    with proxy, edge:
        seen = [get(f"{edge.url}/api/kernels/org/r503/revision/v1")[0] for _ in range(4)]
        assert seen == [503, 503, 503, 200], seen
        r = pull(edge.url, str(tmp_path / "c"), "r503")
        check_snapshot(json.loads(r.stdout)["snapshot"], "r503")


def test_fault_redirect_to_other_host_without_token(origin, tmp_path):
    other = FaultProxy(origin.url, host="127.0.0.2")
    tok = tmp_path / "tok"
    tok.write_text(TOKEN + "\n")
    with other:
        proxy, edge = with_proxy(origin, tmp_path, [Rule("redirect", "_testkern.so", target=other.url)],
                                 "--upstream-token-file", tok)
        with proxy, edge:
            r = pull(edge.url, str(tmp_path / "c"), "redir")
            check_snapshot(json.loads(r.stdout)["snapshot"], "redir")
            assert all(e["auth"] == f"Bearer {TOKEN}" for e in proxy.log)
            cdn = other.requests("GET")
            assert cdn and all(e["auth"] is None for e in cdn)
            assert TOKEN not in "\n".join(edge.log_lines)


def test_upstream_gone_serves_stale_by_branch_and_by_commit(origin, tmp_path):
    proxy, edge = with_proxy(origin, tmp_path, [], "--revision-ttl", "1")
    with edge:
        r = pull(edge.url, str(tmp_path / "warm"), "gone")
        proxy.close()  # the upstream goes away
        time.sleep(1.2)  # past the revision TTL
        r = pull(edge.url, str(tmp_path / "c2"), "gone")
        check_snapshot(json.loads(r.stdout)["snapshot"], "gone")
        assert count(edge, " stale") >= 1, edge.log_lines
        c = origin.commits["gone"]
        st, h, body = get(f"{edge.url}/kernels/org/gone/resolve/{c}/{SO}")
        assert st == 200 and body == BIG
        # a file never fetched cannot come from a missing upstream: 502, and nothing corrupt kept
        st, h, body = get(f"{edge.url}/kernels/org/gone/resolve/{c}/build/{V}/nope.bin")
        assert st == 404
