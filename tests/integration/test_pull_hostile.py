"""A lying mirror (the fault proxy rewriting a real `hubkern serve`'s answers) against `hubkern pull`
(issue 17): each lie ends in its specific error, nothing of the failed pull is visible in the
snapshot, and a later honest pull of the same commit succeeds.

Cases: a listed file that the metadata.json digest does not know (stray.txt), a file turned into a
directory (x.py/inner), sizes that are no byte count (1e30, -1, 1.5), a Link that points back at
its own page, raw bytes >= 0x80 in a Link, listings past the entry / byte bounds, a 2 MB response
header, and a 60,000-file listing (no quadratic work between the listing and the first download)."""
import json
import os
import re

import pytest

from faultproxy import FaultProxy, Rule
from hk_serve_helpers import published_mirror, run_isolated as run

V = "tvm-ffi01-cpu-x86_64-linux"
# the one listing a pull makes: the whole commit, recursively (it also answers kernel-status.toml)
LIST_RE = r"/api/kernels/org/hostile/tree/[0-9a-f]+\?recursive=true"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with published_mirror(tmp_path_factory.mktemp("hub"), "org/hostile", V, {"__init__.py": b"from .x import *\n", "x.py": b"X = 1\n", "_k.so": os.urandom(3000)}, lfs_threshold=1000) as srv:
        yield srv


def pull(url, cache, env=None, check=False, timeout=120):
    return run(["pull", "org/hostile", "--version", "1", "--variant", V, "--json", "--endpoint", url, "--cache",
                cache], env=env, check=check, timeout=timeout)


def snapshot_variant(cache):
    """snapshots/<commit>/build/<V> of the one commit there is (None when no snapshot has it)."""
    snaps = os.path.join(cache, "kernels--org--hostile", "snapshots")
    for c in os.listdir(snaps) if os.path.isdir(snaps) else []:
        d = os.path.join(snaps, c, "build", V)
        if os.path.lexists(d):
            return d
    return None


def files_under(d):
    out = []
    for dirpath, _, names in os.walk(d):
        out += [os.path.relpath(os.path.join(dirpath, n), d) for n in names]
    return sorted(out)


def assert_honest_pull_works(hub, cache):
    r = pull(hub.url, cache, check=True)
    out = json.loads(r.stdout)
    vdir = os.path.join(out["snapshot"], "build", V)
    assert files_under(vdir) == ["__init__.py", "_k.so", "metadata.json", "x.py"]
    v = run(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 0, v.stdout + v.stderr


def add_stray(doc):
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    return doc + [dict(init, path=f"build/{V}/stray.txt")]


def file_to_dir(doc):
    # x.py becomes the directory x.py/ holding "inner" (with __init__.py's blob, which the mirror serves)
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    return [dict(init, path=e["path"] + "/inner") if e["path"].endswith("/x.py") else e for e in doc]


@pytest.mark.parametrize("lie,violation", [(add_stray, "UnknownFile: stray.txt"),
                                           (file_to_dir, "MissingFile: x.py")])
def test_failed_pull_publishes_nothing_and_does_not_block_an_honest_one(hub, tmp_path, lie, violation):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("json", LIST_RE, count=None, fn=lie)]) as px:
        r = pull(px.url, cache)
    assert r.returncode == 1 and "HK_ERR_DIGEST" in r.stderr and violation in r.stderr, r.stderr
    assert "nothing of it was published" in r.stderr
    assert snapshot_variant(cache) is None  # not even a partial variant directory
    assert not os.path.exists(os.path.join(cache, "kernels--org--hostile", "refs", "v1"))
    staging = os.path.join(cache, "kernels--org--hostile", ".hk-staging")
    assert not os.path.exists(staging) or os.listdir(staging) == []
    assert_honest_pull_works(hub, cache)


def test_a_damaged_snapshot_left_by_an_older_pull_is_replaced(hub, tmp_path):
    cache = str(tmp_path / "c")
    assert_honest_pull_works(hub, cache)
    vdir = snapshot_variant(cache)
    os.remove(os.path.join(vdir, "x.py"))  # what an older hubkern could leave: x.py/ a directory, a stray
    os.makedirs(os.path.join(vdir, "x.py"))
    with open(os.path.join(vdir, "stray.txt"), "w") as fh:
        fh.write("stray\n")
    assert_honest_pull_works(hub, cache)


@pytest.mark.parametrize("size", [1e30, -1, 1.5, 2.0 ** 64])
def test_sizes_that_are_no_byte_count_are_protocol_errors(hub, tmp_path, size):
    def lie(doc):
        return [dict(e, size=size, lfs=dict(e["lfs"], size=size)) if e["path"].endswith("_k.so") else e for e in doc]
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("json", LIST_RE, count=None, fn=lie)]) as px:
        r = pull(px.url, cache)
    assert r.returncode == 1 and "HK_ERR_PROTOCOL" in r.stderr and "not a byte count" in r.stderr, r.stderr
    assert snapshot_variant(cache) is None


def test_link_back_to_the_same_page_is_a_loop(hub, tmp_path):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("json", LIST_RE, count=None, fn=lambda d: d,
                                         headers=lambda path: {"Link": f'<{path}>; rel="next"'})]) as px:
        r = pull(px.url, cache, timeout=60)
        pages = px.requests("GET", LIST_RE)
    assert r.returncode == 1 and "HK_ERR_PROTOCOL" in r.stderr and "pagination loop" in r.stderr, r.stderr
    assert len(pages) == 1


