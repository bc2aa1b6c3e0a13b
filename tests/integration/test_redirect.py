"""kernel-status.toml redirects through every hubkern command that talks to the Hub, against a real
loopback `hubkern serve` mirror filled with `hubkern publish`.

Repos in the mirror:
  org/dest@v1        build/V with __init__.py "dest = 1"
  org/src@v1         kernel-status.toml -> org/dest revision v1, and an old build/V ("src = 1")
  org/loopa@v1       -> org/loopb@v1, and org/loopb@v1 -> org/loopa@v1 (a loop)
  org/tostranger@v1  -> stranger/kern@v1 (a publisher the mirror does not trust)
  hubkern/newnorm@v1 our real RMSNorm CPU tvm-ffi build; hubkern/oldnorm@v1 redirects to it

What is checked: lock pins the destination repo and commit (and refuses an untrusted destination and
a loop), info describes the destination's commit/variants, pull fills the cache with the
destination's files and says so, download refuses a lock that pins a redirect source, versions
marks the versions that redirect, load reports the destination; lock -> download -> offline
load --lock works end to end through a redirect."""
import json
import os
import pathlib
import re
import shutil

import pytest

from faultproxy import Server, make_variant, publish, run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
BUILD = pathlib.Path(os.environ.get("HK_BUILD_DIR", "build"))
HUB_SRC = BUILD / "kernels" / "rmsnorm" / "hub"
DEAD = "http://127.0.0.1:9"


def run(args, env=None, check=True):
    base = {"HUBKERN_RETRY_BASE_MS": "1", "OMP_NUM_THREADS": "1"}
    for k in ("HF_TOKEN", "KERNELS_CACHE", "HF_HUB_CACHE", "HF_ENDPOINT"):
        base[k] = ""
    # unset, not empty: an empty LOCAL_KERNELS is an error, as in kernels (an entry without '=')
    return run_cli([str(a) for a in args], env=env, check=check, base_env=base, timeout=120,
                   unset=("HF_HUB_OFFLINE", "LOCAL_KERNELS"))


def status_file(root, dest, rev):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "kernel-status.toml"), "w") as fh:
        fh.write(f'kind = "redirect"\ndestination = "{dest}"\nrevision = "{rev}"\n')


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("redirect")
    store = str(base / "store")
    c = {}
    d = str(base / "dest")
    make_variant(d, V, {"__init__.py": b"dest = 1\n"})
    c["dest"] = publish(d, "org/dest", "v1", store).strip()
    s = str(base / "src")
    make_variant(s, V, {"__init__.py": b"src = 1\n"})
    status_file(s, "org/dest", "v1")
    c["src"] = publish(s, "org/src", "v1", store).strip()
    status_file(str(base / "la"), "org/loopb", "v1")
    publish(str(base / "la"), "org/loopa", "v1", store)
    status_file(str(base / "lb"), "org/loopa", "v1")
    publish(str(base / "lb"), "org/loopb", "v1", store)
    make_variant(str(base / "st"), V, {"__init__.py": b"stranger = 1\n"})
    publish(str(base / "st"), "stranger/kern", "v1", store)
    status_file(str(base / "ts"), "stranger/kern", "v1")
    publish(str(base / "ts"), "org/tostranger", "v1", store)
    assert (HUB_SRC / "build" / V / "metadata.json").is_file(), "build the rmsnorm_hub_variants target"
    c["newnorm"] = publish(HUB_SRC, "hubkern/newnorm", "v1", store).strip()
    status_file(str(base / "old"), "hubkern/newnorm", "v1")
    publish(str(base / "old"), "hubkern/oldnorm", "v1", store)
    for k in ("dest", "src", "newnorm"):
        assert re.fullmatch(r"[0-9a-f]{40}", c[k]), c
    with Server(store, ["--trust", "org", "--trust", "hubkern"]) as srv:
        srv.commits = c
        yield srv


def opts(hub, cache):
    return ["--endpoint", hub.url, "--cache", cache]


def test_lock_pins_the_destination(hub, tmp_path):
    lock = tmp_path / "kernels.lock"
    r = run(["lock", "org/src=1", "-o", lock, *opts(hub, tmp_path / "c")])
    assert json.loads(lock.read_text()) == [
        {"dependency": {"repo-id": "org/dest", "version": 1}, "lock": {"commit": hub.commits["dest"]}}]
    assert "note: org/src redirects to org/dest (kernel-status.toml)" in r.stderr
    # the same kernel asked for twice (through the redirect and directly) is locked once
    run(["lock", "org/src=1", "org/dest=1", "-o", lock, *opts(hub, tmp_path / "c")])
    assert [e["dependency"]["repo-id"] for e in json.loads(lock.read_text())] == ["org/dest"]


