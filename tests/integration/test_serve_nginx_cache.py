"""nginx proxy_cache in front of a pull-through edge (issue 13): clients → nginx → edge → origin.
Wave 1 of clients (`hubkern pull` processes and huggingface_hub.snapshot_download) fills nginx's
cache through the edge; wave 2, into fresh client caches, is served by nginx without the edge seeing
one commit-addressed request (resolve/<commit>/..., tree/<commit>, revision/<commit>), counted in the
edge's access log. Both waves get verified bytes. The nginx configuration is the one docs/serve.md
shows for a fleet (plain HTTP on loopback here; TLS as in test_http2_tls.py)."""
import collections
import grp
import hashlib
import http.client
import os
import pathlib
import pwd
import re
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request

import pytest

from faultproxy import make_variant, publish, run_cli
from hk_serve_helpers import Server
from test_http2_tls import find_nginx, free_port

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/cached"
COMMIT_RE = re.compile(r'"(?:GET|HEAD) [^"]*(?:/resolve/[0-9a-f]{40}/|/tree/[0-9a-f]{40}|/revision/[0-9a-f]{40}|/lfs/)')

# The tested configuration is docs/nginx-fleet.conf itself (docs/serve.md quotes it): only the cache
# path, the edge's address and the listen line are replaced, each of which must occur exactly once.
# The wrapper around it is what an unprivileged nginx needs ({d} the work directory).
SRC = pathlib.Path(__file__).resolve().parents[2]
FLEET_CONF = SRC / "docs" / "nginx-fleet.conf"
NGINX_MAIN = """\
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 512; }}
http {{
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    log_format hk '$request_method $request_uri $status $upstream_cache_status';
    access_log {d}/access.log hk;
    include {d}/fleet.conf;
}}
"""


def fleet_conf(d, port, edge):
    text = FLEET_CONF.read_text()
    for old, new in (("/var/cache/nginx/hubkern", f"{d}/cache"), ("server 127.0.0.1:8080;", f"server {edge};"),
                     ("listen 80;", f"listen 127.0.0.1:{port};")):
        assert text.count(old) == 1, (old, "docs/nginx-fleet.conf changed: adapt the test's substitutions")
        text = text.replace(old, new)
    return text


def test_docs_quote_the_tested_file():
    md = (SRC / "docs" / "serve.md").read_text()
    blocks = re.findall(r"```nginx\n(.*?)```", md, re.S)
    want = FLEET_CONF.read_text()
    assert any(textwrap.dedent(b) == want for b in blocks), "docs/serve.md must quote docs/nginx-fleet.conf verbatim"


def clean_env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    e.update({"HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HUBKERN_RETRY_BASE_MS": "20"})
    e.update(kw)
    return e


def start_nginx(nginx, d, port, edge_url):
    """nginx running docs/nginx-fleet.conf in front of edge_url, on 127.0.0.1:port, answering."""
    os.makedirs(os.path.join(d, "tmp"))
    with open(os.path.join(d, "fleet.conf"), "w") as fh:
        fh.write(fleet_conf(d, port, edge_url.split("://", 1)[1]))
    conf = NGINX_MAIN.format(d=d)
    if os.geteuid() == 0:  # workers would drop to nobody, who cannot read the pytest tmp dir
        conf = f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};\n" + conf
    with open(os.path.join(d, "nginx.conf"), "w") as fh:
        fh.write(conf)
    ngx = subprocess.Popen([nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/api/agent-harnesses", timeout=2).read()
            break
        except OSError:
            assert ngx.poll() is None, ngx.stderr.read()
            time.sleep(0.05)
    return ngx


def stop_nginx(ngx):
    ngx.terminate()
    ngx.wait(timeout=10)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    nginx = find_nginx()
    if not nginx:
        pytest.fail("nginx is not installed: run scripts/setup.sh (it installs nginx-light)", pytrace=False)
    base = tmp_path_factory.mktemp("ngx")
    store, edge_store = base / "origin", base / "edge"
    edge_store.mkdir()
    files = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "_k.so": os.urandom(1_200_000),
             **{f"data/p{i}.bin": os.urandom(40_000 + i) for i in range(4)}}
    make_variant(str(base / "src"), V, files)
    commit = publish(str(base / "src"), REPO, "v1", str(store), ["--lfs-threshold", "100000"]).strip()
    origin = Server(store, "--trust", "org", "--access-log")
    port = free_port()
    # the fleet's edge as docs/serve.md starts it: --public-url names nginx as clients reach it;
    # --lfs-302 and small pages so that cached answers carry a Location and Links
    edge = Server(edge_store, "--upstream", origin.url, "--access-log", "--max-connections-per-ip", "512",
                  "--public-url", f"http://127.0.0.1:{port}", "--lfs-302", "--page-size", "3")
    d = str(base / "nginx")
    ngx = start_nginx(nginx, d, port, edge.url)
    try:
        yield {"url": f"http://127.0.0.1:{port}", "edge": edge, "origin": origin, "commit": commit, "files": files,
               "d": d, "port": port, "nginx": nginx, "base": base}
    finally:
        stop_nginx(ngx)
        edge.stop()
        origin.stop()


class Attacker:
    """The host a poisoned Link or Location would send clients to: records every request."""

    def __init__(self):
        import http.server

        seen = self.seen = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append((self.command, self.path, self.headers.get("Authorization")))
                body = b"[]" if "/api/" in self.path else b"attacker bytes"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.host = f"127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()


def get(url, path, host=None, method="GET"):
    h, p = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(h, int(p), timeout=30)
    conn.request(method, path, headers={"Host": host} if host else {})
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}


