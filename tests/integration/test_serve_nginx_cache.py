"""nginx proxy_cache in front of a pull-through edge (issue 13): clients → nginx → edge → origin.
Wave 1 of clients (`hubkern pull` processes and huggingface_hub.snapshot_download) fills nginx's
cache through the edge; wave 2, into fresh client caches, is served by nginx without the edge seeing
one commit-addressed request (resolve/<commit>/..., tree/<commit>, revision/<commit>), counted in the
edge's access log. Both waves get verified bytes. The nginx configuration is the one docs/serve.md
shows for a fleet (plain HTTP on loopback here; TLS as in test_http2_tls.py)."""
import collections
import grp
import os
import pwd
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from faultproxy import make_variant, publish, run_cli
from hk_serve_helpers import Server
from test_http2_tls import find_nginx, free_port

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/cached"
COMMIT_RE = re.compile(r'"(?:GET|HEAD) [^"]*(?:/resolve/[0-9a-f]{40}/|/tree/[0-9a-f]{40}|/revision/[0-9a-f]{40}|/lfs/)')

# The tested configuration (docs/serve.md, "nginx in front"): {d} the work directory, {port} nginx's,
# {edge} the edge mirror's host:port.
NGINX_CONF = """\
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
    proxy_cache_path {d}/cache levels=1:2 keys_zone=hubkern:10m max_size=50g inactive=30d use_temp_path=off;
    upstream hub_edge {{
        server {edge};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://hub_edge;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_cache hubkern;
            proxy_cache_lock on;                 # concurrent misses of one URL: one request to the edge
            proxy_cache_lock_timeout 300s;
            proxy_cache_use_stale error timeout updating http_500 http_502 http_503 http_504;
            proxy_cache_revalidate on;           # expired branch answers: If-None-Match to the edge
            proxy_read_timeout 300s;
            add_header X-Cache-Status $upstream_cache_status;
        }}
    }}
}}
"""


def clean_env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    e.update({"HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HUBKERN_RETRY_BASE_MS": "20"})
    e.update(kw)
    return e


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
    edge = Server(edge_store, "--upstream", origin.url, "--access-log", "--max-connections-per-ip", "512")
    d = str(base / "nginx")
    os.makedirs(os.path.join(d, "tmp"))
    port = free_port()
    conf = NGINX_CONF.format(d=d, port=port, edge=edge.url.split("://", 1)[1])
    if os.geteuid() == 0:  # workers would drop to nobody, who cannot read the pytest tmp dir
        conf = f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};\n" + conf
    with open(os.path.join(d, "nginx.conf"), "w") as fh:
        fh.write(conf)
    ngx = subprocess.Popen([nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/api/agent-harnesses", timeout=2).read()
                break
            except OSError:
                assert ngx.poll() is None, ngx.stderr.read()
                time.sleep(0.05)
        yield {"url": url, "edge": edge, "origin": origin, "commit": commit, "files": files, "d": d}
    finally:
        ngx.terminate()
        ngx.wait(timeout=10)
        edge.stop()
        origin.stop()


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