def test_lock_checks_the_destination_publisher_and_loops(hub, tmp_path):
    lock = tmp_path / "kernels.lock"
    r = run(["lock", "org/tostranger=1", "-o", lock, *opts(hub, tmp_path / "c")], check=False)
    assert r.returncode == 1 and "[HK_ERR_UNTRUSTED]" in r.stderr and "'stranger/kern'" in r.stderr
    assert not lock.exists()
    run(["lock", "org/tostranger=1", "--trust-remote-code", "-o", lock, *opts(hub, tmp_path / "c")])
    assert json.loads(lock.read_text())[0]["dependency"]["repo-id"] == "stranger/kern"
    lock.unlink()
    r = run(["lock", "org/loopa=1", "-o", lock, *opts(hub, tmp_path / "c")], check=False)
    assert r.returncode == 1 and "[HK_ERR_PROTOCOL]" in r.stderr
    assert "kernel-status.toml redirects loop: org/loopa@v1 -> org/loopb@v1 -> org/loopa@v1; " \
           "fix the kernel-status.toml of one of them" in r.stderr
    # found when the loop closes (two hops), not after the depth limit (six)
    assert r.stderr.count("redirected to") == 2, r.stderr
    assert "chain longer than" not in r.stderr
    assert not lock.exists()


def test_info_describes_the_destination(hub, tmp_path):
    cache = str(tmp_path / "c")
    r = run(["info", "org/src", "--version", "1", "--json", *opts(hub, cache)])
    info = json.loads(r.stdout)
    assert info["repo_id"] == "org/src" and info["version"] == 1
    assert info["redirects_to"] == "org/dest" and info["redirect_revision"] == "v1"
    assert info["redirect_trusted_publisher"] is True
    assert info["commit"] == hub.commits["dest"] and info["variants"] == [V] and info["cached"] is False
    assert "note: org/src redirects to org/dest (kernel-status.toml)" in r.stderr
    # after a pull of the destination, info sees it cached
    run(["pull", "org/dest", "--version", "1", "--variant", V, *opts(hub, cache)])
    assert json.loads(run(["info", "org/src", "--json", *opts(hub, cache)]).stdout)["cached"] is True
    r = run(["info", "org/loopa", "--json", *opts(hub, cache)], check=False)
    assert r.returncode == 1 and "[HK_ERR_PROTOCOL]" in r.stderr
    assert "redirects loop: org/loopa@v1 -> org/loopb@v1 -> org/loopa@v1;" in r.stderr
    assert r.stderr.count("redirected to") == 2, r.stderr
    # text form names the destination too
    out = run(["info", "org/src", *opts(hub, cache)]).stdout
    assert re.search(r"^redirects_to\s+org/dest$", out, re.M) and re.search(rf"^commit\s+{hub.commits['dest']}$", out, re.M)


def test_pull_fills_the_cache_with_the_destination(hub, tmp_path):
    cache = tmp_path / "c"
    r = run(["pull", "org/src", "--version", "1", "--variant", V, "--json", *opts(hub, cache)])
    out = json.loads(r.stdout)
    assert out["repo_id"] == "org/dest" and out["redirected_from"] == "org/src" and out["commit"] == hub.commits["dest"]
    assert (cache / "kernels--org--dest" / "snapshots" / hub.commits["dest"] / "build" / V / "__init__.py").read_bytes() \
        == b"dest = 1\n"
    assert not (cache / "kernels--org--src" / "snapshots" / hub.commits["src"] / "build").exists()
    assert r.stderr.count("note: org/src redirects to org/dest (kernel-status.toml)") == 1


def test_download_refuses_a_lock_that_pins_a_redirect_source(hub, tmp_path):
    cache = tmp_path / "c"
    stale = tmp_path / "stale.lock"
    stale.write_text(json.dumps([{"dependency": {"repo-id": "org/src", "version": 1},
                                  "lock": {"commit": hub.commits["src"]}}]))
    r = run(["download", "--lock", stale, "--backend", "cpu", *opts(hub, cache)], check=False)
    assert r.returncode == 1 and "[HK_ERR_LOCKFILE]" in r.stderr
    assert "redirects to org/dest" in r.stderr and "hubkern lock" in r.stderr
    assert not (cache / "kernels--org--dest" / "snapshots" / hub.commits["dest"]).exists()


