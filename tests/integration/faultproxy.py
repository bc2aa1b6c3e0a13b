"""Fault-injecting HTTP proxy for hubkern's pull tests, plus helpers to run a real `hubkern serve`.

The proxy sits on loopback in front of the real mirror (`hubkern serve`) and forwards every request,
except that rules can, for the first N matching requests: cut the body after K bytes, answer with a
status (429 + Retry-After, 503, ...), stall, drip the body at a few bytes per second, send a body of
the wrong size, flip a byte, redirect to another origin, ignore Range, or rewrite a JSON listing (and
set headers on it, e.g. a lying Link). Every request is logged (method, path, status, whether an
Authorization header came, Range, arrival time, body bytes sent, the client's port: its connection)
so that tests can count GETs, connections and bytes, check where the token went and time the client.

Usage as a module (tests) or as a script (a process a test can kill): python3 faultproxy.py
--upstream http://127.0.0.1:PORT [--rule JSON ...]
"""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_HEADERS = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "host"}


class Rule:
    """One fault. `match` is a regex searched in the request path; `count` requests are affected
    (None = all). kind: cut | status | stall | drip | resize | corrupt | redirect | ignore_range | json | answer.
    cut: `after` bytes, then closed (with `stall`: that many seconds of silence first).
    drip: the body is sent `chunk` bytes (default 1) at a time, `rate` bytes per second (default 4);
    with `after`, only the bytes past that offset drip (the first `after` go at full speed)."""

    def __init__(self, kind, match, count=1, method="GET", **params):
        self.kind, self.match, self.count, self.method, self.params = kind, re.compile(match), count, method, params
        self.hits = 0

    def take(self, method, path):
        if self.method and method != self.method:
            return False
        if not self.match.search(path):
            return False
        if self.count is not None and self.hits >= self.count:
            return False
        self.hits += 1
        return True


