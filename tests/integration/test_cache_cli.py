"""hubkern cache ls | verify | prune | rm on a cache filled by a real pull, and the pull progress bar
(drawn on a terminal only)."""
import hashlib
import json
import os
import re
import subprocess

import pytest

from faultproxy import Server, hubkern_bin, make_variant, publish, run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
BIG = os.urandom(2_000_000)


def run(args, check=True, env=None):
    return run_cli(args, env=env, check=check)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store = str(base / "store")
    src = str(base / "src")
    make_variant(src, V, {"__init__.py": b"a = 1\n", "_k.so": BIG})
    publish(src, "org/cachekern", "v1", store, ["--lfs-threshold", "1000000"])
    src2 = str(base / "src2")
    make_variant(src2, V, {"__init__.py": b"a = 2\n", "_k.so": BIG}, version=2)
    publish(src2, "org/cachekern", "v2", store, ["--lfs-threshold", "1000000"])
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


def pull(hub, cache, version):
    r = run(["pull", "org/cachekern", "--version", str(version), "--variant", V, "--json", "--endpoint", hub.url,
             "--cache", cache])
    return json.loads(r.stdout)


def test_ls_verify_prune_rm(hub, tmp_path):
    cache = str(tmp_path / "c")
    o1 = pull(hub, cache, 1)
    o2 = pull(hub, cache, 2)
    repo = os.path.join(cache, "kernels--org--cachekern")
    ls = json.loads(run(["cache", "ls", "--json", "--cache", cache]).stdout)
    (entry,) = ls["repos"]
    assert entry["repo_id"] == "org/cachekern" and entry["refs"] == {"v1": o1["commit"], "v2": o2["commit"]}
    assert sorted(s["commit"] for s in entry["snapshots"]) == sorted([o1["commit"], o2["commit"]])
    assert "org/cachekern" in run(["cache", "ls", "--cache", cache]).stdout
    assert run(["cache", "verify", "--cache", cache]).stdout.strip().splitlines()[-1].startswith("clean")

    # leftovers of a killed process and an orphan blob: prune removes them, verify stays clean
    big = hashlib.sha256(BIG).hexdigest()
    with open(os.path.join(repo, "blobs", big + ".0badf00d.incomplete"), "wb") as fh:
        fh.write(BIG[:1000])
    orphan = hashlib.sha256(b"orphan").hexdigest()
    with open(os.path.join(repo, "blobs", orphan), "wb") as fh:
        fh.write(b"orphan")
    v = run(["cache", "verify", "--cache", cache])
    assert "leftover temp file" in v.stdout and v.stdout.strip().splitlines()[-1].startswith("clean")
    dry = run(["cache", "prune", "--dry-run", "--cache", cache])
    assert "would remove 2 entries" in dry.stdout and os.path.exists(os.path.join(repo, "blobs", orphan))
    run(["cache", "prune", "-y", "--cache", cache])
    names = os.listdir(os.path.join(repo, "blobs"))
    assert orphan not in names and not [n for n in names if n.endswith(".incomplete")] and big in names
    assert os.path.exists(os.path.join(repo, ".."))  # nothing else was touched
    pull(hub, cache, 1)  # still complete

    # a corrupted blob: verify fails naming it; a pull of that version notices too (digest)
    blob = os.path.join(repo, "blobs", big)
    os.chmod(blob, 0o644)
    with open(blob, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"XXXX")
    v = run(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 1 and big in v.stdout and "NOT CLEAN" in v.stdout
    r = run(["pull", "org/cachekern", "--version", "1", "--variant", V, "--offline", "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_DIGEST" in r.stderr and "HashMismatch: _k.so" in r.stderr

    # rm one revision: its snapshot and ref go; the shared blob goes only when no snapshot uses it
    os.unlink(blob)  # drop the bad blob, re-pull both versions
    for ver in (1, 2):
        link = os.path.join(cache, "kernels--org--cachekern", "snapshots", (o1, o2)[ver - 1]["commit"], "build", V,
                            "_k.so")
        os.unlink(link)
    pull(hub, cache, 1)
    pull(hub, cache, 2)
    assert run(["cache", "verify", "--cache", cache]).returncode == 0
    run(["cache", "rm", "-y", "org/cachekern", "--revision", "v1", "--cache", cache])
    assert not os.path.exists(os.path.join(repo, "snapshots", o1["commit"]))
    assert not os.path.exists(os.path.join(repo, "refs", "v1"))
    assert os.path.exists(blob)  # v2 still uses it
    assert run(["cache", "verify", "--cache", cache]).returncode == 0
    r = run(["cache", "rm", "-y", "org/cachekern", "--revision", "v1", "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_NOT_FOUND" in r.stderr
    run(["cache", "rm", "-y", "org/cachekern", "--cache", cache])
    assert not os.path.exists(repo)
    assert "0 repos" in run(["cache", "ls", "--cache", cache]).stdout


def test_progress_bar_only_on_a_terminal(hub, tmp_path):
    cache = str(tmp_path / "c")
    args = ["pull", "org/cachekern", "--version", "1", "--variant", V, "--endpoint", hub.url, "--cache", cache]
    plain = run(args)
    assert "[" not in plain.stderr and "%" not in plain.stderr  # not a terminal: no bar
    cache2 = str(tmp_path / "c2")
    cmd = " ".join([hubkern_bin(), *args[:-1], cache2])
    tty = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"})
    assert tty.returncode == 0, tty.stdout
    assert re.search(r"\[#+ *\] +\d+%", tty.stdout) and "100%" in tty.stdout
