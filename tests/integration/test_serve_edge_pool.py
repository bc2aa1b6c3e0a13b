"""The pull-through edge on the thread pool (issue 25): a miss runs on one of the edge's own transfer
threads while its connection is suspended, so that

(a) warm hits are answered at once while more misses than the pool has threads wait on a stalled
    upstream,
(b) a flood of distinct misses past --upstream-queue gets 503 with Retry-After, and the edge's
    thread count stays bounded (no thread per connection, none per miss),
(c) clients that vanish while suspended are cleaned up: their steps are given up, the queue empties,
    nothing partial is kept, the edge goes on answering, and it stops at once with misses suspended.

The upstream is a FaultProxy in front of an origin that stalls the chosen files (sends nothing);
--upstream-timeout is long, so that only the edge's own handling ends the waits."""
import hashlib
import http.client
import os
import re
import socket
import threading
import time

import pytest

from faultproxy import FaultProxy, Rule, make_variant, publish
from hk_serve_helpers import Server, timed_get

V = "tvm-ffi01-cpu-x86_64-linux"
N_FILES = 80
POOL, TRANSFERS, QUEUE = 2, 4, 8
STALL_S = 10  # how long the upstream sends nothing for a stalled file (then it closes)
FILES = {f"f{i:02d}.py": f"# file {i}\n".encode() * (i + 1) for i in range(N_FILES)}
STALLED = r"/resolve/[0-9a-f]{40}/build/[^/]+/f(0[1-9]|[1-7][0-9])\.py"  # every file but f00


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    base = tmp_path_factory.mktemp("origin")
    store = base / "store"
    store.mkdir()
    make_variant(str(base / "src"), V, FILES)
    commit = publish(str(base / "src"), "org/pool", "v1", str(store)).strip()
    with Server(store, "--trust", "org") as srv:
        srv.commit = commit
        yield srv


def url_of(edge, commit, name):
    return f"{edge.url}/kernels/org/pool/resolve/{commit}/build/{V}/{name}"


def get(url, timeout=10):
    return timed_get(url, timeout)


def threads_of(pid):
    with open(f"/proc/{pid}/status") as fh:
        return int(re.search(r"^Threads:\s+(\d+)", fh.read(), re.M).group(1))


def queue_depth(edge):
    _, _, body, _ = get(f"{edge.url}/metrics")
    return int(re.search(rb"^hubkern_upstream_queue (\d+)$", body, re.M).group(1))


