"""A request by commit is answered from the kept snapshot handle (server/store_linked.c, issue 25):
refs/ and snapshots/ are checked by their identity instead of looking up refs/<commit> (which must be
absent: a ref of that name wins) and snapshots/<commit> by path. The kept answer is never stale: a
ref named like the commit, made or removed by another process, a snapshot removed or moved away,
are all seen by the very next request on the same keep-alive connection. The store is left
untouched for longer than the racy window first, so that the answers really are kept: the real 2 s,
or, where serve has the test hooks, the 300 ms it is given (--racy-window-ms; likewise the shared
listing's TTL, 5 s, given as 1 s by --listing-ttl-ms), so that the waits are short."""
import http.client
import os
import shutil
import time
import urllib.parse

from hk_serve_helpers import Server, keepalive_get as get, metric_value, publish, serve_has_test_hooks, two_commit_store

REPO = "org/cmemo"
HOOKS = serve_has_test_hooks()
RACY_WINDOW_MS, LISTING_TTL_MS = (300, 1000) if HOOKS else (2000, 5000)
SERVE_ARGS = ("--racy-window-ms", RACY_WINDOW_MS, "--listing-ttl-ms", LISTING_TTL_MS) if HOOKS else ()
RACY_WINDOW_S = RACY_WINDOW_MS / 1000 + (0.2 if HOOKS else 0.5)  # past the window: what is read now is kept
LISTING_TTL_S = LISTING_TTL_MS / 1000 + (0.2 if HOOKS else 0.5)  # past the TTL: the listing is made again


def removed_snapshot_is_gone(conn, repo, c1, c2):
    """Past the racy window the kept proof of c1 holds; its snapshot removed, c1 is a 404 at once
    and c2 is untouched."""
    by_c1 = f"/kernels/{REPO}/resolve/{c1}/a.txt"
    time.sleep(RACY_WINDOW_S)
    for _ in range(2):
        assert get(conn, by_c1) == (200, b"one\n")
    shutil.rmtree(repo / "snapshots" / c1)
    assert get(conn, by_c1)[0] == 404
    assert get(conn, f"/kernels/{REPO}/resolve/{c2}/a.txt") == (200, b"two\n")


def test_kept_commits_follow_every_write(tmp_path):
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    repo = store / "kernels--org--cmemo"
    by_c1 = f"/kernels/{REPO}/resolve/{c1}/a.txt"
    with Server(store, *SERVE_ARGS) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        time.sleep(RACY_WINDOW_S)
        for _ in range(3):  # kept after the first
            assert get(conn, by_c1) == (200, b"one\n")

        # another writer makes a ref named like the commit: it wins over the snapshot
        (repo / "refs" / c1).write_text(c2)
        assert get(conn, by_c1) == (200, b"two\n")
        os.unlink(repo / "refs" / c1)
        assert get(conn, by_c1) == (200, b"one\n")

        # a publish elsewhere in the repo (refs/main moved by rename) keeps the answer right
        (src / "a.txt").write_bytes(b"three\n")
        publish(str(src), REPO, "main", str(store))
        assert get(conn, by_c1) == (200, b"one\n")

        time.sleep(RACY_WINDOW_S)
        for _ in range(2):
            assert get(conn, by_c1) == (200, b"one\n")
        # the snapshot moved out of snapshots/ (its folder still exists, elsewhere): gone
        os.rename(repo / "snapshots" / c1, tmp_path / "moved")
        assert get(conn, by_c1)[0] == 404
        os.rename(tmp_path / "moved", repo / "snapshots" / c1)
        assert get(conn, by_c1) == (200, b"one\n")

        removed_snapshot_is_gone(conn, repo, c1, c2)
        conn.close()


