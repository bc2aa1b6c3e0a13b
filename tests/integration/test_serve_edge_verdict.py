"""A pull-through edge keeps its revision step's verdict in memory (server/upstream_verdict.c, issue
25): a warm request inside the revision TTL passes the step without the file system (the snapshot,
the manifest's partial mark, a branch's ref file). The verdict must never outlive the TTL (a branch
moved on the origin is seen once it passes, and not asked upstream before), and never hide what
another process did to the store: a snapshot or ref pruned under the edge is fetched again by the
very next request, not answered 404. /metrics (hubkern_rev_verdict_total) says which requests used
the kept verdict."""
import http.client
import os
import shutil
import time
import urllib.parse

from hk_serve_helpers import Server, keepalive_get as get, metric_value, publish, two_commit_store

REPO = "org/verdict"
TTL_S = 4


def metrics(conn):
    st, body = get(conn, "/metrics")
    assert st == 200
    text = body.decode()
    out = {}
    for name, series in (("kept", 'hubkern_rev_verdict_total{result="kept"}'),
                         ("checked", 'hubkern_rev_verdict_total{result="checked"}'),
                         ("dropped", 'hubkern_rev_verdict_total{result="dropped"}'),
                         ("fetches", "hubkern_upstream_fetches_total")):
        out[name] = metric_value(text, series)
        assert out[name] is not None, f"no {series} in /metrics"
    return out


def delta(now, before):
    return {k: now[k] - before[k] for k in now}


def connect(srv):
    u = urllib.parse.urlparse(srv.url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def test_edge_verdict_kept_for_the_ttl_only(tmp_path):
    src, store, c1, _ = two_commit_store(tmp_path, REPO)
    (tmp_path / "edge").mkdir()
    by_c1, by_main = f"/kernels/{REPO}/resolve/{c1}/a.txt", f"/kernels/{REPO}/resolve/main/a.txt"
    tree = f"/api/kernels/{REPO}/tree/main"
    ref = tmp_path / "edge" / "kernels--org--verdict" / "refs" / "main"
    with Server(store) as origin, \
            Server(tmp_path / "edge", "--upstream", origin.url, "--revision-ttl", str(TTL_S)) as edge:
        conn = connect(edge)
        for x in (by_main, by_c1):
            assert get(conn, x) == (200, b"one\n")  # fetched from the origin
        assert get(conn, tree)[0] == 200
        confirmed = os.stat(ref).st_mtime  # the edge's TTL counts from here

        m0 = metrics(conn)
        n = 30
        for _ in range(n):
            for x in (by_main, by_c1):
                assert get(conn, x) == (200, b"one\n")
            assert get(conn, tree)[0] == 200
        d = delta(metrics(conn), m0)
        assert d["fetches"] == 0, d
        # every warm revision step on the kept verdict, but for its re-proof (at most once a second per
        # revision: main and the commit)
        assert d["kept"] >= 3 * n - 6 and d["checked"] <= 6, d

        (src / "a.txt").write_bytes(b"three\n")
        publish(str(src), REPO, "main", str(store))  # the branch moves on the origin
        m1 = metrics(conn)
        if time.time() < confirmed + TTL_S - 1:  # inside the TTL: the edge does not ask, and answers what it has
            assert get(conn, by_main) == (200, b"one\n")
            assert delta(metrics(conn), m1)["fetches"] == 0
        time.sleep(max(0.0, confirmed + TTL_S + 0.5 - time.time()))  # the TTL has passed
        assert get(conn, by_main) == (200, b"three\n")
        assert delta(metrics(conn), m1)["fetches"] >= 1
        assert get(conn, by_c1) == (200, b"one\n")  # the old commit keeps its bytes

        m2 = metrics(conn)
        for _ in range(5):
            assert get(conn, by_main) == (200, b"three\n")
        d = delta(metrics(conn), m2)
        assert d["fetches"] == 0 and d["kept"] >= 3, d
        conn.close()


def test_edge_verdict_never_hides_a_pruned_store(tmp_path):
    src, store, c1, _ = two_commit_store(tmp_path, REPO)
    (tmp_path / "edge").mkdir()
    repo = tmp_path / "edge" / "kernels--org--verdict"
    by_c1, by_main = f"/kernels/{REPO}/resolve/{c1}/a.txt", f"/kernels/{REPO}/resolve/main/a.txt"
    tree_c1 = f"/api/kernels/{REPO}/tree/{c1}"
    with Server(store) as origin, Server(tmp_path / "edge", "--upstream", origin.url, "--revision-ttl", "60") as edge:
        conn = connect(edge)
        for x in (by_c1, by_main):
            assert get(conn, x) == (200, b"one\n")
        m0 = metrics(conn)
        for _ in range(3):
            for x in (by_c1, by_main):
                assert get(conn, x) == (200, b"one\n")
        assert delta(metrics(conn), m0)["kept"] >= 2  # the verdicts are in use

        # another process prunes the commit (snapshot and blobs) while the verdict is kept
        shutil.rmtree(repo / "snapshots" / c1)
        shutil.rmtree(repo / "blobs")
        m1 = metrics(conn)
        assert get(conn, by_c1) == (200, b"one\n")
        d = delta(metrics(conn), m1)
        assert d["dropped"] >= 1 and d["fetches"] >= 1, d
        assert get(conn, tree_c1)[0] == 200

        # ... and the branch's ref
        os.unlink(repo / "refs" / "main")
        m2 = metrics(conn)
        assert get(conn, by_main) == (200, b"one\n")
        d = delta(metrics(conn), m2)
        assert d["dropped"] >= 1 and d["fetches"] >= 1, d
        assert (repo / "refs" / "main").exists()

        # the whole repo folder removed (cache rm): the router sees it, no verdict is used
        shutil.rmtree(repo)
        assert get(conn, f"/api/kernels/{REPO}/revision/main")[0] == 200
        assert get(conn, by_main) == (200, b"one\n")
        conn.close()