def poison_and_check(url, commit, attacker, nginx_origin):
    """Hostile-Host requests for every URL shape that carries a Link or a Location, then the same
    URLs as an honest client: what nginx answers from its cache must not name the attacker."""
    paths = [f"/api/kernels/{REPO}/tree/{commit}{q}" for q in
             ("?recursive=true&expand=false", "?recursive=True&expand=False", "?recursive=true", "")]
    paths += [f"/api/kernels/{REPO}/tree/{commit}/build/{V}?recursive=false&expand=false",
              f"/api/kernels/{REPO}/tree/v1?recursive=true&expand=false",
              f"/kernels/{REPO}/resolve/{commit}/build/{V}/_k.so", f"/kernels/{REPO}/resolve/v1/build/{V}/_k.so"]
    for path in paths:
        for method in ("GET", "HEAD"):
            get(url, path, host=attacker.host, method=method)
    cached, bad = 0, []
    for path in paths:
        st, h = get(url, path)
        cached += h.get("x-cache-status") == "HIT"
        for name in ("link", "location"):
            v = h.get(name, "")
            target = v[1:v.index(">")] if name == "link" and v else v
            if target and not (target.startswith("/") or target.startswith(nginx_origin + "/")):
                bad.append((path, name, v))
    assert bad == [], bad
    assert cached >= len(paths) - 1, cached  # the hostile answers were cached: they are what clients get


def hf_client(url, commit, cache, token):
    """huggingface_hub through nginx: a listing followed page by page, and the LFS file (302)."""
    code = ("from huggingface_hub import HfApi, hf_hub_download;"
            f"api = HfApi(endpoint={url!r}, token={token!r});"
            f"n = len(list(api.list_repo_tree({REPO!r}, repo_type='kernel', revision={commit!r}, recursive=True)));"
            f"p = hf_hub_download({REPO!r}, 'build/{V}/_k.so', repo_type='kernel', revision={commit!r},"
            f" endpoint={url!r}, token={token!r}, cache_dir={str(cache)!r});"
            "import hashlib; print(n, hashlib.sha256(open(p, 'rb').read()).hexdigest())")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(HF_ENDPOINT=url))


def test_hostile_host_cannot_poison_links_or_redirects(chain, tmp_path):
    """S1/S1b: a request with a hostile Host used to be answered with a Link and a --lfs-302
    Location naming that host, which nginx (key without Host) then served to every client:
    huggingface_hub sent its bearer token there, and downloaded the attacker's bytes."""
    attacker = Attacker()
    try:
        # the documented fleet edge (--public-url): links name nginx whatever the Host
        poison_and_check(chain["url"], chain["commit"], attacker, chain["url"])
        for token in ("hf_client_secret", False):
            r = hf_client(chain["url"], chain["commit"], tmp_path / f"hf-{bool(token)}", token)
            assert r.returncode == 0, r.stderr[-3000:]
            n, digest = r.stdout.split()
            assert int(n) > len(chain["files"]) and digest == hashlib.sha256(chain["files"]["_k.so"]).hexdigest()
        # an edge without --public-url behind the same configuration: links and redirects relative
        port = free_port()
        edge = Server(chain["base"] / "edge", "--upstream", chain["origin"].url, "--access-log", "--lfs-302",
                      "--page-size", "3", "--max-connections-per-ip", "512")
        ngx = start_nginx(chain["nginx"], str(tmp_path / "nginx2"), port, edge.url)
        url2 = f"http://127.0.0.1:{port}"
        try:
            poison_and_check(url2, chain["commit"], attacker, url2)
            # hubkern's client follows relative Links and Locations
            cache = tmp_path / "hk"
            p = subprocess.run([os.environ["HUBKERN_BIN"], "pull", REPO, "--version", "1", "--variant", V,
                                "--endpoint", url2, "--cache", str(cache)], capture_output=True, text=True,
                               env=clean_env(HF_TOKEN="hk_client_secret"), timeout=120)
            assert p.returncode == 0, p.stderr
            snap = cache / "kernels--org--cached" / "snapshots" / chain["commit"] / "build" / V
            assert (snap / "_k.so").read_bytes() == chain["files"]["_k.so"]
            # huggingface_hub follows the relative Location (urljoin), not a relative Link: its
            # listing fails with a clear error and nothing reaches another host
            r = hf_client(url2, chain["commit"], tmp_path / "hf2", "hf_client_secret")
            assert "missing an 'http://' or 'https://' protocol" in r.stderr, r.stderr[-2000:]
        finally:
            stop_nginx(ngx)
            edge.stop()
        assert attacker.seen == [], attacker.seen  # no client, no token, ever reached the attacker
    finally:
        attacker.close()