def hang(edge, commit, name):
    """A raw client that asks for a file and waits: its socket, closed by the test to vanish."""
    host, port = edge.url.split("//")[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    path = url_of(edge, commit, name).split(edge.url, 1)[1]
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return s


def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_hits_flood_vanishing_clients_and_stop(origin, tmp_path):
    store = tmp_path / "edge"
    store.mkdir()
    commit = origin.commit
    with FaultProxy(origin.url) as px:
        edge = Server(store, "--upstream", px.url, "--upstream-timeout", "60", "--threads", str(POOL),
                      "--upstream-transfers", str(TRANSFERS), "--upstream-queue", str(QUEUE), "--client-miss-budget", "100000", "--access-log")
        with edge:
            pid = edge.proc.pid
            st, _, body, _ = get(url_of(edge, commit, "f00.py"))  # the commit and f00 are now in the store
            assert st == 200 and body == FILES["f00.py"]
            idle_threads = threads_of(pid)
            px.rules.append(Rule("stall", STALLED, count=None, seconds=STALL_S))

            # (a) more misses than the pool has threads, each a distinct stalled file
            hung = [hang(edge, commit, f"f{i:02d}.py") for i in range(1, 3 * POOL + 1)]
            assert wait_until(lambda: len(px.requests("GET", STALLED)) >= TRANSFERS, 10), px.requests("GET", STALLED)
            assert wait_until(lambda: queue_depth(edge) == 3 * POOL, 5), queue_depth(edge)
            worst = 0.0
            for _ in range(20):
                st, _, body, took = get(url_of(edge, commit, "f00.py"))
                assert st == 200 and body == FILES["f00.py"]
                worst = max(worst, took)
            print(f"hits while {3 * POOL} misses wait: slowest {worst * 1e3:.1f} ms")
            assert worst < 1.0, worst  # not behind a stalled miss (those wait STALL_S)
            for s in hung:  # still waiting: nothing was answered to them
                s.setblocking(False)
                with pytest.raises(BlockingIOError):
                    s.recv(1)
                s.setblocking(True)

            # (b) a flood of distinct misses beyond the queue: the documented 503, bounded threads
            results = []

            def flood(name):
                st, hdrs, body, _ = get(url_of(edge, commit, name), timeout=40)
                results.append((st, hdrs.get("Retry-After"), body))

            ts = [threading.Thread(target=flood, args=(f"f{i:02d}.py",)) for i in range(3 * POOL + 1, N_FILES)]
            [t.start() for t in ts]
            refused = lambda: [r for r in results if r[0] == 503]  # noqa: E731
            n_flood = len(ts)
            assert wait_until(lambda: len(refused()) >= n_flood - (QUEUE - 3 * POOL), 20), results
            peak = threads_of(pid)
            print(f"flood of {n_flood}: {len(refused())} refused; threads idle {idle_threads}, now {peak}")
            for st, retry, body in refused():
                assert int(retry) >= 1 and b"--upstream-queue" in body, (st, retry, body)
            assert queue_depth(edge) == QUEUE
            # the pool, the transfer threads and libmicrohttpd's own, whatever the connections
            assert peak <= idle_threads + 2, (idle_threads, peak)
            assert idle_threads <= POOL + TRANSFERS + 6, idle_threads

            # (c) every waiting client vanishes: their steps are given up, the queue empties
            for s in hung:
                s.close()
            hung2 = [hang(edge, commit, f"f{i:02d}.py") for i in range(3 * POOL + 1, 3 * POOL + 3)]
            for s in hung2:
                s.close()
            assert wait_until(lambda: queue_depth(edge) <= QUEUE - 3 * POOL, 10), queue_depth(edge)
            # the flood's own accepted misses are still waiting; they get their answer when the stall
            # ends: let it end now, and everything drains
            px.rules.clear()
            [t.join(timeout=STALL_S + 20) for t in ts]
            assert wait_until(lambda: queue_depth(edge) == 0, 10), queue_depth(edge)
            assert not [r for r in results if r[0] not in (200, 503)], results
            for r in results:
                if r[0] == 200:
                    assert r[2] in FILES.values()
            # the edge still works: a file given up before is fetched and verified now
            st, _, body, _ = get(url_of(edge, commit, "f01.py"))
            assert st == 200 and body == FILES["f01.py"]
            assert threads_of(pid) <= idle_threads + 2

            # stop while misses are suspended: prompt, and a clean exit (ASan builds check leaks)
            px.rules.append(Rule("stall", STALLED, count=None, seconds=30))
            hung = [hang(edge, commit, f"f{i:02d}.py") for i in (70, 71, 72)]
            assert wait_until(lambda: queue_depth(edge) == 3, 10)
            t0 = time.monotonic()
            rc = edge.stop()
            took = time.monotonic() - t0
            print(f"stopped with 3 misses suspended in {took:.2f} s, rc {rc}")
            assert rc == 0 and took < 5, (rc, took)
            for s in hung:
                s.settimeout(5)
                try:
                    data = s.recv(4096)  # a 503 or the closed connection, never a hang
                except ConnectionResetError:
                    data = b""
                assert data == b"" or data.startswith(b"HTTP/1.1 503"), data
                s.close()
    blobs = store / "kernels--org--pool" / "blobs"
    leftovers = [n for n in os.listdir(blobs) if n.startswith(".")] if blobs.is_dir() else []
    assert not leftovers, leftovers
    kept = set(os.listdir(blobs)) if blobs.is_dir() else set()
    for name in kept:  # whatever was kept is what the origin has
        assert any(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest() == name for d in FILES.values()), name
