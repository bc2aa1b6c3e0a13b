"""`hubkern cache rm` and `hubkern cache prune` take the verification receipts of what they remove
with them (<cache>/.locks/<repo folder>/hubkern-receipts/<commit>/, or under HUBKERN_RECEIPTS_DIR),
and leave alone other repos' and other commits' receipts and huggingface_hub's .lock files beside
them. Real `hubkern serve` on loopback, cache filled by real `hubkern pull`; a receipt that is kept
is shown still to work (the next warm pull hashes nothing)."""
import json
import os
import shutil
import time

import pytest

from faultproxy import Server, make_variant, publish, run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
BIG = os.urandom(1_500_000)
A, B = "kernels--org--reca", "kernels--org--recb"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store = str(base / "store")
    for repo, version, text in (("org/reca", 1, b"a = 1\n"), ("org/reca", 2, b"a = 2\n"), ("org/recb", 1, b"b = 1\n")):
        src = str(base / f"{repo.split('/')[1]}{version}")
        make_variant(src, V, {"__init__.py": text, "_k.so": BIG}, version=version)
        publish(src, repo, f"v{version}", store, ["--lfs-threshold", "1000000"])
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


def pull(hub, cache, repo, version, env=None):
    e = {"HUBKERN_RETRY_BASE_MS": "20", "HUBKERN_VERBOSE": "2"}
    e.update(env or {})
    r = run_cli(["pull", repo, "--version", str(version), "--variant", V, "--json", "--endpoint", hub.url,
                 "--cache", cache], env=e, unset=("HF_HUB_OFFLINE", "HUBKERN_VERIFY", "HUBKERN_RECEIPTS_DIR"))
    return json.loads(r.stdout)


def cache_cli(args, cache, env=None, check=True):
    return run_cli(["cache", *args, "--cache", cache], env=env, check=check,
                   unset=("HF_HUB_OFFLINE", "HUBKERN_VERIFY", "HUBKERN_RECEIPTS_DIR"))


def receipts(cache, folder):
    return os.path.join(cache, ".locks", folder, "hubkern-receipts")


def lock_files(cache, folder):
    d = os.path.join(cache, ".locks", folder)
    return sorted(n for n in os.listdir(d) if n.endswith(".lock")) if os.path.isdir(d) else []


@pytest.fixture
def filled(hub, tmp_path):
    """org/reca v1 and v2 and org/recb v1 pulled, then pulled warm once more (so that every receipt
    vouches for every file: the first warm pull after a cold one may record the newest blobs)."""
    cache = str(tmp_path / "c")
    commits = {}
    for repo, version in (("org/reca", 1), ("org/reca", 2), ("org/recb", 1)):
        commits[(repo, version)] = pull(hub, cache, repo, version)["commit"]
    time.sleep(0.05)
    for repo, version in commits:
        pull(hub, cache, repo, version)
    for (repo, _), commit in commits.items():
        folder = A if repo == "org/reca" else B
        assert os.path.isfile(os.path.join(receipts(cache, folder), commit, V + ".json"))
    assert lock_files(cache, A) and lock_files(cache, B), "pull takes huggingface_hub-style .lock files"
    return cache, commits


def warm_is_trusted(hub, cache, repo, version):
    out = pull(hub, cache, repo, version)
    return out["bytes_trusted"] > 0 and out["bytes_verified"] == 0


def test_rm_repo_removes_its_receipts_only(hub, filled):
    cache, commits = filled
    locks_a, locks_b = lock_files(cache, A), lock_files(cache, B)
    dry = cache_cli(["rm", "org/reca", "--dry-run"], cache)
    assert "would remove kernel/org/reca: verification receipts" in dry.stdout
    assert "would remove 2 entries" in dry.stdout
    assert os.path.isdir(receipts(cache, A))
    r = cache_cli(["rm", "-y", "org/reca"], cache)
    assert "removed kernel/org/reca: whole repo" in r.stdout
    assert "removed kernel/org/reca: verification receipts" in r.stdout and "removed 2 entries" in r.stdout
    assert not os.path.exists(os.path.join(cache, A))
    assert not os.path.exists(receipts(cache, A))
    assert lock_files(cache, A) == locks_a, "huggingface_hub's lock files stay"
    # the other repo: receipt and locks untouched, and its receipt still vouches for every file
    assert lock_files(cache, B) == locks_b
    assert os.path.isfile(os.path.join(receipts(cache, B), commits[("org/recb", 1)], V + ".json"))
    assert warm_is_trusted(hub, cache, "org/recb", 1)


