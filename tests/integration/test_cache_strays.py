"""A cache left broken by a hostile pull of an older hubkern (issue 17 item 1, cache side): a snapshot
file the variant's metadata.json digest does not list (a stray) and a file turned into a directory
(`x.py/inner`), built by hand after an honest pull. `hubkern cache verify` reports both, `hubkern
cache prune` removes exactly those entries (the blobs that honest entries point to survive), and a
later honest pull works and verifies clean."""
import hashlib
import json
import os

import pytest

from faultproxy import Server, make_variant, publish, run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
FILES = {"__init__.py": b"from .x import a\n", "x.py": b"a = 1\n", "_k.so": os.urandom(1_500_000)}


def run(args, check=True):
    return run_cli(args, check=check)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store = str(base / "store")
    src = str(base / "src")
    make_variant(src, V, FILES)
    publish(src, "org/straykern", "v1", store, ["--lfs-threshold", "1000000"])
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


def pull(hub, cache):
    r = run(["pull", "org/straykern", "--version", "1", "--variant", V, "--json", "--endpoint", hub.url,
             "--cache", cache])
    return json.loads(r.stdout)


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def put_blob(repo, data):
    name = git_sha1(data)
    with open(os.path.join(repo, "blobs", name), "wb") as fh:
        fh.write(data)
    return name


def link(repo, path, blob):
    os.symlink(os.path.relpath(os.path.join(repo, "blobs", blob), os.path.dirname(path)), path)


def blob_of(path):
    return os.path.basename(os.readlink(path))


def test_verify_reports_and_prune_repairs_a_poisoned_snapshot(hub, tmp_path):
    cache = str(tmp_path / "c")
    commit = pull(hub, cache)["commit"]
    repo = os.path.join(cache, "kernels--org--straykern")
    vdir = os.path.join(repo, "snapshots", commit, "build", V)
    init_blob, k_blob = blob_of(os.path.join(vdir, "__init__.py")), blob_of(os.path.join(vdir, "_k.so"))
    assert run(["cache", "verify", "--cache", cache]).returncode == 0

    # what a hostile mirror's pull left: a listed stray with its own blob, a stray sharing an honest
    # entry's blob, and x.py turned into a directory holding a link to a hostile blob
    evil = put_blob(repo, b"import os; os.system('evil')\n")
    link(repo, os.path.join(vdir, "stray.py"), evil)
    link(repo, os.path.join(vdir, "copy.py"), init_blob)
    os.unlink(os.path.join(vdir, "x.py"))
    os.makedirs(os.path.join(vdir, "x.py"))
    inner_blob = put_blob(repo, b"inner\n")
    link(repo, os.path.join(vdir, "x.py", "inner"), inner_blob)

    v = run(["cache", "verify", "--cache", cache], check=False)
    assert v.returncode == 1 and "NOT CLEAN" in v.stdout
    assert "stray file stray.py is not in the metadata.json digest" in v.stdout
    assert "stray file copy.py is not in the metadata.json digest" in v.stdout
    assert "x.py is a directory where the metadata.json digest lists a file" in v.stdout
    assert "inner" not in v.stdout.replace("x.py/inner", "")  # reported once, as the directory

    dry = run(["cache", "prune", "--dry-run", "--cache", cache])
    assert "would remove" in dry.stdout and "stray.py" in dry.stdout and f"blobs/{evil}" in dry.stdout
    assert f"blobs/{init_blob}" not in dry.stdout and os.path.islink(os.path.join(vdir, "stray.py"))

    p = run(["cache", "prune", "-y", "--cache", cache])
    assert "stray file" in p.stdout and "where the metadata.json digest lists a file" in p.stdout
    for gone in ("stray.py", "copy.py", "x.py"):
        assert not os.path.lexists(os.path.join(vdir, gone)), gone
    blobs = os.listdir(os.path.join(repo, "blobs"))
    assert evil not in blobs and inner_blob not in blobs  # only the stray entries used them
    assert init_blob in blobs and k_blob in blobs  # honest entries still point to these
    assert os.path.isfile(os.path.join(vdir, "__init__.py")) and os.path.isfile(os.path.join(vdir, "_k.so"))
    v = run(["cache", "verify", "--cache", cache])
    assert "stray file" not in v.stdout and "PROBLEM" not in v.stdout and "incomplete (1 file not pulled)" in v.stdout

    # a later honest pull of that commit works and leaves a clean, complete cache
    again = pull(hub, cache)
    assert again["commit"] == commit
    with open(os.path.join(vdir, "x.py"), "rb") as fh:
        assert fh.read() == FILES["x.py"]
    v = run(["cache", "verify", "--cache", cache])
    assert v.stdout.strip().splitlines()[-1].startswith("clean")
    assert "would remove 0 entries" in run(["cache", "prune", "--dry-run", "--cache", cache]).stdout