def test_kept_repo_folder_follows_every_write(tmp_path):
    """The repo folder's "is a folder" verdict and the commit's kept proof are taken again only after
    a change the store root, refs/ or snapshots/ report (server/store_watch.c): the repo folder
    moved away, replaced by a link to itself, or its refs/ and snapshots/ folders touched or
    chmod-ed, each is seen by the very next request on the same keep-alive connection, for a file and a
    tree page alike."""
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    repo = store / "kernels--org--cmemo"
    by_c1, tree = f"/kernels/{REPO}/resolve/{c1}/a.txt", f"/api/kernels/{REPO}/tree/{c1}"
    with Server(store, *SERVE_ARGS) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)

        def settle():
            time.sleep(RACY_WINDOW_S)
            for _ in range(3):  # kept after the first
                assert get(conn, by_c1) == (200, b"one\n")
                assert get(conn, tree)[0] == 200

        settle()
        os.rename(repo, tmp_path / "away")  # the repo folder gone from the root
        assert get(conn, by_c1)[0] == 404 and get(conn, tree)[0] == 404
        os.rename(tmp_path / "away", repo)
        assert get(conn, by_c1) == (200, b"one\n") and get(conn, tree)[0] == 200

        settle()
        os.rename(repo, tmp_path / "away")  # a link in its place: never followed out of the store
        os.symlink(tmp_path / "away", repo)
        assert get(conn, by_c1)[0] == 404 and get(conn, tree)[0] == 404
        os.unlink(repo)
        os.rename(tmp_path / "away", repo)
        assert get(conn, by_c1) == (200, b"one\n")

        settle()
        os.utime(repo / "refs")  # only refs/'s stamps moved: proven again, still the snapshot
        os.chmod(repo / "snapshots", 0o755)
        assert get(conn, by_c1) == (200, b"one\n") and get(conn, tree)[0] == 200
        (repo / "refs" / c1).write_text(c2)  # and a ref named like the commit right after is seen
        assert get(conn, by_c1) == (200, b"two\n")
        os.unlink(repo / "refs" / c1)
        assert get(conn, by_c1) == (200, b"one\n")
        conn.close()


def test_kept_commits_without_refs_folder(tmp_path):
    """A store with no refs/ at all (what an edge fills when asked by commit only): the repo folder's
    own stamps stand in for refs/'s in the kept proof (making refs/ changes them), so a ref named
    like the commit, made with its refs/ folder by another process, is still seen at once."""
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    repo = store / "kernels--org--cmemo"
    shutil.rmtree(repo / "refs")
    by_c1 = f"/kernels/{REPO}/resolve/{c1}/a.txt"
    with Server(store, *SERVE_ARGS) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        time.sleep(RACY_WINDOW_S)
        for _ in range(3):
            assert get(conn, by_c1) == (200, b"one\n")
        (repo / "refs").mkdir()
        (repo / "refs" / c1).write_text(c2)
        assert get(conn, by_c1) == (200, b"two\n")
        shutil.rmtree(repo / "refs")
        assert get(conn, by_c1) == (200, b"one\n")

        removed_snapshot_is_gone(conn, repo, c1, c2)
        conn.close()


def test_kept_file_answers_follow_every_write(tmp_path):
    """A small file's whole answer is kept (server/http_memo.c) with its snapshot link's and blob's
    identity and stamps; a blob rewritten in place or replaced, a link pointed elsewhere or removed,
    are each seen by the next request, by commit and by branch."""
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    repo = store / "kernels--org--cmemo"
    link = repo / "snapshots" / c1 / "a.txt"
    blob_one = repo / "blobs" / os.path.basename(os.readlink(link))
    two_target = os.readlink(repo / "snapshots" / c2 / "a.txt")
    urls = [f"/kernels/{REPO}/resolve/{c1}/a.txt", f"/kernels/{REPO}/resolve/main/a.txt"]

    def settle_and_expect(body):
        time.sleep(RACY_WINDOW_S)  # past the racy window: the answers below are kept
        for _ in range(3):
            for u in urls:
                assert get(conn, u) == (200, body)

    with Server(store, *SERVE_ARGS) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        settle_and_expect(b"one\n")
        # conditions and ranges are answered afresh beside a kept answer
        conn.request("GET", urls[0], headers={"Range": "bytes=1-2"})
        r = conn.getresponse()
        assert (r.status, r.read()) == (206, b"ne")
        conn.request("GET", urls[0], headers={"If-None-Match": r.getheader("ETag")})
        r = conn.getresponse()
        assert (r.status, r.read()) == (304, b"")

        # the blob rewritten in place (same inode, same size): new stamps
        os.chmod(blob_one, 0o644)
        with open(blob_one, "r+b") as fh:
            fh.write(b"ONE\n")
        for x in urls:
            assert get(conn, x) == (200, b"ONE\n")

        settle_and_expect(b"ONE\n")
        # the blob replaced by rename: a new inode
        (repo / "blobs" / "tmp").write_bytes(b"uno\n")
        os.rename(repo / "blobs" / "tmp", blob_one)
        for x in urls:
            assert get(conn, x) == (200, b"uno\n")

        settle_and_expect(b"uno\n")
        # the link pointed at another blob
        os.unlink(link)
        os.symlink(two_target, link)
        for x in urls:
            assert get(conn, x) == (200, b"two\n")

        settle_and_expect(b"two\n")
        # the link removed
        os.unlink(link)
        for x in urls:
            assert get(conn, x)[0] == 404
        conn.close()


