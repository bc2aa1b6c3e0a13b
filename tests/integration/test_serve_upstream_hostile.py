"""A pull-through tier (`hubkern serve --upstream`) facing hostile clients and a hostile upstream
(issue 21, rows U2-U5). Each test is short: the deadlines and budgets are configured small.

- U2: a pass-through request goes upstream in one canonical form (checked names, only the query
  parameter the route uses), and the memo of passed-through answers is bounded by bytes (LRU).
- U3: an upstream lie about a file's size or hash (in the revision listing) is not remembered: the
  request that catches it gets a 502, and the next one, with the upstream honest again, the file.
- U4: a dripping upstream cannot hold handler threads: an overall deadline on each transfer and
  on waiting for one, and a client that disconnects releases its thread.
- U5: made-up revisions are remembered as 404s, each client has its own budget of upstream misses,
  and the upstream's 429 back-off is capped and does not lock out what the store already holds."""
import hashlib
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.parse

import pytest

from faultproxy import FaultProxy, Rule, make_variant, publish
from hk_serve_helpers import Server, metric_value

V = "tvm-ffi01-cpu-x86_64-linux"
SO = f"build/{V}/_k.so"
BIG = os.urandom(600_000)
REPOS = ("liar", "liarc", "drip", "wait", "left", "honest", "stored", "back")


def data_of(name):
    return BIG + name.encode()


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    base = tmp_path_factory.mktemp("origin")
    store = base / "store"
    store.mkdir()
    commits = {}
    for name in REPOS:
        src = base / ("src-" + name)
        make_variant(str(src), V, {"__init__.py": b"x = 1\n", "_k.so": data_of(name)})
        commits[name] = publish(str(src), f"org/{name}", "v1", str(store), ["--lfs-threshold", "100000"]).strip()
    src = base / "src-empty"  # a variant with an empty file (U6: a body promised to be 0 bytes)
    make_variant(str(src), V, {"__init__.py": b"x = 1\n", "empty.txt": b""})
    commits["empty"] = publish(str(src), "org/empty", "v1", str(store)).strip()
    with Server(store, "--trust", "org", "--access-log") as srv:
        srv.commits = commits
        yield srv