def edge_lines(chain):
    return [line for line in chain["edge"].log_lines if " access " in line]


def settle(chain):
    """The edge's access log once it has stopped growing (lines follow the answers)."""
    last, since = -1, time.time()
    while time.time() - since < 0.4:
        n = len(edge_lines(chain))
        if n != last:
            last, since = n, time.time()
        time.sleep(0.05)
    return last


def wave(chain, tmp, tag, n_hubkern=3, n_python=2):
    procs = []
    for i in range(n_hubkern):
        cache = tmp / f"{tag}-hk{i}"
        procs.append(("hk", cache, subprocess.Popen(
            [os.environ["HUBKERN_BIN"], "pull", REPO, "--version", "1", "--variant", V, "--endpoint", chain["url"],
             "--cache", str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())))
    for i in range(n_python):
        cache = tmp / f"{tag}-py{i}"
        code = ("from huggingface_hub import snapshot_download;"
                f"print(snapshot_download({REPO!r}, repo_type='kernel', revision={chain['commit']!r},"
                f" cache_dir={str(cache)!r}, allow_patterns=['build/{V}/*']))")
        procs.append(("py", cache, subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE, text=True,
                                                    env=clean_env(HF_ENDPOINT=chain["url"]))))
    for kind, cache, p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, (kind, err)
        snap = cache / "kernels--org--cached" / "snapshots" / chain["commit"] / "build" / V
        for rel, data in chain["files"].items():
            assert (snap / rel).read_bytes() == data, (kind, rel)
        if kind == "hk":
            v = run_cli(["cache", "verify", "--cache", str(cache)], check=False)
            assert v.returncode == 0, v.stdout + v.stderr


def test_second_wave_is_served_by_nginx_without_the_edge(chain, tmp_path):
    n0 = settle(chain)
    wave(chain, tmp_path, "w1")
    n1 = settle(chain)
    first = edge_lines(chain)[n0:n1]
    assert any(COMMIT_RE.search(line) for line in first), "\n".join(first)  # wave 1 did go through the edge
    wave(chain, tmp_path, "w2")
    n2 = settle(chain)
    second = edge_lines(chain)[n1:n2]
    reached = [line for line in second if COMMIT_RE.search(line)]
    assert reached == [], "\n".join(second)
    with open(os.path.join(chain["d"], "access.log")) as fh:
        ngx = [line.split() for line in fh]
    # every commit-addressed answer of wave 2 came from nginx's cache
    assert any(f[3] == "HIT" for f in ngx), ngx[-20:]
    print(f"edge requests: wave 1 {len(first)} ({sum(1 for x in first if COMMIT_RE.search(x))} by commit), "
          f"wave 2 {len(second)} (by commit: {len(reached)}); nginx: "
          f"{collections.Counter(f[3] for f in ngx)}; second-wave edge lines: {second}")
    # the origin saw each blob once for both waves (the edge kept what it fetched)
    blobs = [line for line in chain["origin"].log_lines if " access " in line and "/resolve/" in line and "GET" in line]
    paths = [re.search(r'"GET ([^"]+)"', line).group(1) for line in blobs]
    assert len(paths) == len(set(paths)), "\n".join(blobs)


def test_answers_that_depend_on_the_token_are_not_cached(chain, tmp_path):
    """With --token the edge's answers are `private` (Vary: Authorization): nginx as configured
    stores none, so a client without the token never gets what one with it was answered."""
    port = free_port()
    edge = Server(chain["base"] / "edge", "--upstream", chain["origin"].url, "--token", "tok:org",
                  "--public-url", f"http://127.0.0.1:{port}", "--max-connections-per-ip", "512")
    ngx = start_nginx(chain["nginx"], str(tmp_path / "nginx3"), port, edge.url)
    url = f"http://127.0.0.1:{port}"
    try:
        paths = [f"/kernels/{REPO}/resolve/{chain['commit']}/build/{V}/_ops.py",
                 f"/api/kernels/{REPO}/tree/{chain['commit']}?recursive=true", f"/api/kernels/{REPO}/refs"]
        for path in paths:
            for _ in range(2):
                req = urllib.request.Request(url + path, headers={"Authorization": "Bearer tok"})
                with urllib.request.urlopen(req, timeout=30) as r:
                    assert r.status == 200 and r.headers.get("X-Cache-Status") != "HIT", path
                    assert r.headers["Cache-Control"].startswith("private"), r.headers["Cache-Control"]
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                try:
                    urllib.request.urlopen(urllib.request.Request(url + path, headers=headers), timeout=30)
                    raise AssertionError(f"{path} answered without the token")
                except urllib.error.HTTPError as e:
                    assert e.code == 401 and e.headers.get("X-Cache-Status") != "HIT", (path, e.code)
    finally:
        stop_nginx(ngx)
        edge.stop()