def test_versions_marks_redirecting_versions(hub, tmp_path):
    r = run(["versions", "org/src", "--json", *opts(hub, tmp_path / "c")])
    vs = json.loads(r.stdout)["versions"]
    assert [(v["version"], v["commit"], v["redirects_to"], v["redirect_revision"]) for v in vs] == \
        [(1, hub.commits["src"], "org/dest", "v1")]
    vs = json.loads(run(["versions", "org/dest", "--json", *opts(hub, tmp_path / "c")]).stdout)["versions"]
    assert vs[0]["redirects_to"] is None  # null, not left out (docs/json.md)
    out = run(["versions", "org/src", *opts(hub, tmp_path / "c")]).stdout
    assert re.fullmatch(rf"v1\s+{hub.commits['src']}\s+latest\s+-> org/dest@v1\n", out)


def test_lock_download_load_through_a_redirect(hub, tmp_path):
    """The whole locked workflow for a redirected kernel: what is locked is what is downloaded and
    what loads offline, and `load` of the old name reports the destination."""
    lock = tmp_path / "kernels.lock"
    run(["lock", "hubkern/oldnorm=1", "-o", lock, "--endpoint", hub.url, "--cache", tmp_path / "lc"])
    assert [(e["dependency"]["repo-id"], e["lock"]["commit"]) for e in json.loads(lock.read_text())] == \
        [("hubkern/newnorm", hub.commits["newnorm"])]
    fresh = tmp_path / "fresh"
    out = run(["download", "--lock", lock, "--backend", "cpu", "--endpoint", hub.url, "--cache", fresh]).stdout
    assert f"/kernels--hubkern--newnorm/snapshots/{hub.commits['newnorm']}/build/{V}" in out
    assert not (fresh / "kernels--hubkern--oldnorm").exists()
    offline = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(fresh), "HF_ENDPOINT": DEAD}
    j = json.loads(run(["load", "hubkern/newnorm", "--lock", lock, "--backend", "cpu", "--json"], env=offline).stdout)
    assert j["repo_id"] == "hubkern/newnorm" and j["commit"] == hub.commits["newnorm"]
    online = {"HF_HUB_CACHE": str(tmp_path / "lc2"), "HF_ENDPOINT": hub.url}
    r = run(["load", "hubkern/oldnorm", "--version", "1", "--backend", "cpu", "--json"], env=online)
    j = json.loads(r.stdout)
    assert j["repo_id"] == "hubkern/newnorm" and j["commit"] == hub.commits["newnorm"]
    assert "note: hubkern/oldnorm redirects to hubkern/newnorm (kernel-status.toml)" in r.stderr


# ---- kernel-status.toml read as TOML, as kernels reads it (audit) --------------------------------
# Each body is served for org/src's kernel-status.toml by the fault proxy; hubkern must find what
# Python's tomllib (the real kernels.status.KernelStatus) finds, or refuse what it refuses.
HIDDEN_IN_STRING = 'kind = "redirect"\nnote = """\ndestination = "org/loopa"\n"""\ndestination = "org/dest"\nrevision = "v1"\n'
IN_A_TABLE = 'kind = "redirect"\n[elsewhere]\ndestination = "org/dest"\nrevision = "v1"\n'
TWICE = 'kind = "redirect"\ndestination = "org/dest"\ndestination = "org/loopa"\nrevision = "v1"\n'
ESCAPED = 'kind = "redirect"\ndestination = "org\\u002Fdest"\nrevision = "v1"\n'
COMMENTED = "kind = 'redirect' # a literal string and a comment\ndestination = 'org/dest'\nrevision = 'v1'\n"


def python_reads(body):
    from kernels.status import KernelStatus
    try:
        s = KernelStatus.from_toml(body)
        return s.destination, s.revision
    except ValueError:  # tomllib.TOMLDecodeError is one
        return None


@pytest.mark.parametrize("body", [HIDDEN_IN_STRING, IN_A_TABLE, TWICE, ESCAPED, COMMENTED],
                         ids=["hidden-in-string", "in-a-table", "twice", "escaped", "commented"])
def test_kernel_status_is_read_as_toml_like_kernels_does(hub, tmp_path, body):
    from faultproxy import FaultProxy, Rule
    want = python_reads(body)
    cache = str(tmp_path / "c")
    status = Rule("answer", r"/kernels/org/src/resolve/[0-9a-f]+/kernel-status\.toml", count=None,
                  body=body.encode(), headers={"Content-Type": "text/plain"})
    with FaultProxy(hub.url, rules=[status]) as px:
        r = run(["info", "org/src", "--version", "1", "--json", "--endpoint", px.url, "--cache", cache], check=False)
    if want is None:
        assert r.returncode == 1 and "[HK_ERR_PARSE]" in r.stderr and "kernel-status.toml" in r.stderr, r.stderr
    else:
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert (info["redirects_to"], info["redirect_revision"]) == want