def test_rm_revision_removes_that_commits_receipts(hub, filled):
    cache, commits = filled
    c1, c2 = commits[("org/reca", 1)], commits[("org/reca", 2)]
    r = cache_cli(["rm", "-y", "org/reca", "--revision", "v1"], cache)
    assert f"removed kernel/org/reca: verification receipts of {c1}" in r.stdout
    assert not os.path.exists(os.path.join(receipts(cache, A), c1))
    assert os.path.isfile(os.path.join(receipts(cache, A), c2, V + ".json"))
    assert os.path.isfile(os.path.join(receipts(cache, B), commits[("org/recb", 1)], V + ".json"))
    assert lock_files(cache, A)
    assert warm_is_trusted(hub, cache, "org/reca", 2)
    # by commit too
    r = cache_cli(["rm", "-y", "org/reca", "--revision", c2], cache)
    assert f"verification receipts of {c2}" in r.stdout
    assert os.listdir(receipts(cache, A)) == []


def test_rm_removes_receipts_kept_outside_the_cache(hub, tmp_path):
    cache, outside = str(tmp_path / "c"), str(tmp_path / "receipts")
    env = {"HUBKERN_RECEIPTS_DIR": outside}
    c1 = pull(hub, cache, "org/reca", 1, env)["commit"]
    cb = pull(hub, cache, "org/recb", 1, env)["commit"]
    (root_dir,) = os.listdir(outside)
    where = os.path.join(outside, root_dir)
    assert os.path.isfile(os.path.join(where, A, c1, V + ".json"))
    assert not os.path.exists(receipts(cache, A))
    cache_cli(["rm", "-y", "org/reca"], cache, env=env)
    assert not os.path.exists(os.path.join(where, A))
    assert os.path.isfile(os.path.join(where, B, cb, V + ".json"))


def test_prune_removes_receipts_of_what_is_gone(hub, filled):
    cache, commits = filled
    c1, c2 = commits[("org/reca", 1)], commits[("org/reca", 2)]
    # a snapshot without a ref: prune --detached removes it and its receipts (dry run first)
    os.unlink(os.path.join(cache, A, "refs", "v1"))
    dry = cache_cli(["prune", "--detached", "--dry-run"], cache)
    assert f"would remove kernel/org/reca: verification receipts of {c1} (no snapshot)" in dry.stdout
    assert os.path.isdir(os.path.join(receipts(cache, A), c1))
    r = cache_cli(["prune", "-y", "--detached"], cache)
    assert f"removed kernel/org/reca: snapshot {c1} (no ref names it)" in r.stdout
    assert f"verification receipts of {c1}" in r.stdout
    assert sorted(os.listdir(receipts(cache, A))) == [c2]
    assert warm_is_trusted(hub, cache, "org/reca", 2)
    # a variant deleted from its snapshot by hand: its receipt goes, the commit's folder stays
    shutil.rmtree(os.path.join(cache, A, "snapshots", c2, "build", V))
    r = cache_cli(["prune", "-y"], cache)
    assert f"verification receipt of {c2}/{V} (no such variant)" in r.stdout
    assert os.listdir(os.path.join(receipts(cache, A), c2)) == []
    # a repo folder removed by hand (or by `hf cache rm`): its receipts are leftovers too
    locks_b = lock_files(cache, B)
    shutil.rmtree(os.path.join(cache, B))
    r = cache_cli(["prune", "-y"], cache)
    assert "removed kernel/org/recb: verification receipts (repo not in the cache)" in r.stdout  # one spelling
    assert not os.path.exists(receipts(cache, B)) and lock_files(cache, B) == locks_b
    assert not os.path.exists(os.path.join(cache, B))
    # nothing left to prune: a second run removes nothing
    assert "removed 0 entries" in cache_cli(["prune", "-y"], cache).stdout


