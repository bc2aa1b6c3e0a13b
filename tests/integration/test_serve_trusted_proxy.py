"""`hubkern serve --trusted-proxy` (issue 25): the client address of a request is the forwarded one
only on a trusted proxy's connections, and the per-address limit is keyed on it; a client that
sends its own X-Forwarded-For / Forwarded picks nothing. nginx runs in front on loopback (it
connects to the mirror from 127.0.0.1, the trusted proxy); clients bind other loopback addresses
(127.0.0.2 and up) so that each has an address of its own."""
import http.client
import os
import pwd
import grp
import re
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from faultproxy import make_variant, publish
from hk_serve_helpers import Server, hubkern_bin
from test_http2_tls import find_nginx, free_port
from test_serve_nginx_cache import NGINX_MAIN

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/proxied"
BIG = 64 << 20  # more than every socket buffer between a stalled client and the mirror holds
ACCESS = re.compile(r'access (\S+) "GET ([^"]*)"')

# the http { } wrapper of test_serve_nginx_cache (an unprivileged nginx in {d}), with room for the
# burst below (each client takes a connection and so does its request to the mirror)
assert NGINX_MAIN.count("worker_connections 512;") == 1
NGINX_WRAP = NGINX_MAIN.replace("worker_connections 512;", "worker_connections 2048;")
NGINX_SITE = """\
upstream mirror {{ server {mirror}; keepalive 16; }}
server {{
    listen 127.0.0.1:{port};
    location / {{
        proxy_pass http://mirror;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_buffering off;  # a stalled client stalls its request at the mirror too
    }}
}}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("tproxy")
    files = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "big.bin": os.urandom(BIG)}
    make_variant(str(base / "src"), V, files)
    publish(str(base / "src"), REPO, "v1", str(base / "store"), ["--lfs-threshold", "100000"])
    return base / "store"


class Nginx:
    def __init__(self, d, mirror_url):
        nginx = find_nginx()
        if not nginx:
            pytest.fail("nginx is not installed: run scripts/setup.sh (it installs nginx-light)", pytrace=False)
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        self.port = free_port()
        with open(os.path.join(d, "fleet.conf"), "w") as fh:
            fh.write(NGINX_SITE.format(port=self.port, mirror=mirror_url.split("://", 1)[1]))
        conf = NGINX_WRAP.format(d=d)
        if os.geteuid() == 0:  # workers would drop to nobody, who cannot read the pytest tmp dir
            conf = f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};\n" + conf
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as fh:
            fh.write(conf)
        self.proc = subprocess.Popen([nginx, "-p", d, "-c", path, "-e", os.path.join(d, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/kernels/{REPO}/refs", timeout=2).read()
                return
            except OSError:
                assert self.proc.poll() is None, self.proc.stderr.read()
                time.sleep(0.05)
        raise AssertionError("nginx did not answer")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def connect(port, source, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def request(port, source, path, headers=()):
    """GET path from `source`, one request; (status, body)."""
    s = connect(port, source)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode())
    resp = http.client.HTTPResponse(s)
    resp.begin()
    body = resp.read()
    s.close()
    return resp.status, body


def stall(port, source, headers=()):
    """Start a GET of the big file from `source` and never read it: it stays in flight."""
    s = connect(port, source, rcvbuf=4096)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
    s.sendall(f"GET /kernels/{REPO}/resolve/v1/build/{V}/big.bin HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
    return s


def status_line(s):
    """The status of the answer on a stalled socket (it sent at least its headers), or None if closed."""
    data = b""
    s.settimeout(10)
    while b"\r\n" not in data:
        try:
            chunk = s.recv(64)
        except (ConnectionError, socket.timeout):
            return None
        if not chunk:
            return None
        data += chunk
    return int(data.split(b" ", 2)[1])


def clients(srv, path):
    return [m.group(1) for line in list(srv.log_lines) if (m := ACCESS.search(line)) and m.group(2) == path]


def logged_client(srv, port, source, path, headers=()):
    """The client address the mirror's access log names for one request."""
    before = len(clients(srv, path))
    assert request(port, source, path, headers)[0] == 200
    for _ in range(100):
        seen = clients(srv, path)
        if len(seen) > before:
            return seen[-1]
        time.sleep(0.02)
    raise AssertionError(f"no access line for {path}")