def test_raw_high_bytes_in_a_link_are_percent_encoded(hub, tmp_path):
    cache = str(tmp_path / "c")
    rules = [Rule("answer", "cursor=", count=None, body=b"[]", headers={"Content-Type": "application/json"}),
             Rule("json", LIST_RE, count=1, fn=lambda d: d,
                  headers=lambda path: {"Link": f'<{path}&cursor=\u00e9 "x">; rel="next"'})]
    with FaultProxy(hub.url, rules=rules) as px:
        r = pull(px.url, cache)
        pages = [e["path"] for e in px.requests("GET", LIST_RE)]
    assert r.returncode == 0, r.stderr
    assert len(pages) == 2 and pages[1].endswith("&cursor=%E9%20%22x%22"), pages


@pytest.mark.parametrize("env,bound", [({"HUBKERN_MAX_LISTING_ENTRIES": "2"}, "more than 2 entries"),
                                       ({"HUBKERN_MAX_LISTING_BYTES": "100"}, "larger than 100 bytes")])
def test_listing_bounds_name_the_bound(hub, tmp_path, env, bound):
    cache = str(tmp_path / "c")
    r = pull(hub.url, cache, env=env)
    assert r.returncode == 1 and "HK_ERR_PROTOCOL" in r.stderr and bound in r.stderr, r.stderr
    assert ("HUBKERN_MAX_LISTING_ENTRIES" if "entries" in bound else "HUBKERN_MAX_LISTING_BYTES") in r.stderr


def test_a_2mb_response_header_is_reported_and_not_retried(hub, tmp_path):
    cache = str(tmp_path / "c")
    big = Rule("status", LIST_RE, count=None, status=200, headers={"X-Big": "a" * (2 << 20)})
    with FaultProxy(hub.url, rules=[big]) as px:
        r = pull(px.url, cache)
        pages = px.requests("GET", LIST_RE)
    assert r.returncode == 1 and "HK_ERR_PROTOCOL" in r.stderr and "header" in r.stderr and "too large" in r.stderr, \
        r.stderr
    assert "Out of memory" not in r.stderr
    assert len(pages) == 1


def test_a_60k_file_listing_reaches_the_first_download_quickly(hub, tmp_path):
    n = 60000

    def many(doc):
        return doc + [{"type": "file", "path": f"build/{V}/gen/f{i:05d}.py", "oid": f"{i:040x}", "size": 10}
                      for i in range(n)]
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("json", LIST_RE, count=1, fn=many)]) as px:
        r = pull(px.url, cache, timeout=300)
        listing = px.requests("GET", LIST_RE)
        files = px.requests("GET", f"/resolve/[0-9a-f]+/build/{V}/")
    # the generated files do not exist on the mirror: the pull fails at the first of them, having
    # published nothing; what matters is the time from the listing to the first file request
    assert r.returncode == 1 and snapshot_variant(cache) is None, r.stderr
    assert listing and files
    gap = files[0]["t"] - listing[0]["t"]
    limit = 20.0 if os.environ.get("HK_SANITIZED") == "1" or "asan" in os.environ.get("HK_BUILD_DIR", "") else 8.0
    assert gap < limit, f"{gap:.1f} s from the listing of {n} files to the first download"


# ---- names in a listing: the one file-path rule and one entry per path (audit) --------------------
def dup_with_other_hash(doc):
    # x.py named twice: first with __init__.py's blob, then as it is (whichever link is made last wins)
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    x = next(e for e in doc if e["path"].endswith("/x.py"))
    return [dict(init, path=x["path"])] + doc


def nul_in_name(doc):
    # "x.py\0.evil" is cut at the NUL by a C JSON parser: a second, different x.py
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    return doc + [dict(init, path=f"build/{V}/x.py\u0000.evil")]


def long_component(doc):
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    return doc + [dict(init, path=f"build/{V}/" + "a" * 256)]


def overlong_utf8(doc):
    # "\xc0\xae\xc0\xae" is an overlong "..": no valid UTF-8 name, sent as raw bytes in the JSON string
    init = next(e for e in doc if e["path"].endswith("/__init__.py"))
    return json.dumps(doc + [dict(init, path=f"build/{V}/@@OVERLONG@@/x.py")]).encode().replace(
        b"@@OVERLONG@@", b"\xc0\xae\xc0\xae")


@pytest.mark.parametrize("lie,code,says", [(dup_with_other_hash, "HK_ERR_PROTOCOL", "names build/%s/x.py twice" % V),
                                           (nul_in_name, "HK_ERR_PROTOCOL", "a NUL"),
                                           (long_component, "HK_ERR_UNSAFE_PATH", "refusing file name"),
                                           (overlong_utf8, "HK_ERR_UNSAFE_PATH", "refusing file name")])
def test_a_listing_that_names_a_path_twice_or_breaks_the_path_rule_is_refused(hub, tmp_path, lie, code, says):
    cache = str(tmp_path / "c")
    with FaultProxy(hub.url, rules=[Rule("json", LIST_RE, count=None, fn=lie)]) as px:
        r = pull(px.url, cache)
    assert r.returncode == 1 and code in r.stderr and says in r.stderr, r.stderr
    assert snapshot_variant(cache) is None
    assert_honest_pull_works(hub, cache)