def get(url, source=None, timeout=30, headers=None):
    """GET with http.client (optionally from another loopback address): status, headers, body, seconds."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout,
                                      source_address=(source, 0) if source else None)
    t0 = time.monotonic()
    try:
        conn.request("GET", u.path + (("?" + u.query) if u.query else ""), headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read(), time.monotonic() - t0
    finally:
        conn.close()


def metric(edge, name):
    return metric_value(get(edge.url + "/metrics")[2].decode(), name)


# ---- U2 ----------------------------------------------------------------------------------------
def test_u2_passthrough_is_canonical(origin, tmp_path):
    # An encoded '?' in the repo id once became a query string of the upstream request (a new fetch
    # and memo entry per spelling); unknown parameters must not make new upstream questions either.
    with FaultProxy(origin.url) as px, Server(tmp_path, "--upstream", px.url, "--access-log") as edge:
        for i in range(12):
            st, _, _, _ = get(f"{edge.url}/api/kernels/org/stored%3Fq%3D{i}/refs")
            assert st in (400, 404), st
        st, _, _, _ = get(f"{edge.url}/api/organizations/org%3Fq%3D1/overview")
        assert st in (400, 404), st
        assert not px.requests("GET", r"\?q=|%3F"), px.requests("GET")
        for i in range(6):  # one question, however the query is spelt
            st, _, body, _ = get(f"{edge.url}/api/kernels/org/stored/refs?include_prs=1&x={i}&expand={i}")
            assert st == 200 and b"branches" in body, (st, body)
        refs = px.requests("GET", r"/api/kernels/org/stored/refs")
        assert [e["path"] for e in refs] == ["/api/kernels/org/stored/refs?include_prs=1"], refs


def test_u2_memo_bounded_by_bytes_lru(origin, tmp_path):
    # Every refs answer upstream gives is 200 kB; the memo may hold 500 kB: after 12 distinct repos
    # it holds at most that, the most recent answers are still memoised, the oldest are not.
    blob = json.dumps({"branches": [{"name": "v1", "ref": "refs/heads/v1", "targetCommit": "0" * 40}],
                       "tags": [], "converts": [], "pad": "x" * 200_000}).encode()
    rule = Rule("answer", r"/refs$", count=None, status=200, body=blob, headers={"Content-Type": "application/json"})
    with FaultProxy(origin.url, rules=[rule]) as px, \
            Server(tmp_path, "--upstream", px.url, "--upstream-memo-bytes", "500000") as edge:
        for i in range(12):
            assert get(f"{edge.url}/api/kernels/org/m{i}/refs")[0] == 200
        held = metric(edge, "hubkern_upstream_memo_bytes")
        print(f"memo after 12 answers of {len(blob)} bytes: {held} bytes (cap 500000)")
        assert held is not None and 2 * len(blob) <= held <= 500_000, held
        asked = len(px.requests("GET", r"/refs$"))
        assert get(f"{edge.url}/api/kernels/org/m11/refs")[0] == 200  # recent: from the memo
        assert len(px.requests("GET", r"/refs$")) == asked
        assert get(f"{edge.url}/api/kernels/org/m0/refs")[0] == 200  # evicted: asked again
        assert len(px.requests("GET", r"/refs$")) == asked + 1
        # a negative answer is remembered too (briefly): one upstream question for three asks
        rule.match = re.compile(r"^$")
        for _ in range(3):
            assert get(f"{edge.url}/api/kernels/org/nosuch/refs")[0] == 404
        assert len(px.requests("GET", r"/org/nosuch/refs")) == 1


# ---- U3 ----------------------------------------------------------------------------------------
def lie(kind):
    def fn(doc):
        for s in doc.get("siblings", []):
            if s["rfilename"] == SO:
                if kind == "size":
                    s["size"] += 1000
                    s["lfs"]["size"] = s["size"]
                else:
                    s["lfs"]["sha256"] = hashlib.sha256(b"not the file").hexdigest()
        return doc
    return fn


@pytest.mark.parametrize("kind,by", [("size", "branch"), ("hash", "commit")])
def test_u3_listing_lie_is_not_remembered(origin, tmp_path, kind, by):
    repo = "liar" if by == "branch" else "liarc"
    rev = "v1" if by == "branch" else origin.commits[repo]
    rule = Rule("json", f"/api/kernels/org/{repo}/revision/", count=1, fn=lie(kind))
    with FaultProxy(origin.url, rules=[rule]) as px, Server(tmp_path, "--upstream", px.url, "--access-log") as edge:
        st, _, body, _ = get(f"{edge.url}/kernels/org/{repo}/resolve/{rev}/{SO}")
        assert st == 502 and rule.hits == 1, (st, body)
        # the upstream is honest again: the next request (by branch and by commit) gets the file
        for r in (rev, origin.commits[repo]):
            st, _, body, _ = get(f"{edge.url}/kernels/org/{repo}/resolve/{r}/{SO}")
            assert st == 200 and body == data_of(repo), (r, st, body[:200])
        st, _, body, _ = get(f"{edge.url}/api/kernels/org/{repo}/revision/{origin.commits[repo]}?blobs=true")
        sib = [s for s in json.loads(body)["siblings"] if s["rfilename"] == SO][0]
        assert sib["size"] == len(data_of(repo)) and sib["lfs"]["sha256"] == hashlib.sha256(data_of(repo)).hexdigest()
        assert len(px.requests("GET", "/revision/")) == 2  # asked once more after the lie, then never


# ---- U4 ----------------------------------------------------------------------------------------
def drip_rule(repo):
    return Rule("drip", f"/org/{repo}/resolve/.*_k.so", count=None, chunk=200, rate=4000)  # 150 s for the file


def test_u4_dripping_upstream_meets_the_deadline(origin, tmp_path):
    # The drip never pauses long enough for --upstream-timeout: only the overall deadline ends it.
    # Six clients of one blob: the leader and its waiters all get a 503 with Retry-After in time.
    with FaultProxy(origin.url, rules=[drip_rule("drip")]) as px, \
            Server(tmp_path, "--upstream", px.url, "--upstream-deadline", "2", "--access-log") as edge:
        res = []

        def client():
            res.append(get(f"{edge.url}/kernels/org/drip/resolve/v1/{SO}", timeout=20))

        ts = [threading.Thread(target=client) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("clients:", [(st, h.get("Retry-After"), round(took, 1)) for st, h, _, took in res])
        assert len(res) == 6
        for st, h, _, took in res:
            assert st == 503 and int(h["Retry-After"]) >= 1 and took < 12, (st, h, took)
        assert len(px.requests("GET", "/resolve/.*_k.so")) <= 2
        blobs = tmp_path / "kernels--org--drip" / "blobs"
        assert not [b for b in os.listdir(blobs) if b.endswith(".tmp")] if blobs.exists() else True


def test_u4_clients_that_leave_release_their_threads(origin, tmp_path):
    # 8 clients ask for a dripping blob and hang up. With --max-connections 8 and a long deadline,
    # only their leaving can free the threads: an honest request must then be answered at once.
    with FaultProxy(origin.url, rules=[drip_rule("left")]) as px, \
            Server(tmp_path, "--upstream", px.url, "--upstream-deadline", "120", "--max-connections", "8",
                   "--access-log") as edge:
        u = urllib.parse.urlsplit(edge.url)
        socks = []
        for _ in range(8):
            s = socket.create_connection((u.hostname, u.port))
            s.sendall(f"GET /kernels/org/left/resolve/v1/{SO} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            socks.append(s)
        end = time.time() + 10
        while time.time() < end and not px.requests("GET", "/org/left/resolve/"):
            time.sleep(0.05)
        time.sleep(1.0)  # the leader is in its drip, the others wait on it
        for s in socks:
            s.close()
        time.sleep(2.5)
        st, _, body, took = get(f"{edge.url}/kernels/org/honest/resolve/v1/{SO}", timeout=20)
        print(f"honest request after 8 clients left: {st} in {took:.1f} s")
        assert st == 200 and body == data_of("honest") and took < 5, (st, took)


# ---- U5 ----------------------------------------------------------------------------------------
def test_u5_per_client_miss_budget(origin, tmp_path):
    c = origin.commits["stored"]
    with FaultProxy(origin.url) as px, \
            Server(tmp_path, "--upstream", px.url, "--client-miss-budget", "4", "--access-log") as edge:
        st, _, body, _ = get(f"{edge.url}/kernels/org/stored/resolve/{c}/{SO}")  # 2 misses: revision, blob
        assert st == 200 and body == data_of("stored")
        for i in range(2):  # made-up revisions: one miss each, remembered as 404s
            assert get(f"{edge.url}/api/kernels/org/stored/revision/made-up-{i}")[0] == 404
        assert get(f"{edge.url}/api/kernels/org/stored/revision/made-up-0")[0] == 404  # remembered: no miss
        st, h, _, _ = get(f"{edge.url}/api/kernels/org/stored/revision/made-up-9")
        assert st == 429 and int(h["Retry-After"]) >= 1, (st, h)
        asked = len(px.requests("GET"))
        assert asked == 4, px.requests("GET")
        # over its budget, the client still gets what the store holds ...
        st, _, body, _ = get(f"{edge.url}/kernels/org/stored/resolve/{c}/{SO}")
        assert st == 200 and body == data_of("stored")
        # ... and another client (another address) has its own budget
        assert get(f"{edge.url}/api/kernels/org/stored/revision/made-up-9", source="127.0.0.2")[0] == 404
        assert len(px.requests("GET")) == asked + 1


def test_u5_upstream_backoff_capped_and_store_still_served(origin, tmp_path):
    c = origin.commits["back"]
    rule = Rule("status", r"^/api/", count=0, status=429, headers={"Retry-After": "600"})
    with FaultProxy(origin.url, rules=[rule]) as px:
        with Server(tmp_path, "--upstream", px.url, "--upstream-max-backoff", "2", "--access-log") as edge:
            assert get(f"{edge.url}/kernels/org/back/resolve/v1/{SO}")[0] == 200
            rule.count = None  # from now on the upstream answers every API call with 429, Retry-After 600
            st, h, _, _ = get(f"{edge.url}/api/kernels/org/back/revision/made-up")
            assert st == 429 and 1 <= int(h["Retry-After"]) <= 2, (st, h)
            # other clients, inside the back-off: what the store has is served
            assert get(f"{edge.url}/kernels/org/back/resolve/{c}/{SO}", source="127.0.0.2")[0] == 200
        # a fresh edge process (nothing memoised): the refs of a repo in the store come from the store
        with Server(tmp_path, "--upstream", px.url, "--upstream-max-backoff", "2", "--access-log") as edge:
            st, _, body, _ = get(f"{edge.url}/api/kernels/org/back/refs", source="127.0.0.2")
            assert st == 200 and c in body.decode(), (st, body)
            st, h, _, _ = get(f"{edge.url}/api/kernels/org/elsewhere/refs")
            assert st == 429 and int(h["Retry-After"]) <= 2, (st, h)


# ---- U6: names and sizes of an upstream revision answer (audit) ---------------------------------
def sibling_lie(kind):
    def fn(doc):
        sibs = doc["siblings"]
        so = next(s for s in sibs if s["rfilename"] == SO)
        init = next(s for s in sibs if s["rfilename"].endswith("/__init__.py"))
        if kind == "twice":  # the same path again, with another file's blob
            sibs.append(dict(init, rfilename=SO))
        elif kind == "fraction":
            so["size"] = so["size"] + 0.5
        elif kind == "long":
            sibs.append(dict(init, rfilename=f"build/{V}/" + "a" * 256))
        elif kind == "overlong":
            sibs.append(dict(init, rfilename=f"build/{V}/@@OVERLONG@@"))
            return json.dumps(doc).encode().replace(b"@@OVERLONG@@", b"\xc0\xae\xc0\xae")
        return doc
    return fn


@pytest.mark.parametrize("kind", ["twice", "fraction", "long", "overlong"])
def test_u6_revision_answer_with_bad_names_or_sizes_is_refused_and_not_remembered(origin, tmp_path, kind):
    rule = Rule("json", "/api/kernels/org/honest/revision/", count=1, fn=sibling_lie(kind))
    with FaultProxy(origin.url, rules=[rule]) as px, Server(tmp_path, "--upstream", px.url) as edge:
        st, _, body, _ = get(f"{edge.url}/api/kernels/org/honest/revision/v1?blobs=true")
        assert st == 502 and rule.hits == 1 and b"upstream" in body.lower(), (st, body)
        st, _, body, _ = get(f"{edge.url}/api/kernels/org/honest/revision/v1?blobs=true")  # honest again
        assert st == 200, (st, body)
        names = [s["rfilename"] for s in json.loads(body)["siblings"]]
        assert len(names) == len(set(names)) and SO in names, names
        sib = next(s for s in json.loads(body)["siblings"] if s["rfilename"] == SO)
        assert sib["size"] == len(data_of("honest")), sib


def test_u6_an_empty_file_is_bounded_at_zero_bytes(origin, tmp_path):
    # the body limit of a transfer was its promised size, with 0 meaning "none": an upstream could
    # stream without end into the store's temp file for any empty file of a listing
    flood = Rule("answer", r"^/kernels/org/empty/resolve/.*/empty\.txt$", count=None, status=200,
                 body=b"x" * (32 << 20), headers={"Content-Type": "application/octet-stream"})
    with FaultProxy(origin.url, rules=[flood]) as px, Server(tmp_path, "--upstream", px.url) as edge:
        st, _, body, _ = get(f"{edge.url}/kernels/org/empty/resolve/v1/build/{V}/empty.txt")
        assert st == 502 and flood.hits >= 1, (st, body[:200])
        took = metric(edge, "hubkern_upstream_bytes_total")
        assert took is not None and took < (1 << 20), took  # stopped at the first byte past 0
        flood.count = 0  # honest again: the empty file is served
        st, _, body, _ = get(f"{edge.url}/kernels/org/empty/resolve/v1/build/{V}/empty.txt")
        assert st == 200 and body == b"", (st, body[:200])