def test_forwarded_headers_believed_only_from_a_trusted_proxy(store):
    """The test acts as the proxy from 127.0.0.9 (trusted, as is 127.0.0.10/31): the right-most untrusted
    X-Forwarded-For entry (else Forwarded for=) is the client; a bad entry stops the walk at the hop
    before it. The same headers from 127.0.0.8 (not trusted) are ignored."""
    with Server(store, "--access-log", "--trusted-proxy", "127.0.0.9", "--trusted-proxy", "127.0.0.10/31") as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        refs = f"/api/kernels/{REPO}/refs"
        cases = [
            ([("X-Forwarded-For", "203.0.113.7")], "203.0.113.7"),
            ([("X-Forwarded-For", "198.51.100.1, 203.0.113.7, 127.0.0.11")], "203.0.113.7"),  # trusted hop skipped
            ([("X-Forwarded-For", "198.51.100.1"), ("X-Forwarded-For", "203.0.113.8")], "203.0.113.8"),
            ([("X-Forwarded-For", "not-an-ip, 198.51.100.2")], "198.51.100.2"),
            ([("X-Forwarded-For", "198.51.100.2, not-an-ip")], "127.0.0.9"),
            ([("X-Forwarded-For", "127.0.0.10, 127.0.0.11")], "127.0.0.10"),  # every hop trusted: the first
            ([("X-Forwarded-For", "[2001:db8::5]:443")], "2001:db8::5"),
            ([("Forwarded", 'for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"')], "2001:db8:cafe::17"),
            ([("Forwarded", "for=unknown")], "127.0.0.9"),
            ([("Forwarded", "for=192.0.2.60"), ("X-Forwarded-For", "203.0.113.9")], "203.0.113.9"),  # XFF first
            ([], "127.0.0.9"),
        ]
        for headers, want in cases:
            assert logged_client(srv, port, "127.0.0.9", refs, headers) == want, headers
        for headers, _ in cases:
            assert logged_client(srv, port, "127.0.0.8", refs, headers) == "127.0.0.8", headers


def test_bad_trusted_proxy_is_refused(store):
    for bad in ("10.0.0.300", "10.0.0.0/33", "fd00::/129", "nginx.local", "10.0.0.0/", "::ffff:10.0.0.0/90"):
        r = subprocess.run([hubkern_bin(), "serve", "--cache", str(store), "--port", "0",
                            "--trusted-proxy", bad], capture_output=True, text=True, timeout=10)
        assert r.returncode != 0 and "trusted proxy" in r.stderr and bad in r.stderr, (bad, r.stderr)


def test_nginx_in_front_many_clients_none_refused(store, tmp_path):
    """300 clients at once (each its own address) through nginx, with --max-connections-per-ip 2 and
    nginx trusted: every request is answered, and the mirror's log names each client, not nginx. The
    same without --trusted-proxy trips the limit on nginx's own connections (the control)."""
    results = {}

    sources = [f"127.0.{1 + i // 200}.{i % 200 + 2}" for i in range(300)]

    def burst(port, n):
        out = [None] * n

        def one(i):
            try:
                out[i] = request(port, sources[i], f"/api/kernels/{REPO}/refs")[0]
            except OSError as e:
                out[i] = repr(e)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    for trusted in (True, False):
        args = ["--access-log", "--max-connections-per-ip", "2", "--max-connections", "1000"]
        if trusted:
            args += ["--trusted-proxy", "127.0.0.1"]
        with Server(store, *args) as srv, Nginx(str(tmp_path / str(trusted)), srv.url) as ngx:
            results[trusted] = burst(ngx.port, 300)
            if trusted:
                time.sleep(0.3)  # the last access lines
                seen = set(clients(srv, f"/api/kernels/{REPO}/refs"))
                assert set(sources) <= seen, sorted(set(sources) - seen)[:5]
    assert results[True] == [200] * 300, [r for r in results[True] if r != 200][:5]
    assert any(r != 200 for r in results[False]), "control: without --trusted-proxy nginx should trip the limit"


def test_limit_keyed_on_the_forwarded_client_spoofing_does_not_help(store, tmp_path):
    """--max-connections-per-ip 2 behind nginx: client A (127.0.0.2) with two requests in flight gets 429
    for a third, also when it sends X-Forwarded-For naming another address; client B (127.0.0.3) is
    answered meanwhile, also when it names A. A direct client (127.0.0.4, not trusted) is limited on its
    own connections, whatever X-Forwarded-For it sends."""
    with Server(store, "--access-log", "--max-connections-per-ip", "2", "--trusted-proxy", "127.0.0.1") as srv, \
            Nginx(str(tmp_path / "ngx"), srv.url) as ngx:
        held = [stall(ngx.port, "127.0.0.2") for _ in range(2)]
        try:
            assert [status_line(s) for s in held] == [200, 200]
            for spoof in ((), [("X-Forwarded-For", "198.51.100.77")], [("Forwarded", "for=198.51.100.78")]):
                assert request(ngx.port, "127.0.0.2", f"/api/kernels/{REPO}/refs", spoof)[0] == 429, spoof
            assert request(ngx.port, "127.0.0.3", f"/api/kernels/{REPO}/refs")[0] == 200
            assert request(ngx.port, "127.0.0.3", f"/api/kernels/{REPO}/refs", [("X-Forwarded-For", "127.0.0.2")])[0] == 200
        finally:
            for s in held:
                s.close()
        # A's requests end with its connections: it is answered again
        for _ in range(100):
            if request(ngx.port, "127.0.0.2", f"/api/kernels/{REPO}/refs")[0] == 200:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("client A still refused after its requests ended")
        # directly, from an untrusted peer: its headers are ignored and its connections count
        port = int(srv.url.rsplit(":", 1)[1])
        direct = [stall(port, "127.0.0.4") for _ in range(2)]
        try:
            assert [status_line(s) for s in direct] == [200, 200]
            with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
                request(port, "127.0.0.4", f"/api/kernels/{REPO}/refs", [("X-Forwarded-For", "198.51.100.79")])
            assert request(port, "127.0.0.5", f"/api/kernels/{REPO}/refs")[0] == 200
        finally:
            for s in direct:
                s.close()
