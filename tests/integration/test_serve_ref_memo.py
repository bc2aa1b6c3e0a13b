"""The mirror keeps resolved refs and the refs listing (server/store_refs.c, issue 25); a kept answer
is never stale: a publish by another process (the ref moved by rename), a huggingface_hub-style
rewrite of the ref file in place, a new branch and a removed one are all seen by the very next
request on the same keep-alive connection. The refs are left untouched for longer than the memo's
racy window (2 s) first, so that the answers really are kept when the store changes."""
import http.client
import json
import os
import time
import urllib.parse

from hk_serve_helpers import Server, keepalive_get as get, publish, two_commit_store

REPO = "org/memo"
RACY_WINDOW_S = 2.5


def test_kept_refs_follow_every_write(tmp_path):
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    ref = store / "kernels--org--memo" / "refs" / "main"
    with Server(store) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        time.sleep(RACY_WINDOW_S)
        for _ in range(3):  # kept after the first
            assert get(conn, f"/kernels/{REPO}/resolve/main/a.txt") == (200, b"one\n")
            st, body = get(conn, f"/api/kernels/{REPO}/refs")
            assert st == 200 and [b["targetCommit"] for b in json.loads(body)["branches"]] == [c1, c2]

        # another process publishes to main: the ref file replaced by rename
        (src / "a.txt").write_bytes(b"three\n")
        c3 = publish(str(src), REPO, "main", str(store))
        assert get(conn, f"/kernels/{REPO}/resolve/main/a.txt") == (200, b"three\n")
        st, body = get(conn, f"/api/kernels/{REPO}/refs")
        assert [b["targetCommit"] for b in json.loads(body)["branches"]] == [c3, c2]

        time.sleep(RACY_WINDOW_S)
        assert get(conn, f"/kernels/{REPO}/resolve/main/a.txt") == (200, b"three\n")
        get(conn, f"/api/kernels/{REPO}/refs")
        # huggingface_hub's way: the same file rewritten in place (same inode, same size)
        with open(ref, "r+") as fh:
            fh.write(c1)
        assert get(conn, f"/kernels/{REPO}/resolve/main/a.txt") == (200, b"one\n")
        st, body = get(conn, f"/api/kernels/{REPO}/refs")
        assert [b["targetCommit"] for b in json.loads(body)["branches"]] == [c1, c2]

        time.sleep(RACY_WINDOW_S)
        get(conn, f"/api/kernels/{REPO}/refs")
        # a branch added by another writer, and one removed
        (ref.parent / "added").write_text(c3)
        st, body = get(conn, f"/api/kernels/{REPO}/refs")
        assert sorted(b["name"] for b in json.loads(body)["branches"]) == ["added", "main", "other"]
        os.unlink(ref)
        assert get(conn, f"/kernels/{REPO}/resolve/main/a.txt")[0] == 404
        st, body = get(conn, f"/api/kernels/{REPO}/refs")
        assert sorted(b["name"] for b in json.loads(body)["branches"]) == ["added", "other"]
        assert get(conn, f"/kernels/{REPO}/resolve/added/a.txt") == (200, b"three\n")
        conn.close()


def test_kept_refs_answer_sees_same_second_same_size_rewrites(tmp_path):
    """The refs answer itself is kept (server/http_memo.c, proven by store_refs.c's view number):
    a ref rewritten in place with the same size, twice within one second, and a `hubkern publish`
    while the server runs are each seen by the very next request, with and without include_prs."""
    src, store, c1, c2 = two_commit_store(tmp_path, REPO)
    ref = store / "kernels--org--memo" / "refs" / "main"

    def branches(conn, q=""):
        st, body = get(conn, f"/api/kernels/{REPO}/refs{q}")
        assert st == 200
        return {b["name"]: b["targetCommit"] for b in json.loads(body)["branches"]}

    with Server(store) as srv:
        u = urllib.parse.urlparse(srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        time.sleep(RACY_WINDOW_S)
        for q in ("", "?include_prs=1", ""):  # built once per query, then the kept answer
            assert branches(conn, q) == {"main": c1, "other": c2}
        # same size, same inode, within one second, mtime even put back: ctime still moves
        st0 = os.stat(ref)
        for want in (c2, c1, c2):
            with open(ref, "r+") as fh:
                fh.write(want)
            os.utime(ref, ns=(st0.st_atime_ns, st0.st_mtime_ns))
            assert branches(conn) == {"main": want, "other": c2}
            assert branches(conn, "?include_prs=1") == {"main": want, "other": c2}
        time.sleep(RACY_WINDOW_S)
        assert branches(conn) == {"main": c2, "other": c2}  # kept again
        with open(ref, "r+") as fh:
            fh.write(c1)
        assert branches(conn) == {"main": c1, "other": c2}
        # a publish through `hubkern publish` while the server runs: the next answer has it
        time.sleep(RACY_WINDOW_S)
        assert branches(conn) == {"main": c1, "other": c2}
        (src / "a.txt").write_bytes(b"four\n")
        c4 = publish(str(src), REPO, "other", str(store))
        assert branches(conn) == {"main": c1, "other": c4}
        c5 = publish(str(src), REPO, "fresh", str(store))
        assert branches(conn, "?include_prs=1") == {"main": c1, "other": c4, "fresh": c5}
        conn.close()
