"""hubkern's HTTP client over real TLS + HTTP/2, as the real Hub (CloudFront) serves it.

Debian's nginx (scripts/setup.sh installs nginx-light) runs as the test user with its own config, pid,
logs and temp dirs under the pytest tmp dir and terminates TLS with HTTP/2 (`listen ... ssl http2`) in
front of loopback `hubkern serve` mirrors. A throwaway CA and server certificates come from the openssl
CLI. nginx logs every request as JSON ($server_protocol, $connection, $connection_requests, Range,
status, whether an Authorization header came), which is what the assertions read.

Server blocks (one nginx, each its own port and access log):
  main   good cert -> mirror --token --lfs-302 --page-size 2 --public-url https://127.0.0.1:PORT
  wrong  a cert for another host name (wrong.example.org, 127.0.0.2) -> the main mirror
  far    good cert -> mirror --public-url https://localhost:PORT --lfs-302: its LFS redirects leave the
         endpoint's origin (127.0.0.1 -> localhost)
  cut    good cert -> mirror --fault-cut-after 1000000 --fault-cut-count 1 (first big GET cut)

Checked: a pull through https is complete and byte-identical, speaks only HTTP/2.0 and multiplexes its
downloads over few TLS connections; no CA -> HK_ERR_NETWORK naming SSL_CERT_FILE, at once (no retries);
an unreadable CA file and a wrong-host certificate likewise; a cut download resumes with a Range request
answered 206 over HTTP/2; the token never goes to the redirect's other host; huggingface_hub downloads
through the same proxy with the same CA variable."""
import hashlib
import json
import os
import re
import pwd
import grp
import shutil
import socket
import subprocess
import sys
import time

import pytest

from faultproxy import Server, make_variant, publish, run_cli, serve_bin
from hk_serve_helpers import NO_TEST_HOOKS, serve_has_test_hooks

V = "tvm-ffi01-cpu-x86_64-linux"
REPO = "org/tlskern"
BIG_NAME = f"build/{V}/_testkern.so"
BIG = os.urandom(3_000_000)  # above the 1 MB LFS threshold: sha256 etag, /lfs/ redirect with --lfs-302
SMALL = {f"data/part{i}.bin": os.urandom(50_000 + i) for i in range(6)}
TOKEN = "hf_TLStoken0123456789abcdef"
CUT_AT = 1_000_000


