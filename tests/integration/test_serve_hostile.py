"""A hostile client against `hubkern serve` (issue 17): traversal encodings, header and URL floods,
Range abuse, token scopes (the organization overview included), slowloris, and paths-info with tens
of thousands of paths. Requests go out on raw sockets or http.client, which send paths untouched.

Every test asserts the status codes, that nothing outside the repo leaks, that the server is still
up and answering, and (autouse fixture) that the store is byte-for-byte what it was before."""

import hashlib
import http.client
import json
import os
import pathlib
import random
import resource
import socket
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import Server, publish  # noqa: E402

REPO = "org-a/k"
SECRET = b"top secret outside the store\n"
HEADER_TIMEOUT = 3  # the module's server: short, so that connections libmicrohttpd leaves hanging end soon


def store_state(root: pathlib.Path) -> dict:
    """Every entry under the store: type, link target or content hash, size, mode and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = pathlib.Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode)
            else:
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mode, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    tmp = tmp_path_factory.mktemp("hostile")
    store, src_a, src_b = tmp / "store", tmp / "src-a", tmp / "src-b"
    big = random.Random(17).randbytes(300_000)
    files = {"README.md": b"hello\n", "build/torch-cpu/metadata.json": b'{"version": 1}\n',
             "build/torch-cpu/lib.so": b"\x7fELF\0" + big}
    for rel, data in files.items():
        (src_a / rel).parent.mkdir(parents=True, exist_ok=True)
        (src_a / rel).write_bytes(data)
    commit = publish(src_a, REPO, "v1", store)
    src_b.mkdir()
    (src_b / "README.md").write_bytes(b"org-b only\n")
    publish(src_b, "org-b/private", "v1", store)
    (tmp / "secret.txt").write_bytes(SECRET)
    snap = store / "kernels--org-a--k" / "snapshots" / commit
    os.symlink("../../../../secret.txt", snap / "evil-rel.txt")
    srv = Server(store, "--access-log", "--header-timeout", HEADER_TIMEOUT)
    yield dict(store=store, tmp=tmp, files=files, commit=commit, srv=srv)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-40:])


@pytest.fixture(autouse=True)
def store_unchanged(env):
    before = store_state(env["store"])
    yield
    assert env["srv"].proc.poll() is None, "the server died:\n" + "\n".join(env["srv"].log_lines[-40:])
    st, _, _ = request(env["srv"].url, "GET", f"/api/kernels/{REPO}/refs")
    assert st == 200
    assert store_state(env["store"]) == before


def hostport(url):
    h, p = url.split("//", 1)[1].rsplit(":", 1)
    return h, int(p)


def request(url, method, path, headers=None, body=None, timeout=10):
    conn = http.client.HTTPConnection(*hostport(url), timeout=timeout)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def raw(url, data: bytes, timeout=10) -> bytes:
    """Send bytes as they are; return everything the server answers until it closes or goes quiet."""
    s = socket.create_connection(hostport(url), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if cl and len(rest) >= int(cl[0].split(b":")[1]):
                    break
        return out
    finally:
        s.close()


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1."), answer[:200]
    return int(answer.split(b" ", 2)[1])


# ---- traversal ----------------------------------------------------------------------------------
def test_traversal_encodings(env):
    url = env["srv"].url
    base = f"/kernels/{REPO}/resolve/v1/"
    cases = {
        # dot segments, encoded in every way, with '/' and '\' encoded too
        "%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt": 400,
        "%2E%2E%2F%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret.txt": 400,
        ".%2e/.%2e/.%2e/.%2e/secret.txt": 400,
        "build/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt": 400,
        "..%5c..%5c..%5c..%5csecret.txt": 400,
        "..\\..\\..\\..\\secret.txt": 400,
        "build%5ctorch-cpu%5cmetadata.json": 400,
        "/etc/passwd": 400,
        "%2fetc%2fpasswd": 400,
        # NUL, raw or encoded, and bad escapes
        "README.md%00": 400,
        "README.md%00.txt": 400,
        "%00/../secret.txt": 400,
        "README%2": 400,
        # double encoding is decoded once: "%2e%2e" is then a plain (absent) file name, not a dot segment
        "%252e%252e/%252e%252e/%252e%252e/%252e%252e/secret.txt": 404,
        "%252e%252e%252f%252e%252e%252fsecret.txt": 404,
        # overlong UTF-8 for '.' and '/' is no name the Hub could hold: refused, not looked up
        "%c0%ae%c0%ae/%c0%ae%c0%ae/secret.txt": 400,
        "..%c0%af..%c0%afsecret.txt": 400,
        # a link inside the snapshot that leads out of the repo folder
        "evil-rel.txt": 404,
    }
    for path, want in cases.items():
        st, h, body = request(url, "GET", base + path)
        assert st == want, (path, st, body)
        assert SECRET not in body
    # revisions, repo ids and tree paths that try to climb out
    for path, want in {
        f"/kernels/{REPO}/resolve/..%2F..%2F..%2Fv1/README.md": 400,
        f"/kernels/{REPO}/resolve/%2e%2e/README.md": 400,
        "/kernels/..%2F..%2F..%2Ftmp/x/resolve/v1/secret.txt": 400,
        "/kernels/%2e%2e/%2e%2e/resolve/v1/secret.txt": 400,
        "/api/kernels/org-a/..%2Fk/refs": 400,
        "/api/kernels/%2e%2e/%2e%2e/refs": 400,
        f"/api/kernels/{REPO}/tree/v1/%2e%2e/%2e%2e": 400,
        f"/api/kernels/{REPO}/tree/v1/..%5c..": 400,
        f"/api/kernels/{REPO}/tree/v1/build%00": 400,
        "/lfs/kernels/org-a/k/..%2F..%2Fsecret.txt?commit=" + "0" * 40 + "&sig=" + "0" * 64: 403,
        "/lfs/kernels/%2e%2e/%2e%2e/" + "0" * 64: 400,
    }.items():
        st, h, body = request(url, "GET", path)
        assert st == want, (path, st, body)
        assert SECRET not in body
    # paths-info with hostile paths answers only what the snapshot holds
    st, _, body = request(url, "POST", f"/api/kernels/{REPO}/paths-info/v1",
                          headers={"Content-Type": "application/json"},
                          body=json.dumps({"paths": ["../../../../secret.txt", "evil-rel.txt", "/etc/passwd",
                                                     "README.md\u0000x", "build/../README.md", "README.md"]}))
    assert st == 200 and [e["path"] for e in json.loads(body)] == ["README.md"]
    # raw bytes a client library would refuse to send. libmicrohttpd hands the URL over as a C string,
    # so a raw NUL ends it: what is served is the file named before the NUL, never what follows
    ans = raw(url, b"GET /kernels/org-a/k/resolve/v1/README.md\x00/../../../../secret.txt HTTP/1.1\r\n"
                   b"Host: x\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 200 and ans.endswith(b"\r\n\r\nhello\n") and SECRET not in ans
    ans = raw(url, b"GET /kernels/org-a/k/resolve/v1/\x00../../../../secret.txt HTTP/1.1\r\n"
                   b"Host: x\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 404 and SECRET not in ans
    for line in (b"GET /kernels/org-a/k/resolve/v1/../../../../secret.txt HTTP/1.1\r\n",
                 b"GET /kernels/org-a/k/resolve/v1/READ ME.md HTTP/1.1\r\n",
                 b"GET \\kernels\\org-a\\k\\resolve\\v1\\README.md HTTP/1.1\r\n"):
        ans = raw(url, line + b"Host: x\r\nConnection: close\r\n\r\n")
        assert status_of(ans) in (400, 404), (line, ans[:300])
        assert SECRET not in ans


# ---- checked names on every route (issue 21, U1) ---------------------------------------------------
# Repo ids, revisions and paths that name something else once decoded: an encoded '/' in any case,
# double encoding (a '%' left after one decode), backslash, NUL, overlong UTF-8, control characters,
# mixed case, over-long parts. Each must be refused with 400 on every route, on a mirror of its own
# store and on a pull-through edge, and the edge must never pass one upstream.
HOSTILE_REPOS = [
    "org/x%2F..%2F..%2Fother%2Fsecret", "org/x%2f..%2f..%2fother%2fsecret", "ORG/x%2F..%2F..%2FOther%2Fsecret",
    "org/x%252F..%252F..%252Fother%252Fsecret", "org/x%5C..%5C..%5Cother%5Csecret", "org/x%5c..%5cother",
    "org/%2e%2e", "org/%2E%2E", "%2e%2e/other", "org/x%C0%AF..%C0%AFother", "org/x%C0%AE%C0%AE",
    "org/x%0Ax", "org/x%7F", "org/x%20y", "org/x%2F", "org/.x", "org/x--y", "org/" + "a" * 97,
    "org/x..y", "org%2Fx/y",
]
HOSTILE_REVS = [
    "..%2F..%2F..%2Fother%2Fsecret", "..%2f..", "%2e%2e", "%2E%2E%2Fmain", "main%252F..%252F..",
    "ma%5Cin", "%2Fmain", "main%2F", "main%2F%2Fx", "ma%C0%AFin", "%C0%AE%C0%AE", "main.lock", "x%2F.hidden",
    "main%20x", "ma~in", "ma%3Ain", "main%40%7B1%7D", "main.", "v" * 300,
]
BAD_ESCAPES = ["org/x%00", "org/x%zz", "org/x%2"]


def hostile_requests(repo_ok, rev_ok):
    """(method, path, body) for every route with one hostile name in it."""
    def routes(r, rev, path="README.md"):
        yield "GET", f"/api/kernels/{r}", None
        yield "GET", f"/api/kernels/{r}/revision/{rev}", None
        yield "GET", f"/api/kernels/{r}/tree/{rev}", None
        yield "GET", f"/api/kernels/{r}/tree/{rev}/{path}", None
        yield "GET", f"/api/kernels/{r}/refs", None
        yield "POST", f"/api/kernels/{r}/paths-info/{rev}", "paths=README.md"
        yield "GET", f"/api/kernels/{r}/benchmarks", None
        yield "POST", f"/api/kernels/{r}/benchmarks", "{}"
        yield "GET", f"/kernels/{r}/resolve/{rev}/{path}", None
        yield "HEAD", f"/kernels/{r}/resolve/{rev}/{path}", None
        yield "GET", f"/lfs/kernels/{r}/{'0' * 64}?commit={'0' * 40}&sig={'0' * 64}", None
    for r in HOSTILE_REPOS + BAD_ESCAPES:
        for m, p, b in routes(r, rev_ok):
            yield "repo", r, m, p, b
    for rev in HOSTILE_REVS:
        for m, p, b in list(routes(repo_ok, rev))[1:4] + list(routes(repo_ok, rev))[5:6] + \
                list(routes(repo_ok, rev))[8:10]:
            yield "rev", rev, m, p, b
    for path in ("%2e%2e/%2e%2e/secret", "..%2F..%2Fsecret", "a%5Cb", "a//b", "a/./b", "%C0%AE%C0%AE/x",
                 "a%0Ab", "x" * 300, "%2Fetc%2Fpasswd"):
        for m, p, b in list(routes(repo_ok, rev_ok, path))[3:4] + list(routes(repo_ok, rev_ok, path))[8:10]:
            yield "path", path, m, p, b


def assert_all_refused(url, repo_ok, rev_ok, token=None):
    h = {"Authorization": f"Bearer {token}"} if token else {}
    wrong = []
    for kind, name, method, path, body in hostile_requests(repo_ok, rev_ok):
        hh = dict(h)
        if method == "POST":
            hh["Content-Type"] = "application/json" if path.endswith("benchmarks") else \
                "application/x-www-form-urlencoded"
        st, headers, data = request(url, method, path, headers=hh, body=body)
        if st != 400 or any(s in data for s in (SECRET, b"other secret", b"org-b only", b"rfilename", b'"oid"')):
            wrong.append((kind, name, method, path, st, data[:120]))
    assert wrong == [], "\n".join(map(str, wrong[:30])) + f"\n({len(wrong)} wrong)"


def test_unchecked_names_refused_on_every_route(env):
    assert_all_refused(env["srv"].url, REPO, "v1")


def test_edge_never_sends_an_unchecked_name_upstream(env, tmp_path):
    """U1: a token scoped to `org` read other/secret through the edge's upstream by an encoded '/'
    in the repo id (decoded, never checked, pasted into the upstream URL where libcurl removed the
    dot segments); the revision route left kernels--org--x--..--..--other--secret folders."""
    origin_store, edge_store = tmp_path / "origin", tmp_path / "edge"
    for repo, text in (("org/x", b"org x\n"), ("other/secret", b"other secret\n")):
        src = tmp_path / repo.replace("/", "-")
        src.mkdir()
        (src / "README.md").write_bytes(text)
        publish(src, repo, "main", origin_store)
    edge_store.mkdir()
    with Server(origin_store, "--access-log") as origin, \
            Server(edge_store, "--upstream", origin.url, "--token", "org-token:org", "--access-log") as edge:
        tok = {"Authorization": "Bearer org-token"}
        # the scope itself: org/x yes, other/secret no
        assert request(edge.url, "GET", "/kernels/org/x/resolve/main/README.md", headers=tok)[2] == b"org x\n"
        assert request(edge.url, "GET", "/api/kernels/other/secret/tree/main", headers=tok)[0] == 403
        # the reported attack, by name, then the class: every route, every trick. What the upstream
        # was asked and what the edge wrote are checked before the statuses (they are the leak).
        answers = [(path, *request(edge.url, "GET", path, headers=tok)) for path in (
            "/api/kernels/org/x%2F..%2F..%2Fother%2Fsecret/revision/main",
            "/api/kernels/org/x%2F..%2F..%2Fother%2Fsecret/tree/main",
            "/kernels/org/x%2F..%2F..%2Fother%2Fsecret/resolve/main/README.md")]
        overviews = {}  # the overview pass-through: such a namespace is unknown, and never asked upstream
        for org in ("..%2Fother", "%2e%2e", "org%2F..%2Fother", "org%252F..%252Fother", "org%5C..%5Cother",
                    "org%00", "org%C0%AF..", "Other"):
            overviews[org] = request(edge.url, "GET", f"/api/organizations/{org}/overview", headers=tok)[0]
        try:
            assert_all_refused(edge.url, "org/x", "main", token="org-token")
            refused = None
        except AssertionError as e:
            refused = e
        upstream_asked = [ln for ln in origin.log_lines if " access " in ln]
        leaked = [ln for ln in upstream_asked if "secret" in ln or "/.." in ln or "%2F.." in ln or "%5C" in ln]
        assert leaked == [], "the edge passed unchecked names upstream:\n" + "\n".join(leaked[:20])
        made = [str(p.relative_to(edge_store)) for p in edge_store.rglob("*")]
        assert not [m for m in made if ".." in m or "secret" in m or "%" in m], made
        for path, st, _, body in answers:
            assert st == 400 and b"other secret" not in body and b"README" not in body, (path, st, body)
        assert refused is None, refused
        assert all(st in (400, 404) for st in overviews.values()), overviews


# ---- floods ----------------------------------------------------------------------------------------
def test_header_and_url_floods(env):
    url = env["srv"].url
    ok = f"/kernels/{REPO}/resolve/v1/README.md"
    # a URL longer than any route needs; a URL of more segments than any route has
    ans = raw(url, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 414
    ans = raw(url, b"GET " + b"/a" * 300 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 414
    ans = raw(url, b"GET /" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 414
    # query arguments: a couple of hundred are ignored (clients send a handful); more overflow
    # libmicrohttpd's per-connection memory (each is kept there, ~60 bytes in 16 KiB), after which
    # 0.9.75 closes the connection or leaves it open without an answer: the header deadline ends it
    st, _, body = request(url, "GET", ok + "?" + "&".join(f"k{i}=v" for i in range(200)))
    assert st == 200 and body == b"hello\n"
    t0 = time.monotonic()
    ans = raw(url, f"GET {ok}?{'&'.join(f'k{i}=v' for i in range(1500))} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
              timeout=HEADER_TIMEOUT + 5)
    assert ans == b"" or status_of(ans) == 431, ans[:200]
    assert time.monotonic() - t0 < HEADER_TIMEOUT + 2
    # many headers, or one huge header: refused by libmicrohttpd's per-connection memory, not a crash
    many = b"".join(b"X-Flood-%d: %s\r\n" % (i, b"v" * 100) for i in range(2000))
    ans = raw(url, b"GET " + ok.encode() + b" HTTP/1.1\r\nHost: x\r\n" + many + b"Connection: close\r\n\r\n")
    assert status_of(ans) == 431, ans[:200]
    ans = raw(url, b"GET " + ok.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 300_000 +
              b"\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 431, ans[:200]
    # the per-connection memory is 16 KiB (HK_SRV_CONN_MEMORY): a header section of 12 KB (a long
    # URL and a real client's headers fit with room to spare) is answered, one of 17 KB gets 431
    long_url = ok + "?" + "a" * (8000 - len(ok))
    ans = raw(url, f"GET {long_url} HTTP/1.1\r\nHost: x\r\nUser-Agent: huggingface_hub/0.30; python/3.11\r\n"
                   f"Authorization: Bearer hf_{'x' * 40}\r\nX-Big: {'v' * 4000}\r\nConnection: close\r\n\r\n".encode())
    assert status_of(ans) == 200, ans[:200]
    ans = raw(url, b"GET " + ok.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 17_000 +
              b"\r\nConnection: close\r\n\r\n")
    assert status_of(ans) == 431, ans[:200]
    # a moderate number of headers is fine
    st, _, body = request(url, "GET", ok, headers={f"X-H{i}": "v" * 20 for i in range(100)})
    assert st == 200 and body == b"hello\n"
    # a hostile Host header is not echoed into links
    ans = raw(url, f"GET /api/kernels/{REPO}/tree/v1?recursive=true HTTP/1.1\r\nHost: a\"b<c>\r\n"
                   "Connection: close\r\n\r\n".encode())
    assert status_of(ans) == 200 and b"a\"b<c>" not in ans
    # a body over the limit
    st, _, _ = request(url, "POST", f"/api/kernels/{REPO}/paths-info/v1", body=b"paths=" + b"a" * (1 << 21),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert st == 413


# ---- Range -----------------------------------------------------------------------------------------
def test_range_abuse(env):
    url = env["srv"].url
    data = env["files"]["build/torch-cpu/lib.so"]
    path = f"/kernels/{REPO}/resolve/v1/build/torch-cpu/lib.so"
    n = len(data)
    cases = [
        (",".join(f"{i}-{i}" for i in range(1500)), 200, data),        # many ranges: the whole file
        ("0-0," * 200 + "0-0", 200, data),                                # overlapping, repeated
        ("100-10", 200, data),                                            # inverted: ignored
        ("0-99999999999999999999999999", 200, data),                     # overflows 64 bits: ignored
        ("-99999999999999999999999999", 200, data),
        ("--5", 200, data),
        ("5--10", 200, data),
        ("0x10-0x20", 200, data),
        ("abc", 200, data),
        ("", 200, data),
        ("=0-1", 200, data),
        ("18446744073709551615-", 416, None),                             # beyond the end
        (f"{n}-{n + 10}", 416, None),
        ("-0", 416, None),
        ("-10000000", 206, data),                                         # suffix longer than the file
        (f"0-{2**63}", 206, data),
        (f"{n - 1}-", 206, data[-1:]),
        ("10-19", 206, data[10:20]),
    ]
    for spec, want, body_want in cases:
        st, h, body = request(url, "GET", path, headers={"Range": "bytes=" + spec})
        assert st == want, (spec[:60], st)
        if body_want is not None:
            assert body == body_want, spec[:60]
        if st == 416:
            assert h["content-range"] == f"bytes */{n}"
    st, _, body = request(url, "GET", path, headers={"Range": "items=0-1"})
    assert st == 200 and body == data


# ---- tokens ----------------------------------------------------------------------------------------
def test_token_scopes(env):
    store = env["store"]
    with Server(store, "--token", "full-token", "--token", "scoped-token:org-a", "--trust", "org-a",
                "--trust", "org-b", "--trust", "org-named") as srv:
        def get(path, token=None, headers=None):
            hh = dict(headers or {})
            if token:
                hh["Authorization"] = f"Bearer {token}"
            return request(srv.url, "GET", path, headers=hh)

        # the overview of a namespace outside the token's scope answers as one that does not exist
        st, _, body = get("/api/organizations/org-a/overview", "scoped-token")
        assert st == 200 and json.loads(body)["trustedKernelPublisher"] is True
        outside = get("/api/organizations/org-b/overview", "scoped-token")
        named = get("/api/organizations/org-named/overview", "scoped-token")
        missing = get("/api/organizations/org-nowhere/overview", "scoped-token")
        assert outside[0] == named[0] == missing[0] == 404
        assert outside[2] == named[2] == missing[2]
        assert outside[1].get("x-error-message") == missing[1].get("x-error-message")
        # the full token sees them
        st, _, body = get("/api/organizations/org-b/overview", "full-token")
        assert st == 200 and json.loads(body)["name"] == "org-b"
        assert get("/api/organizations/org-named/overview", "full-token")[0] == 200
        assert get("/api/organizations/org-nowhere/overview", "full-token")[0] == 404
        # repos outside the scope: 403 on every route
        for path in ("/api/kernels/org-b/private/refs", "/api/kernels/org-b/private/revision/v1",
                     "/api/kernels/org-b/private/tree/v1", "/kernels/org-b/private/resolve/v1/README.md",
                     "/api/kernels/org-b/private"):
            st, h, body = get(path, "scoped-token")
            assert st == 403 and b"org-b only" not in body, path
        st, _, body = request(srv.url, "POST", "/api/kernels/org-b/private/paths-info/v1",
                              headers={"Authorization": "Bearer scoped-token",
                                       "Content-Type": "application/x-www-form-urlencoded"},
                              body="paths=README.md")
        assert st == 403
        assert get("/kernels/org-b/private/resolve/v1/README.md", "full-token")[2] == b"org-b only\n"
        # no token, a wrong one, one that is a prefix or an extension of a real one, or sent elsewhere
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer full"},
                        {"Authorization": "Bearer full-token-x"}, {"Authorization": "Basic full-token"},
                        {"Authorization": "full-token"}, {"X-Token": "full-token"},
                        {"Authorization": "Bearer scoped-token:org-b"}, {"Authorization": "Bearer \x7ffull-token"}):
            st, h, body = get("/api/organizations/org-b/overview", headers=headers)
            assert st == 401, headers
            st, h, body = get("/kernels/org-b/private/resolve/v1/README.md", headers=headers)
            assert st == 401 and b"org-b only" not in body, headers
        st, _, _ = get("/kernels/org-b/private/resolve/v1/README.md?token=full-token")
        assert st == 401
        # the /lfs/ route needs its signature whatever the token
        st, _, _ = get("/lfs/kernels/org-b/private/" + "0" * 64 + "?commit=" + "0" * 40 + "&sig=" + "0" * 64,
                       "full-token")
        assert st == 403
    # a scope is compared with the whole checked id, case-insensitively as the Hub compares ids; a
    # scope may name one repo
    with Server(store, "--token", "upper:ORG-A", "--token", "one:org-b/private") as srv:
        def code(path, token):
            return request(srv.url, "GET", path, headers={"Authorization": f"Bearer {token}"})[0]
        assert code(f"/kernels/{REPO}/resolve/v1/README.md", "upper") == 200
        assert code("/kernels/org-b/private/resolve/v1/README.md", "upper") == 403
        assert code("/kernels/org-b/private/resolve/v1/README.md", "one") == 200
        assert code("/api/kernels/ORG-B/PRIVATE/refs", "one") == 404  # granted, but no such folder
        assert code(f"/kernels/{REPO}/resolve/v1/README.md", "one") == 403
        assert code("/api/kernels/org-b/private%2F..%2F..%2Forg-a%2Fk/refs", "one") == 400


# ---- slowloris -------------------------------------------------------------------------------------
def open_from(src_ip, url, first=b"GET / HTTP/1.1\r\n"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src_ip, 0))
    s.settimeout(5)
    s.connect(hostport(url))
    try:
        s.sendall(first)
    except OSError:
        pass
    return s


def closed_by_server(s) -> bool:
    s.setblocking(False)
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def timed_get(url, path, deadline_s):
    """GET until answered (a full server closes new connections at once); seconds it took."""
    t0 = time.monotonic()
    while True:
        try:
            st, _, _ = request(url, "GET", path, timeout=deadline_s)
            assert st == 200
            return time.monotonic() - t0
        except (ConnectionError, http.client.HTTPException, socket.timeout, OSError):
            if time.monotonic() - t0 > deadline_s:
                raise
            time.sleep(0.05)


def test_slowloris_per_ip_limit(env):
    """150 half-open requests from one address against a server that takes 100 connections: only the
    per-address limit (--max-connections-per-ip 64) are held, and another client is answered at once
    throughout."""
    with Server(env["store"], "--max-connections", "100", "--max-connections-per-ip", "64", "--threads", "2") as srv:
        socks = [open_from("127.0.0.2", srv.url) for _ in range(150)]
        try:
            time.sleep(0.5)
            held = sum(not closed_by_server(s) for s in socks)
            assert held <= 64, held
            for _ in range(5):
                assert timed_get(srv.url, f"/api/kernels/{REPO}/refs", 5) < 2.0
        finally:
            for s in socks:
                s.close()


def test_slowloris_header_deadline(env):
    """Drip-fed headers (a byte every 0.4 s: never idle long enough for the inactivity timeout) are cut
    at the header deadline; headers that arrive slowly but within it are answered; while the slow
    connections are open another client is answered at once; when they fill the server, it is
    answered once the deadline has freed it."""
    deadline = 2
    with Server(env["store"], "--header-timeout", deadline, "--max-connections", "60",
                "--max-connections-per-ip", "1000", "--threads", "2", "-v") as srv:
        stop = threading.Event()
        socks = []
        lock = threading.Lock()

        def drip():
            while not stop.is_set():
                with lock:
                    live = list(socks)
                for s, _ in live:
                    try:
                        s.send(b"X")
                    except OSError:
                        pass
                time.sleep(0.4)

        t0 = time.monotonic()
        for _ in range(40):
            socks.append((open_from("127.0.0.2", srv.url, b"GET /api/kernels/org-a/k/refs HTTP/1.1\r\nX-A: "),
                          time.monotonic()))
        th = threading.Thread(target=drip, daemon=True)
        th.start()
        try:
            # 40 of 60 taken: another client is answered at once
            assert timed_get(srv.url, f"/api/kernels/{REPO}/refs", 5) < 1.0
            # a legitimate slow client, inside the deadline
            s = socket.create_connection(hostport(srv.url), timeout=10)
            for part in (b"GET /kernels/org-a/k/resolve/v1/README.md HTTP/1.1\r\n", b"Host: x\r\n",
                         b"Connection: close\r\n", b"\r\n"):
                s.sendall(part)
                time.sleep(0.25)
            ans = b""
            while chunk := s.recv(4096):
                ans += chunk
            s.close()
            assert status_of(ans) == 200 and ans.endswith(b"hello\n")
            # fill the server: the newcomer gets in only when the deadline frees connections
            more = [open_from("127.0.0.2", srv.url, b"GET / HTTP/1.1\r\nX-B: ") for _ in range(30)]
            with lock:
                socks.extend((m, time.monotonic()) for m in more)
            took = timed_get(srv.url, f"/api/kernels/{REPO}/refs", deadline + 5)
            assert took < deadline + 3, took
            # every drip-fed connection was closed by the server, none long after its deadline
            end = time.monotonic() + deadline + 3
            while time.monotonic() < end and not all(closed_by_server(s) for s, _ in socks):
                time.sleep(0.2)
            assert all(closed_by_server(s) for s, _ in socks)
            assert time.monotonic() - t0 < 2 * deadline + 6
            assert srv.wait_log("no complete request headers within 2 s")
        finally:
            stop.set()
            th.join(timeout=5)
            for s, _ in socks:
                s.close()


# ---- paths-info ------------------------------------------------------------------------------------
def test_paths_info_bounded_time(env):
    """60k-75k paths (duplicates and absent names) in one 1 MiB body are answered well within a second, and 8
    such requests at once do not hold up other requests (the duplicate check was quadratic)."""
    url = env["srv"].url
    ep = f"/api/kernels/{REPO}/paths-info/v1"
    dup = json.dumps({"paths": ["README.md"] * 75_000})
    mixed = json.dumps({"paths": [f"d{i}/x" if i % 2 else "README.md" for i in range(70_000)]})
    form = "&".join(["paths=README.md"] * 35_000 + [f"paths=b%2F{i}" for i in range(25_000)])
    for body, ct in ((dup, "application/json"), (mixed, "application/json"),
                     (form, "application/x-www-form-urlencoded")):
        t0 = time.monotonic()
        st, _, ans = request(url, "POST", ep, headers={"Content-Type": ct}, body=body)
        took = time.monotonic() - t0
        assert st == 200 and [e["path"] for e in json.loads(ans)] == ["README.md"]
        assert took < 1.0, took
    # every distinct path answered once, in the order asked, duplicates dropped
    st, _, ans = request(url, "POST", ep, headers={"Content-Type": "application/json"},
                         body=json.dumps({"paths": ["build", "README.md", "build", "build/torch-cpu/lib.so",
                                                    "README.md"] * 1000}))
    assert [e["path"] for e in json.loads(ans)] == ["build", "README.md", "build/torch-cpu/lib.so"]
    # 8 parallel floods and a probe
    results = []

    def flood():
        results.append(request(url, "POST", ep, headers={"Content-Type": "application/json"}, body=dup, timeout=30)[0])

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    st, _, _ = request(url, "GET", f"/api/kernels/{REPO}/refs", timeout=30)
    probe = time.monotonic() - t0
    for t in threads:
        t.join()
    assert st == 200 and probe < 2.0, probe
    assert results == [200] * 8


def test_links_of_the_canonical_shape_do_not_escape_through_linked_folders(tmp_path):
    """The realpath()-free file path (server/store_linked.c) trusts a link only of the shape
    "../"x(depth+2) + "blobs/<etag>" reached through real folders into a real blobs/: a linked
    folder in the snapshot, or a blobs/ that is itself a link, must not let such a link reach bytes
    outside the repo (both answered 404, the secret never sent)."""
    store, src = tmp_path / "store", tmp_path / "src"
    (src / "build").mkdir(parents=True)
    (src / "README.md").write_bytes(b"hello\n")
    commit = publish(src, "org-c/k", "v1", store)
    repo = store / "kernels--org-c--k"
    etag = hashlib.sha1(b"blob %d\0" % len(SECRET) + SECRET).hexdigest()
    # outside: out/a/b/x -> ../../../blobs/<etag> lands in out/../blobs = tmp_path/blobs, not the repo's
    out = tmp_path / "out" / "a" / "b"
    out.mkdir(parents=True)
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / etag).write_bytes(SECRET)
    os.symlink(f"../../../blobs/{etag}", out / "x")
    snap = repo / "snapshots" / commit
    os.symlink(str(tmp_path / "out" / "a"), snap / "evil")  # a linked folder: evil/b/x has depth 2
    srv = Server(store)
    try:
        st, _, body = request(srv.url, "GET", f"/kernels/org-c/k/resolve/{commit}/evil/b/x")
        assert st == 404 and SECRET not in body
        st, _, body = request(srv.url, "GET", f"/kernels/org-c/k/resolve/{commit}/README.md")
        assert st == 200 and body == b"hello\n"
        # blobs/ replaced by a link to a folder holding the secret under README's blob name
        readme_etag = os.readlink(snap / "README.md").rsplit("/", 1)[1]
        os.rename(repo / "blobs", tmp_path / "real-blobs")
        fake = tmp_path / "fake-blobs"
        fake.mkdir()
        (fake / readme_etag).write_bytes(SECRET)
        os.symlink(str(fake), repo / "blobs")
        # this server keeps the snapshot's folders open since its first answer (store_linked.c):
        # it may still answer from the real blobs it opened then, never from the link
        st, _, body = request(srv.url, "GET", f"/kernels/org-c/k/resolve/{commit}/README.md")
        assert SECRET not in body and (st == 404 or (st == 200 and body == b"hello\n")), (st, body)
        # a server that opens the repo now finds blobs/ a link: 404
        with Server(store) as fresh:
            st, _, body = request(fresh.url, "GET", f"/kernels/org-c/k/resolve/{commit}/README.md")
            assert st == 404 and SECRET not in body
    finally:
        assert srv.stop() == 0, "\n".join(srv.log_lines[-40:])