def test_kept_tree_pages_follow_the_listing(tmp_path):
    """A tree page is kept with the number of the shared listing it came from (server/store.c, its TTL):
    each page, cursor and recursive flag is its own answer, and an entry added to the snapshot
    shows once the listing is made again."""
    import json

    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    snap = store / "kernels--org--cmemo" / "snapshots" / c1
    os.makedirs(snap / "d")
    os.symlink("../" + os.readlink(snap / "a.txt"), snap / "d" / "b.txt")
    tree = f"/api/kernels/{REPO}/tree/{c1}"

    def names(path):
        st, body = get(conn, path)
        assert st == 200, (path, st)
        return [e["path"] for e in json.loads(body)]

    with Server(store, "--page-size", "1", *SERVE_ARGS) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        for _ in range(2):  # the second round from the memo, each page its own
            assert names(tree) == ["a.txt"]
            assert names(tree + "?cursor=1") == ["d"]
            assert names(tree + "?recursive=true&cursor=2") == ["d/b.txt"]
            assert names(tree + "/d") == ["d/b.txt"]
        conn.request("GET", tree + "/d")
        r = conn.getresponse()
        r.read()
        assert r.getheader("Link") is None
        conn.request("GET", tree)
        r = conn.getresponse()
        r.read()
        assert "cursor=1" in r.getheader("Link")  # the kept page keeps its Link header
        os.symlink("../" + os.readlink(snap / "a.txt"), snap / "d" / "c.txt")
        time.sleep(LISTING_TTL_S)  # past the shared listing's TTL: listed again, the kept pages are not reused
        conn.request("GET", tree + "/d")  # kept before with no next page: now it has one
        r = conn.getresponse()
        assert [e["path"] for e in json.loads(r.read())] == ["d/b.txt"] and "cursor=3" in r.getheader("Link", "")
        assert names(tree + "/d?cursor=3") == ["d/c.txt"]
        conn.close()


def memo_hits(conn):
    st, body = get(conn, "/metrics")
    assert st == 200
    hits = metric_value(body.decode(), 'hubkern_answer_memo_total{result="hit"}')
    assert hits is not None, "no answer memo in /metrics"
    return hits


def test_edge_kept_answers_follow_upstream(tmp_path):
    """A pull-through edge keeps its finished answers too, proven against its own store exactly as
    the mirror's: a branch that moves upstream is seen once the revision TTL has passed (the kept
    answer of the old commit is not reused for the branch), the old commit still answers its bytes,
    and the memo is really in use (its hits in /metrics grow on warm requests)."""
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    (tmp_path / "edge").mkdir()
    by_c1, by_main = f"/kernels/{REPO}/resolve/{c1}/a.txt", f"/kernels/{REPO}/resolve/main/a.txt"
    tree = f"/api/kernels/{REPO}/tree/{c1}"
    with Server(store, *SERVE_ARGS) as origin, \
            Server(tmp_path / "edge", "--upstream", origin.url, "--revision-ttl", "1", *SERVE_ARGS) as edge:
        u = urllib.parse.urlparse(edge.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        for x in (by_c1, by_main):
            assert get(conn, x) == (200, b"one\n")  # fetched from the origin
        assert get(conn, tree)[0] == 200
        time.sleep(RACY_WINDOW_S)  # the edge's new files settle: their answers are kept from now on
        h0 = memo_hits(conn)
        for _ in range(3):
            for x in (by_c1, by_main):
                assert get(conn, x) == (200, b"one\n")
            assert get(conn, tree)[0] == 200
        assert memo_hits(conn) - h0 >= 4, "warm edge requests not answered from the memo"

        (src / "a.txt").write_bytes(b"three\n")
        publish(str(src), REPO, "main", str(store))  # the branch moves on the origin
        time.sleep(1.5)  # past the edge's revision TTL
        assert get(conn, by_main) == (200, b"three\n")
        assert get(conn, by_c1) == (200, b"one\n")
        time.sleep(RACY_WINDOW_S)
        for _ in range(2):
            assert get(conn, by_main) == (200, b"three\n")
            assert get(conn, by_c1) == (200, b"one\n")
        conn.close()