class FaultProxy:
    def __init__(self, upstream, host="127.0.0.1", rules=None):
        u = urllib.parse.urlsplit(upstream)
        self.up_host, self.up_port = u.hostname, u.port or 80
        self.host = host
        self.rules = list(rules or [])
        self.log = []
        self.lock = threading.Lock()
        self.conns = set()  # the open client connections: closed too when the proxy goes away
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with proxy.lock:
                    proxy.conns.add(self.connection)

            def finish(self):
                with proxy.lock:
                    proxy.conns.discard(self.connection)
                super().finish()

            def do_GET(self):
                proxy._handle(self, "GET")

            def do_HEAD(self):
                proxy._handle(self, "HEAD")

            def do_POST(self):
                proxy._handle(self, "POST")

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        """Gone: no new connection, and the kept-alive ones closed (a client that keeps its
        connections open must not go on being answered by a proxy that was closed)."""
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    # -- bookkeeping ------------------------------------------------------------------------------
    def requests(self, method=None, pattern=None):
        with self.lock:
            return [e for e in self.log if (method is None or e["method"] == method)
                    and (pattern is None or re.search(pattern, e["path"]))]

    def _rule(self, method, path):
        with self.lock:
            for r in self.rules:
                if r.take(method, path):
                    return r
        return None

    # -- request handling -------------------------------------------------------------------------
    def _handle(self, h, method):
        path = h.path
        entry = {"method": method, "path": path, "auth": h.headers.get("Authorization"),
                 "range": h.headers.get("Range"), "status": None, "fault": None, "t": time.monotonic(), "sent": 0,
                 "peer": h.client_address[1]}
        with self.lock:
            self.log.append(entry)
        body = b""
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("Content-Length", "0") or 0))
        rule = self._rule(method, path)
        entry["fault"] = rule.kind if rule else None
        if rule and rule.kind == "status":
            entry["status"] = rule.params.get("status", 503)
            payload = json.dumps({"error": "injected fault"}).encode()
            h.send_response(entry["status"])
            for k, v in rule.params.get("headers", {}).items():
                h.send_header(k, str(v))
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            if method != "HEAD":
                h.wfile.write(payload)
            return
        if rule and rule.kind == "answer":  # a canned answer instead of the mirror's: status, body, headers
            entry["status"] = rule.params.get("status", 200)
            self._send(h, entry["status"], list(rule.params.get("headers", {}).items()), rule.params.get("body", b""),
                       method)
            return
        if rule and rule.kind == "redirect":
            entry["status"] = rule.params.get("status", 302)
            h.send_response(entry["status"])
            h.send_header("Location", rule.params["target"].rstrip("/") + path)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if rule and rule.kind == "stall":
            time.sleep(rule.params.get("seconds", 5))
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_HEADERS}
        if rule and rule.kind == "ignore_range":
            headers.pop("Range", None)
            headers.pop("range", None)
        conn = http.client.HTTPConnection(self.up_host, self.up_port, timeout=60)
        try:
            conn.request(method, path, body=body if method == "POST" else None, headers=headers)
            resp = conn.getresponse()
            entry["status"] = resp.status
            out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_HEADERS]
            if rule and rule.kind == "json":
                data = resp.read()
                doc = json.loads(data)
                doc = rule.params["fn"](doc)
                data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()  # bytes: sent as they are
                extra = rule.params.get("headers")  # {name: value} or fn(path) -> {name: value}
                if callable(extra):
                    extra = extra(path)
                if extra:
                    names = {k.lower() for k in extra}
                    out_headers = [(k, v) for k, v in out_headers if k.lower() not in names] + list(extra.items())
                self._send(h, resp.status, out_headers, data, method)
                return
            if rule and rule.kind in ("resize", "corrupt"):
                data = resp.read()
                if rule.kind == "resize":
                    delta = rule.params.get("delta", -1)
                    data = data[:delta] if delta < 0 else data + b"\0" * delta
                else:
                    off = rule.params.get("offset", len(data) // 2)
                    if data:
                        data = data[:off] + bytes([data[off] ^ 0xFF]) + data[off + 1:]
                self._send(h, resp.status, out_headers, data, method)
                return
            # streamed pass-through (optionally cut)
            cut = rule.params.get("after", 1 << 20) if rule and rule.kind == "cut" else None
            drip = rule if rule and rule.kind == "drip" else None
            h.send_response(resp.status)
            for k, v in out_headers:
                h.send_header(k, v)
            h.end_headers()
            if method == "HEAD":
                return
            sent = 0
            while True:
                chunk = resp.read(65536)
                if not chunk:
                    break
                if drip is not None:
                    fast = max(0, drip.params.get("after", 0) - sent)
                    if fast:
                        h.wfile.write(chunk[:fast])
                        h.wfile.flush()
                        sent += len(chunk[:fast])
                        entry["sent"] = sent
                        chunk = chunk[fast:]
                    step = drip.params.get("chunk", 1)
                    for i in range(0, len(chunk), step):
                        time.sleep(step / drip.params.get("rate", 4))
                        h.wfile.write(chunk[i:i + step])
                        h.wfile.flush()
                        sent += len(chunk[i:i + step])
                        entry["sent"] = sent
                    continue
                if cut is not None and sent + len(chunk) >= cut:
                    h.wfile.write(chunk[: cut - sent])
                    h.wfile.flush()
                    entry["sent"] = cut
                    entry["cut_at"] = cut
                    if rule.params.get("stall"):  # stops mid-body: silent for that long, then closes
                        time.sleep(rule.params["stall"])
                    h.close_connection = True
                    try:
                        h.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                h.wfile.write(chunk)
                sent += len(chunk)
                entry["sent"] = sent
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
        finally:
            conn.close()

    def sent(self, method=None, pattern=None):
        """Body bytes sent for the matching requests, in all."""
        return sum(e["sent"] for e in self.requests(method, pattern))

    @staticmethod
    def _send(h, status, headers, data, method):
        h.send_response(status)
        for k, v in headers:
            if k.lower() != "content-length":
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if method != "HEAD":
            h.wfile.write(data)


# ---- the real mirror ----------------------------------------------------------------------------
def hubkern_bin():
    return os.environ.get("HUBKERN_BIN") or os.path.join(os.environ.get("HK_BUILD_DIR", "build"), "cli", "hubkern")


def serve_bin():
    """The binary that runs `serve`/`publish` (the same hubkern unless HK_SERVE_BIN says otherwise)."""
    return os.environ.get("HK_SERVE_BIN") or hubkern_bin()


def run_cli(args, env=None, check=True, unset=("HF_HUB_OFFLINE",), base_env=None, **kw):
    """Run `hubkern ARGS...` (output captured as text) in os.environ minus the variables in `unset`,
    plus `base_env`, plus `env`; extra keywords go to subprocess.run (timeout=...). With check, a
    non-zero exit raises AssertionError carrying the command's stdout and stderr."""
    e = dict(os.environ)
    for k in unset:
        e.pop(k, None)
    e.update(base_env or {})
    e.update(env or {})
    r = subprocess.run([hubkern_bin(), *args], capture_output=True, text=True, env=e, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"hubkern {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def digest_files(variant_dir):
    """metadata.json digest of a variant directory (kernel-hub-format.md section 7), sha256."""
    import base64
    import hashlib
    files = {}
    for dirpath, dirnames, filenames in os.walk(variant_dir, followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, variant_dir).replace(os.sep, "/")
            if rel in ("metadata.json", "metadata.json.sigstore") or f.endswith(".pyc"):
                continue
            with open(full, "rb") as fh:
                files[rel] = base64.b64encode(hashlib.sha256(fh.read()).digest()).decode()
    return files


def make_variant(root, name, files, version=1, backend="cpu", digest=True, tamper=None):
    """Write build/<name>/ under root with `files` {relpath: bytes} and a metadata.json."""
    vdir = os.path.join(root, "build", name)
    for rel, data in files.items():
        path = os.path.join(vdir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    meta = {"name": "testkern", "id": "_testkern_" + backend + "_0123abc", "version": version, "license": "MIT",
            "python-depends": [], "backend": {"type": backend}, "kernel-depends": []}
    if digest:
        d = digest_files(vdir)
        if tamper:
            tamper(d)
        meta["digest"] = {"algorithm": "sha256", "files": d}
    with open(os.path.join(vdir, "metadata.json"), "w") as fh:
        json.dump(meta, fh)
    return vdir


class Server:
    """`hubkern serve --cache STORE --host 127.0.0.1 --port 0` in the background."""

    def __init__(self, store, extra=(), env=None):
        self.proc = subprocess.Popen([serve_bin(), "serve", "--cache", store, "--host", "127.0.0.1", "--port", "0",
                                      *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"hubkern serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = m.group(1).rstrip("/")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def publish(src, repo_id, branch, store, extra=()):
    r = subprocess.run([serve_bin(), "publish", src, repo_id, "--branch", branch, "--cache", store, *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"publish failed: {r.stdout} {r.stderr}")
    return r.stdout


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--rule", action="append", default=[], metavar="JSON",
                    help='a Rule as JSON: {"kind": "drip", "match": REGEX, "count": N or null, ...params}')
    a = ap.parse_args()
    rules = []
    for r in a.rule:
        d = json.loads(r)
        rules.append(Rule(d.pop("kind"), d.pop("match"), d.pop("count", 1), d.pop("method", "GET"), **d))
    p = FaultProxy(a.upstream, a.host, rules)
    print(f"listening on {p.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        p.close()