def find_nginx():
    for p in (shutil.which("nginx"), "/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


def make_pki(d):
    """A throwaway CA, a server cert for 127.0.0.1/localhost and one for another name, all signed by it."""
    os.makedirs(d, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hubkern test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    for name, cn, san in (("server", "localhost", "IP:127.0.0.1,DNS:localhost"),
                          ("wrong", "wrong.example.org", "DNS:wrong.example.org,IP:127.0.0.2")):
        with open(os.path.join(d, name + ".ext"), "w") as fh:
            fh.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                     "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        openssl("req", "-new", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn, cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext", cwd=d)
    return {k: os.path.join(d, k + ".pem") for k in ("ca", "server", "wrong")}


# The tested nginx configuration (docs/serve.md shows the same server block for a fleet).
HTTP_CONF = """\
    log_format hk escape=json '{{"conn":$connection,"creq":$connection_requests,"proto":"$server_protocol",'
        '"tls":"$ssl_protocol","host":"$host","method":"$request_method","uri":"$request_uri","status":$status,'
        '"bytes":$body_bytes_sent,"range":"$http_range","auth":"$hk_auth","up":"$upstream_status",'
        '"ua":"$http_user_agent"}}';
    map $http_authorization $hk_auth {{ "" 0; default 1; }}
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:hk_ssl:1m;
"""

SERVER_CONF = """\
    upstream hub_{name} {{
        server {upstream};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port} ssl http2;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        access_log {d}/access-{name}.log hk;
        location / {{
            proxy_pass http://hub_{name};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto https;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
"""


class Nginx:
    """nginx in the foreground (daemon off) under directory d; blocks: {name: (port, upstream_url, cert_pem)}."""

    def __init__(self, nginx, d, blocks):
        self.d = d
        self.blocks = blocks
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        user = ""
        if os.geteuid() == 0:  # workers would drop to nobody, who cannot read the pytest tmp dir
            user = f"user {pwd.getpwuid(0).pw_name} {grp.getgrgid(0).gr_name};\n"
        servers = "".join(SERVER_CONF.format(name=n, port=p, upstream=u.split("://", 1)[1], cert=c,
                                             key=c[:-4] + ".key", d=d) for n, (p, u, c) in blocks.items())
        conf = (f"{user}worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
                f"events {{ worker_connections 256; }}\nhttp {{\n{HTTP_CONF.format(d=d)}{servers}}}\n")
        self.conf = os.path.join(d, "nginx.conf")
        with open(self.conf, "w") as fh:
            fh.write(conf)
        self.proc = subprocess.Popen([nginx, "-p", d, "-c", self.conf, "-e", os.path.join(d, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 15
        pending = {p for p, _, _ in blocks.values()}
        while pending and time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited ({self.proc.returncode}): {self.proc.stderr.read()} "
                                   f"{self.error_log()}\n--- config ---\n{conf}")
            for p in list(pending):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", p)) == 0:
                        pending.discard(p)
            time.sleep(0.02)
        if pending:
            self.close()
            raise RuntimeError(f"nginx did not listen on {pending}: {self.error_log()}")

    def error_log(self):
        try:
            with open(os.path.join(self.d, "error.log")) as fh:
                return fh.read()
        except OSError:
            return ""

    def url(self, name, host="127.0.0.1"):
        return f"https://{host}:{self.blocks[name][0]}"

    def log(self, name):
        """Every request logged so far by block `name` (nginx writes the line when the request ends)."""
        path = os.path.join(self.d, f"access-{name}.log")
        if not os.path.exists(path):
            return []
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: fast shutdown of master and workers
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    nginx = find_nginx()
    if not nginx:
        pytest.fail("nginx is not installed: run scripts/setup.sh (it installs Debian's nginx-light, which this "
                    "TLS + HTTP/2 test runs as its reverse proxy)", pytrace=False)
    base = tmp_path_factory.mktemp("tls")
    pki = make_pki(str(base / "pki"))
    store = str(base / "store")
    files = {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "_testkern.so": BIG, **SMALL}
    src = str(base / "src")
    make_variant(src, V, files)
    commit = publish(src, REPO, "v1", store, ["--lfs-threshold", "1000000"]).strip()
    ports = {n: free_port() for n in ("main", "wrong", "far", "cut")}
    mirrors = []
    try:
        main = Server(store, ["--trust", "org", "--token", TOKEN, "--lfs-302", "--page-size", "2",
                              "--public-url", f"https://127.0.0.1:{ports['main']}"])
        mirrors.append(main)
        far = Server(store, ["--trust", "org", "--token", TOKEN, "--lfs-302",
                             "--public-url", f"https://localhost:{ports['far']}"])
        mirrors.append(far)
        # without the test hooks the "cut" mirror cuts nothing (and its test is skipped)
        faults = ["--fault-cut-after", str(CUT_AT), "--fault-cut-count", "1"] if serve_has_test_hooks(serve_bin()) else []
        cut = Server(store, ["--trust", "org", *faults, "--public-url", f"https://127.0.0.1:{ports['cut']}"])
        mirrors.append(cut)
        ngx = Nginx(nginx, str(base / "nginx"), {
            "main": (ports["main"], main.url, pki["server"]),
            "wrong": (ports["wrong"], main.url, pki["wrong"]),
            "far": (ports["far"], far.url, pki["server"]),
            "cut": (ports["cut"], cut.url, pki["server"]),
        })
        ngx.pki, ngx.commit, ngx.files = pki, commit, {f"build/{V}/{k}": v for k, v in files.items()}
        yield ngx
        ngx.close()
    finally:
        for m in mirrors:
            m.close()


def run(args, env=None, check=True):
    """hubkern with no CA variables, token or endpoint from the caller's environment, plus env."""
    return run_cli([str(a) for a in args], env=env, check=check, timeout=120,
                   unset=("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "SSL_CERT_FILE",
                          "SSL_CERT_DIR", "CURL_CA_BUNDLE"),
                   base_env={"HUBKERN_RETRY_BASE_MS": "20"})


def pull(url, cache, env=None, check=True):
    return run(["pull", REPO, "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache", cache],
               env=env, check=check)


def assert_snapshot(tls, out):
    assert out["commit"] == tls.commit
    want = dict(tls.files)
    assert sorted(out["files"]) == sorted([*want, f"build/{V}/metadata.json"])
    for rel, data in want.items():
        with open(os.path.join(out["snapshot"], rel), "rb") as fh:
            assert hashlib.sha256(fh.read()).digest() == hashlib.sha256(data).digest(), rel
    total = sum(len(v) for v in want.values())
    assert out["bytes_verified"] == out["bytes_downloaded"] > total  # + metadata.json
    v = run(["cache", "verify", "--cache", out["cache"]], check=False)
    assert v.returncode == 0 and v.stdout.strip().splitlines()[-1].startswith("clean"), v.stdout


def hubkern_entries(entries):
    return [e for e in entries if e["ua"].startswith("hubkern/")]


def test_pull_over_tls_http2_multiplexed(tls, tmp_path):
    cache = str(tmp_path / "c")
    before = len(tls.log("main"))
    t0 = time.time()
    out = json.loads(pull(tls.url("main"), cache, env={"SSL_CERT_FILE": tls.pki["ca"], "HF_TOKEN": TOKEN}).stdout)
    took = time.time() - t0
    assert_snapshot(tls, out)
    assert out["files_downloaded"] == len(tls.files) + 1
    log = hubkern_entries(tls.log("main")[before:])
    assert log, "nginx logged no request from hubkern"
    # every request hubkern sent went over HTTP/2 on TLS, with the token (same origin throughout)
    assert {e["proto"] for e in log} == {"HTTP/2.0"}, {e["proto"] for e in log}
    assert all(e["tls"] in ("TLSv1.2", "TLSv1.3") and e["auth"] == "1" for e in log), log
    assert all(e["status"] in (200, 302) or e["uri"].endswith("/kernel-status.toml") and e["status"] == 404
               for e in log), [(e["uri"], e["status"]) for e in log]
    # the tree listing was paginated (page size 2): the client followed Link: <https://...>; rel="next"
    assert sum(1 for e in log if "/tree/" in e["uri"]) >= 3
    # LFS files (the big one included) went through the mirror's signed /lfs/ redirect on the same https origin
    assert [e["status"] for e in log if e["uri"].endswith(BIG_NAME)] == [302]
    lfs = [e for e in log if e["uri"].startswith("/lfs/")]
    assert len(lfs) == sum(1 for e in log if e["status"] == 302)
    big_sha = hashlib.sha256(BIG).hexdigest()
    assert [(e["status"], e["bytes"]) for e in lfs if big_sha in e["uri"]] == [(200, len(BIG))]
    # multiplexing: a handful of TLS connections carry everything; the downloads share one
    conns = {}
    for e in log:
        conns.setdefault(e["conn"], []).append(e)
    downloads = [e for e in log if "/resolve/" in e["uri"] or e["uri"].startswith("/lfs/")]
    assert len(downloads) >= len(tls.files) + 2
    busiest = max(conns.values(), key=len)
    print(f"pull over https: {len(log)} requests on {len(conns)} TLS connections "
          f"({sorted(len(v) for v in conns.values())}), {took:.2f} s")
    assert len(conns) <= 3, {c: len(v) for c, v in conns.items()}
    assert sum(1 for e in busiest if e in downloads) >= len(tls.files), {c: len(v) for c, v in conns.items()}
    assert max(e["creq"] for e in busiest) >= len(tls.files)


def test_pull_without_the_ca_fails_with_a_tls_error(tls, tmp_path):
    cache = str(tmp_path / "c")
    before = len(tls.log("main"))
    # retries would wait >= 5 s each: a fast failure proves a rejected certificate is not retried
    t0 = time.time()
    r = pull(tls.url("main"), cache, env={"HUBKERN_RETRY_BASE_MS": "5000", "HF_TOKEN": TOKEN}, check=False)
    took = time.time() - t0
    print(r.stderr)
    assert r.returncode == 1, r.stdout
    assert "[HK_ERR_NETWORK]" in r.stderr, r.stderr
    assert "TLS certificate of https://127.0.0.1:" in r.stderr and "was rejected" in r.stderr, r.stderr
    assert "SSL_CERT_FILE" in r.stderr and "CURL_CA_BUNDLE" in r.stderr, r.stderr
    assert "unable to get local issuer certificate" in r.stderr, r.stderr  # libcurl/OpenSSL's detail
    assert took < 4, f"took {took:.1f} s: the TLS failure was retried"
    assert len(tls.log("main")) == before  # no request got through
    blobs = os.path.join(cache, "kernels--org--tlskern", "blobs")
    assert not os.path.isdir(blobs) or os.listdir(blobs) == []
    # a CA bundle variable naming a file that does not exist: its own message
    r = pull(tls.url("main"), cache, env={"SSL_CERT_FILE": str(tmp_path / "nope.pem"), "HF_TOKEN": TOKEN},
             check=False)
    print(r.stderr)
    assert r.returncode == 1 and "[HK_ERR_NETWORK]" in r.stderr, r.stderr
    assert "cannot use the CA bundle" in r.stderr and "SSL_CERT_FILE or CURL_CA_BUNDLE" in r.stderr, r.stderr
    # CURL_CA_BUNDLE is read as well (SSL_CERT_FILE first)
    out = json.loads(pull(tls.url("main"), cache, env={"CURL_CA_BUNDLE": tls.pki["ca"], "HF_TOKEN": TOKEN}).stdout)
    assert_snapshot(tls, out)


def test_certificate_for_another_host_fails(tls, tmp_path):
    cache = str(tmp_path / "c")
    t0 = time.time()
    r = pull(tls.url("wrong"), cache, env={"SSL_CERT_FILE": tls.pki["ca"], "HUBKERN_RETRY_BASE_MS": "5000",
                                           "HF_TOKEN": TOKEN}, check=False)
    took = time.time() - t0
    print(r.stderr)
    assert r.returncode == 1 and "[HK_ERR_NETWORK]" in r.stderr, r.stderr
    assert "was rejected" in r.stderr and "host name" in r.stderr, r.stderr
    # libcurl's own reason, carried (7.88: "target host name '127.0.0.1'", 8.x: "target ipv4 address ...")
    assert re.search(r"no alternative certificate subject name matches target (host name|ipv4 address) '127\.0\.0\.1'",
                     r.stderr), r.stderr
    assert took < 4, f"took {took:.1f} s: the TLS failure was retried"
    assert hubkern_entries(tls.log("wrong")) == []
    # the same CA verifies the good certificate of the same mirror (so the name was the only fault)
    out = json.loads(pull(tls.url("main"), cache, env={"SSL_CERT_FILE": tls.pki["ca"], "HF_TOKEN": TOKEN}).stdout)
    assert out["commit"] == tls.commit


def test_cut_download_resumes_with_range_over_http2(tls, tmp_path):
    if not serve_has_test_hooks(serve_bin()):
        pytest.skip(NO_TEST_HOOKS)
    cache = str(tmp_path / "c")
    r = pull(tls.url("cut"), cache, env={"SSL_CERT_FILE": tls.pki["ca"], "HUBKERN_VERBOSE": "1"})
    out = json.loads(r.stdout)
    assert_snapshot(tls, out)
    # the client saw the cut (libcurl's error text) and resumed where it stopped
    cut_lines = [ln for ln in r.stderr.splitlines() if "while downloading " + BIG_NAME in ln]
    print(cut_lines)
    assert len(cut_lines) == 1 and "resuming" in cut_lines[0] and "HTTP/2 stream" in cut_lines[0], r.stderr
    log = hubkern_entries(tls.log("cut"))
    assert {e["proto"] for e in log} == {"HTTP/2.0"}
    big = [e for e in log if e["uri"].endswith(BIG_NAME)]
    print("big file requests:", [(e["status"], e["range"], e["bytes"], e["up"]) for e in big])
    # first GET: 200 from the mirror, cut by it after CUT_AT bytes (nginx passed on what it had)
    assert big[0]["range"] == "" and big[0]["status"] == 200 and big[0]["bytes"] <= CUT_AT
    # then a resume asking for the rest: 206 from the mirror through nginx, over the same HTTP/2 proxy
    assert len(big) == 2, big
    assert big[1]["range"].startswith("bytes=") and big[1]["range"].endswith("-"), big[1]
    start = int(big[1]["range"][6:-1])
    assert 0 < start <= CUT_AT
    assert big[1]["status"] == 206 and big[1]["up"] == "206" and big[1]["bytes"] == len(BIG) - start


def test_redirect_to_another_host_gets_no_token(tls, tmp_path):
    cache = str(tmp_path / "c")
    out = json.loads(pull(tls.url("far"), cache, env={"SSL_CERT_FILE": tls.pki["ca"], "HF_TOKEN": TOKEN}).stdout)
    assert_snapshot(tls, out)
    log = hubkern_entries(tls.log("far"))
    assert {e["proto"] for e in log} == {"HTTP/2.0"}
    own = [e for e in log if e["host"] == "127.0.0.1"]
    other = [e for e in log if e["host"] == "localhost"]
    assert len(own) + len(other) == len(log)
    assert own and all(e["auth"] == "1" and not e["uri"].startswith("/lfs/") for e in own), own
    # the LFS redirects named https://localhost:PORT: another origin, so no Authorization there
    assert len(other) == sum(1 for e in own if e["status"] == 302) >= 1, other
    assert all(e["uri"].startswith("/lfs/") and e["auth"] == "0" and e["status"] == 200 for e in other), other
    big_sha = hashlib.sha256(BIG).hexdigest()
    assert [e["bytes"] for e in other if big_sha in e["uri"]] == [len(BIG)]


def test_huggingface_hub_through_the_same_proxy(tls, tmp_path):
    cache = str(tmp_path / "hf")
    before = len(tls.log("main"))
    code = (
        "import sys\n"
        "from huggingface_hub import hf_hub_download, snapshot_download\n"
        f"p = hf_hub_download({REPO!r}, {BIG_NAME!r}, repo_type='kernel', revision='v1', cache_dir={cache!r})\n"
        f"s = snapshot_download({REPO!r}, repo_type='kernel', revision='v1', cache_dir={cache!r})\n"
        "print(p); print(s)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HOME", "SSL_CERT_DIR", "CURL_CA_BUNDLE",
                        "REQUESTS_CA_BUNDLE", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_ENDPOINT=tls.url("main"), SSL_CERT_FILE=tls.pki["ca"], HF_TOKEN=TOKEN,
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    py = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert py.returncode == 0, py.stderr
    p, snap = py.stdout.strip().splitlines()[-2:]
    assert p == os.path.join(snap, BIG_NAME)
    for rel, data in tls.files.items():
        with open(os.path.join(snap, rel), "rb") as fh:
            assert fh.read() == data, rel
    assert os.path.basename(snap) == tls.commit
    hf = [e for e in tls.log("main")[before:] if not e["ua"].startswith("hubkern/")]
    assert hf and all(e["tls"] in ("TLSv1.2", "TLSv1.3") for e in hf), hf
    assert any(e["uri"].startswith("/lfs/") and e["status"] == 200 for e in hf)
    print("huggingface_hub protocols:", sorted({e["proto"] for e in hf}))