def test_prune_removes_stale_receipt_temp_files_only(hub, filled):
    """A receipt writer killed between creating its temp file and renaming it leaves
    <variant>.json.<8 hex>.tmp beside the receipts (hk_write_file_atomic's naming). prune removes
    such files once older than a minute; a younger one may belong to a live writer and stays, and so
    do files that only look similar."""
    cache, commits = filled
    c2 = commits[("org/reca", 2)]
    rdir = os.path.join(receipts(cache, A), c2)

    def make(name, age):
        p = os.path.join(rdir, name)
        with open(p, "w") as f:
            f.write('{"format":')  # a half-written receipt
        if age:
            os.utime(p, (time.time() - age, time.time() - age))
        return p

    stale = make(V + ".json.0a1b2c3d.tmp", 3600)
    stale2 = make("torch-cpu.json.ffffffff.tmp", 61 + 5)
    live = make(V + ".json.12345678.tmp", 0)           # just written: a writer may be at work
    near = make(V + ".json.abcdef01.tmp", 30)           # half a minute: still young
    odd = [make(n, 3600) for n in (V + ".json.0A1B2C3D.tmp",   # not the writer's (lowercase) hex
                                    V + ".json.0a1b2c3.tmp",    # 7 hex digits
                                    ".json.0a1b2c3d.tmp",       # no variant name
                                    V + ".0a1b2c3d.tmp",        # no .json
                                    "notes.tmp")]
    dry = cache_cli(["prune", "--dry-run"], cache)
    for p in (stale, stale2):
        assert (f"would remove kernel/org/reca: leftover temp file of a verification receipt "
                f"{c2}/{os.path.basename(p)}") in dry.stdout, dry.stdout
        assert os.path.exists(p)
    assert "would remove 2 entries" in dry.stdout, dry.stdout
    r = cache_cli(["prune", "-y"], cache)
    assert "removed 2 entries" in r.stdout, r.stdout
    assert not os.path.exists(stale) and not os.path.exists(stale2)
    for p in (live, near, *odd):
        assert os.path.exists(p), p
    # the receipt itself is untouched and still vouches for every file
    assert os.path.isfile(os.path.join(rdir, V + ".json"))
    assert warm_is_trusted(hub, cache, "org/reca", 2)
    # the young ones go once they are old
    for p in (live, near):
        os.utime(p, (time.time() - 120, time.time() - 120))
    r = cache_cli(["prune", "-y"], cache)
    assert "removed 2 entries" in r.stdout, r.stdout
    assert not os.path.exists(live) and not os.path.exists(near)
    assert all(os.path.exists(p) for p in odd)


def test_rm_revision_with_only_receipts_left(hub, filled):
    """The snapshot of a commit is gone (removed by hand or by `hf cache rm`) but its receipts are
    still there: `cache rm --revision COMMIT` removes them, says so and succeeds; a revision that
    matches nothing at all is HK_ERR_NOT_FOUND."""
    cache, commits = filled
    c1, c2 = commits[("org/reca", 1)], commits[("org/reca", 2)]
    shutil.rmtree(os.path.join(cache, A, "snapshots", c1))
    os.unlink(os.path.join(cache, A, "refs", "v1"))
    assert os.path.isdir(os.path.join(receipts(cache, A), c1))
    line = f"kernel/org/reca: verification receipts of {c1} (its snapshot was not in the cache)"
    dry = cache_cli(["rm", "org/reca", "--revision", c1, "--dry-run"], cache)
    assert f"would remove {line}" in dry.stdout and "would remove 1 entry" in dry.stdout, dry.stdout
    assert os.path.isdir(os.path.join(receipts(cache, A), c1))
    r = cache_cli(["rm", "-y", "org/reca", "--revision", c1], cache)
    assert f"removed {line}" in r.stdout, r.stdout
    # and, as always, the blobs only that snapshot used (it is gone: they are unreferenced now)
    blobs = [ln for ln in r.stdout.splitlines() if ln.startswith("removed kernel/org/reca: unreferenced blob")]
    assert blobs and f"removed {1 + len(blobs)} entries" in r.stdout, r.stdout
    assert not os.path.exists(os.path.join(receipts(cache, A), c1))
    # the other commit and its receipt are untouched
    assert os.path.isdir(os.path.join(cache, A, "snapshots", c2))
    assert os.path.isfile(os.path.join(receipts(cache, A), c2, V + ".json"))
    # now nothing matches c1: not found, and nothing else is touched
    again = cache_cli(["rm", "-y", "org/reca", "--revision", c1], cache, check=False)
    assert again.returncode == 1 and "HK_ERR_NOT_FOUND" in again.stderr, (again.stdout, again.stderr)
    assert "no snapshot, ref or verification receipt" in again.stderr
    gone = "0" * 40
    r = cache_cli(["rm", "-y", "org/reca", "--revision", gone], cache, check=False)
    assert r.returncode == 1 and "HK_ERR_NOT_FOUND" in r.stderr
    assert os.path.isfile(os.path.join(receipts(cache, A), c2, V + ".json"))
    assert warm_is_trusted(hub, cache, "org/reca", 2)
