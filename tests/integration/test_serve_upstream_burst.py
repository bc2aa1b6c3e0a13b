"""A burst of clients on a cold pull-through edge (issue 25): 50 clients start at once on an edge
with an empty store, each doing what `hubkern pull` does on the wire (refs, the commit's tree,
every file over a few connections). Every client gets every file with the right sha256, the origin
sees each file and the tree exactly once, the edge's access log says one miss per file (every other
request coalesced or a hit), and the edge's store holds no temporary file afterwards. And the edge keeps its connections to the
upstream open between misses instead of a TCP (and TLS) set-up for each. The
benchmark of the same burst is bench/edge_burst_bench.py; the wake-up count behind its fix is
checked in tests/unit/test_server.c (test_up_wait_per_key)."""
import collections
import hashlib
import http.client
import json
import os
import queue
import re
import threading

from faultproxy import FaultProxy, Rule, make_variant, publish
from hk_serve_helpers import Server

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/burst"
K = 50
CONNS = 4


def fetch_all(host, port, barrier, want, errors):
    c0 = http.client.HTTPConnection(host, port, timeout=60)

    def get(c, path):
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()

    barrier.wait()
    st, body = get(c0, f"/api/kernels/{REPO}/refs")
    assert st == 200, body
    commit = json.loads(body)["branches"][0]["targetCommit"]
    st, body = get(c0, f"/api/kernels/{REPO}/tree/{commit}/build/{V}")
    assert st == 200, body
    paths = [e["path"] for e in json.loads(body) if e["type"] == "file"]
    assert sorted(paths) == sorted(want)
    q = queue.Queue()
    for p in paths:
        q.put(p)

    def worker(c):
        while True:
            try:
                p = q.get_nowait()
            except queue.Empty:
                return
            st, data = get(c, f"/kernels/{REPO}/resolve/{commit}/{p}")
            if st != 200 or hashlib.sha256(data).hexdigest() != want[p]:
                errors.append((p, st, len(data)))

    conns = [c0] + [http.client.HTTPConnection(host, port, timeout=60) for _ in range(CONNS - 1)]
    ts = [threading.Thread(target=worker, args=(c,)) for c in conns]
    [t.start() for t in ts]
    [t.join() for t in ts]
    [c.close() for c in conns]


def test_cold_edge_burst_of_50(tmp_path):
    store, want = make_repo(tmp_path, big=(300_000, 200_000))
    edge_store = tmp_path / "edge"
    edge_store.mkdir()
    with Server(store, "--trust", "org", "--access-log") as origin, \
            Server(edge_store, "--upstream", origin.url, "--access-log") as edge:
        host, port = edge.url.split("//")[1].rsplit(":", 1)
        barrier = threading.Barrier(K)
        errors, failures = [], []

        def run():
            try:
                fetch_all(host, int(port), barrier, want, errors)
            except Exception as e:  # an assertion in a client thread: reported below
                failures.append(repr(e))

        ts = [threading.Thread(target=run) for _ in range(K)]
        [t.start() for t in ts]
        [t.join(timeout=120) for t in ts]
        assert not failures, failures[:3]
        assert not errors, errors[:5]
        assert edge.wait_log("access", 5)
        n_files = len(want)
        # every answer logged before counting (the logs are read by threads)
        for srv, n in ((edge, K * (n_files + 2)), (origin, n_files + 2)):
            end = 50
            while sum(" access " in x for x in srv.log_lines) < n and end:
                threading.Event().wait(0.1)
                end -= 1
        resolves = collections.Counter(m.group(1) for line in origin.log_lines
                                       if (m := re.search(r'"GET /kernels/%s/resolve/[0-9a-f]{40}/(\S+)" 200' % REPO, line)))
        assert resolves == collections.Counter({p: 1 for p in want}), resolves
        assert sum(f"/api/kernels/{REPO}/tree/" in x or f"/api/kernels/{REPO}/revision/" in x
                   for x in origin.log_lines if " access " in x) == 1
        misses = collections.Counter(m.group(1) for line in edge.log_lines
                                     if (m := re.search(r'"GET /kernels/%s/resolve/[0-9a-f]{40}/(\S+)" 200 \d+ \S+ miss' % REPO,
                                                        line)))
        assert misses == collections.Counter({p: 1 for p in want}), misses
        marks = collections.Counter(m.group(1) for line in edge.log_lines
                                    if (m := re.search(r'"GET /kernels/%s/resolve/\S+" 200 \d+ \S+ (\w+)$' % REPO, line)))
        assert sum(marks.values()) == K * n_files and set(marks) <= {"miss", "coalesced", "hit"}, marks
    leftovers = [os.path.join(d, f) for d, _, fs in os.walk(edge_store) for f in fs if f.endswith(".tmp")]
    assert not leftovers, leftovers


def make_repo(tmp_path, n_small=12, big=(300_000,)):
    """A published variant of n_small small files and one LFS file a size in `big`: the store and
    each file's sha256 by path."""
    files = {f"f{i:02d}.py": b"# small %d\n" % i * 30 for i in range(n_small)}
    files.update({f"big{i}.bin": os.urandom(n) for i, n in enumerate(big)})
    src, store = tmp_path / "src", tmp_path / "origin"
    store.mkdir()
    vdir = make_variant(str(src), V, files)
    want = {}
    for name in os.listdir(vdir):
        with open(os.path.join(vdir, name), "rb") as fh:
            want[f"build/{V}/{name}"] = hashlib.sha256(fh.read()).hexdigest()
    publish(str(src), REPO, "v1", str(store), ["--lfs-threshold", "100000"])
    return store, want


def test_misses_reuse_upstream_connections(tmp_path):
    """One client fetching a cold commit file after file: every miss goes upstream on the
    connection the first one opened (the proxy sees which connection each request came on), and a
    failed transfer's connection is not reused: the one after a cut body comes on a new one."""
    store, want = make_repo(tmp_path)
    edge_store = tmp_path / "edge"
    edge_store.mkdir()
    cut = f"/resolve/[0-9a-f]{{40}}/build/{V}/big0.bin"
    with Server(store, "--trust", "org") as origin, \
            FaultProxy(origin.url, rules=[Rule("cut", cut, count=1, after=1000)]) as proxy, \
            Server(edge_store, "--upstream", proxy.url) as edge:
        host, port = edge.url.split("//")[1].rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        c.request("GET", f"/api/kernels/{REPO}/refs")
        commit = json.loads(c.getresponse().read())["branches"][0]["targetCommit"]
        for p in sorted(want):
            c.request("GET", f"/kernels/{REPO}/resolve/{commit}/{p}")
            r = c.getresponse()
            data = r.read()
            assert r.status == 200 and hashlib.sha256(data).hexdigest() == want[p], (p, r.status)
        c.close()
        log = proxy.requests("GET")
    # the organization's overview, refs, the revision, each file, big0 again
    assert len(log) == len(want) + 4, [e["path"] for e in log]
    i = next(i for i, e in enumerate(log) if e["fault"] == "cut")
    before, after = {e["peer"] for e in log[:i + 1]}, {e["peer"] for e in log[i + 1:]}
    assert len(before) == 1, before  # everything up to the cut: one connection
    assert len(after) == 1 and not (after & before), (before, after)
