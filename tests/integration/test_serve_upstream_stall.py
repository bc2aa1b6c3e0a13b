"""A stalled upstream (issue 13): the upstream accepts and sends nothing, or stops in the middle of a
body. With `--upstream-timeout 1` the edge gives up after about a second: the client gets a timely
503 with Retry-After (one upstream) or the file from the fallback upstream (two), the edge's store
keeps nothing partial, and the upstream requests are counted. Bounded timeouts keep it quick."""
import hashlib
import os

import pytest

from faultproxy import FaultProxy, Rule, make_variant, publish
from hk_serve_helpers import Server, timed_get

V = "tvm-ffi01-cpu-x86_64-linux"
SO = f"build/{V}/_k.so"
BIG = os.urandom(600_000)


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    base = tmp_path_factory.mktemp("origin")
    store = base / "store"
    store.mkdir()
    commits = {}
    for name in ("silent", "midbody", "fallback"):
        src = base / ("src-" + name)
        make_variant(str(src), V, {"__init__.py": b"x = 1\n", "_k.so": BIG + name.encode()})
        commits[name] = publish(str(src), f"org/{name}", "v1", str(store), ["--lfs-threshold", "100000"]).strip()
    with Server(store, "--trust", "org", "--access-log") as srv:
        srv.commits = commits
        yield srv


def get(url, timeout=20):
    return timed_get(url, timeout)


def nothing_partial(store, name, data):
    blobs = store / f"kernels--org--{name}" / "blobs"
    names = os.listdir(blobs) if blobs.is_dir() else []
    assert not [n for n in names if n.endswith(".incomplete") or n.startswith(".")], names
    assert hashlib.sha256(data).hexdigest() not in names  # the stalled blob was not kept
    return names


@pytest.mark.parametrize("name,rule", [
    ("silent", Rule("stall", "/resolve/.*_k.so", count=None, seconds=8)),
    ("midbody", Rule("cut", "/resolve/.*_k.so", count=None, after=200_000, stall=8)),
])
def test_stalled_upstream_gives_a_timely_503_and_keeps_nothing(origin, tmp_path, name, rule):
    store = tmp_path / "edge"
    store.mkdir()
    with FaultProxy(origin.url, rules=[rule]) as px:
        with Server(store, "--upstream", px.url, "--upstream-timeout", "1", "--access-log") as edge:
            st, hdrs, body, took = get(f"{edge.url}/kernels/org/{name}/resolve/v1/{SO}")
            fetches = px.requests("GET", "/resolve/.*_k.so")
            print(f"{name}: client got {st} Retry-After={hdrs.get('Retry-After')} after {took:.1f} s; "
                  f"upstream blob requests: {len(fetches)}")
            assert st == 503 and int(hdrs["Retry-After"]) >= 1, (st, hdrs, body)
            # one try, and one more from the start for a body that ended early: never a hot loop
            assert 1 <= len(fetches) <= 2, fetches
            assert took < 1.5 * len(fetches) + 3, took  # the 1 s stall limit, not the 8 s stall
            nothing_partial(store, name, BIG + name.encode())
            # the upstream recovers: the same request is answered, verified, and kept
            px.rules.clear()
            st, _, body, _ = get(f"{edge.url}/kernels/org/{name}/resolve/v1/{SO}")
            assert st == 200 and body == BIG + name.encode()


def test_stalled_first_upstream_falls_back_to_the_next(origin, tmp_path):
    store = tmp_path / "edge"
    store.mkdir()
    data = BIG + b"fallback"
    rule = Rule("stall", "/resolve/.*_k.so", count=None, seconds=8)
    with FaultProxy(origin.url, rules=[rule]) as px:
        with Server(store, "--upstream", px.url, "--upstream", origin.url, "--upstream-timeout", "1",
                    "--access-log") as edge:
            st, hdrs, body, took = get(f"{edge.url}/kernels/org/fallback/resolve/v1/{SO}")
            stalled = px.requests("GET", "/resolve/.*_k.so")
            origin.wait_log("org/fallback/resolve")  # its log line follows the answer
            from_origin = [line for line in origin.log_lines if " access " in line and "org/fallback/resolve" in line
                           and "_k.so" in line]
            print(f"fallback: client got {st} after {took:.1f} s; stalled upstream blob requests: {len(stalled)}, "
                  f"fallback: {len(from_origin)}")
            assert st == 200 and body == data
            assert 1 <= len(stalled) <= 2 and len(from_origin) >= 1
            assert took < 1.5 * len(stalled) + 3, took
            blobs = os.listdir(store / "kernels--org--fallback" / "blobs")
            assert hashlib.sha256(data).hexdigest() in blobs
            assert not [n for n in blobs if n.endswith(".incomplete")], blobs
