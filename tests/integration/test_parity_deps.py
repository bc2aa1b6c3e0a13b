"""Kernel dependency trees, project locks and downloads: kernels 0.17.2 (the real package) and hubkern
against the same `hubkern serve` mirror over one generated corpus.

The corpus (torch-cpu noarch variants, resolved with backend cpu; torch is not installed): leaves
by version and by revision, a shared node, depth 4, a per-backend dependency (only the torch-cuda
variant of the root declares it, so only locking, which explores every variant, sees it), and the
bad trees: a cycle, a missing dependency repo, a dependency without a variant for this machine, a
dependency at an untrusted publisher. For every root both tools resolve the same set of
(repo, commit, variant) or fail for the same reason; `kernels lock` and `hubkern lock` write the
same bytes; `hubkern download PROJECT_DIR` fills the cache with the files `kernels download` does."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import KERNELS_TREES_PY, Server, hubkern_bin, publish  # noqa: E402

ORG = "hubkern-pt"


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "LOCAL_KERNELS"))}
    env.pop("DO_NOT_TRACK", None)
    env.pop("DISABLE_TELEMETRY", None)
    env.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)
    return env


def meta(name, backend, deps):
    return json.dumps({"name": name, "id": f"_{name.replace('-', '_')}_{backend}_abc1234", "version": 1,
                       "license": "MIT", "python-depends": [], "backend": {"type": backend},
                       "kernel-depends": deps,
                       "provenance": {"kernel-builder": {"version": "0.17.0", "sha": "a" * 40, "dirty": False},
                                      "kernel": {"sha": "b" * 40, "dirty": True}}}).encode()


def dep(repo, version=None, revision=None):
    d = {"repo-id": repo}
    if revision is not None:
        d["revision"] = revision
    else:
        d["version"] = version
    return d


def make(tmp, store, repo, deps=(), cuda_deps=None, cpu=True, branch="v1"):
    name = repo.split("/")[1]
    src = tmp / f"src-{name}-{branch}"
    files = {}
    if cpu:
        files["build/torch-cpu/metadata.json"] = meta(name, "cpu", list(deps))
        files["build/torch-cpu/__init__.py"] = b"NAME = %r\n" % name.encode()
    if cuda_deps is not None:
        files["build/torch-cuda/metadata.json"] = meta(name, "cuda", list(cuda_deps))
        files["build/torch-cuda/__init__.py"] = b"NAME = %r\n" % name.encode()
    for rel, data in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    commit = publish(src, repo, branch, store)
    COMMITS[(repo, branch)] = commit
    return commit


COMMITS = {}


ROOTS_OK = ["root", "d0", "mid", "leaf-a", "pinned", "root2"]
ROOTS_BAD = {"cyc-x": "cycle", "missing": "missing", "novar": "novariant", "untr": "untrusted"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    store = tmp / "store"
    R = lambda n: f"{ORG}/{n}"  # noqa: E731
    make(tmp, store, R("leaf-a"))
    make(tmp, store, R("leaf-b"), branch="main")
    make(tmp, store, R("mid"), [dep(R("leaf-a"), 1), dep(R("leaf-b"), revision="main")])
    make(tmp, store, R("cudaonly"), cpu=False, cuda_deps=[])
    make(tmp, store, R("root"), [dep(R("mid"), 1), dep(R("leaf-a"), 1)], cuda_deps=[dep(R("cudaonly"), 1)])
    # locking: kernels 0.17.2 cannot lock a dependency pinned by a branch name (KernelLock refuses
    # "main" as a commit), so the project's trees pin revisions by commit
    leaf_b = COMMITS[(R("leaf-b"), "main")]
    make(tmp, store, R("pinned"), [dep(R("leaf-b"), revision=leaf_b), dep(R("leaf-a"), 1)])
    make(tmp, store, R("root2"), [dep(R("pinned"), 1), dep(R("d2"), 1)], cuda_deps=[dep(R("cudaonly"), 1)])
    for i in range(4):
        make(tmp, store, R(f"d{i}"), [dep(R(f"d{i + 1}"), 1)])
    make(tmp, store, R("d4"))
    make(tmp, store, R("cyc-x"), [dep(R("cyc-y"), 1)])
    make(tmp, store, R("cyc-y"), [dep(R("cyc-x"), 1)])
    make(tmp, store, R("missing"), [dep(R("nope"), 1)])
    make(tmp, store, R("novar"), [dep(R("cudaonly"), 1)])
    make(tmp, store, "evil-org/k")
    make(tmp, store, R("untr"), [dep("evil-org/k", 1)])
    srv = Server(store, "--trust", ORG)
    yield dict(srv=srv, tmp=tmp)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


PULL_ROOTS = ["root", "d0", "pinned"]


@pytest.fixture(scope="module")
def py_trees(env):
    # kernels' tree of every root the tests ask about, from one process: they shared one HF_HOME
    # already, and a process each was mostly the import of kernels
    roots = [f"{ORG}/{r}" for r in dict.fromkeys(ROOTS_OK + sorted(ROOTS_BAD) + PULL_ROOTS)]
    p = subprocess.run([sys.executable, "-c", KERNELS_TREES_PY, *roots], capture_output=True, text=True, timeout=300,
                       env=clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(env["tmp"] / "hf_py_tree")))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def hk(e, *args, home="hf_hk", check=False):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(e["tmp"] / home)), check=check)


def hk_tree(e, repo):
    p = hk(e, "info", repo, "--version", "1", "--backend", "cpu", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def reason(text):
    t = text.lower()
    for key, words in (("cycle", ["cyclic"]), ("untrusted", ["trusted"]), ("novariant", ["variant"]),
                       ("missing", ["not found", "repositorynotfound", "404", "does not exist"])):
        if any(w in t for w in words):
            return key
    return "other: " + text


@pytest.mark.parametrize("root", ROOTS_OK)
def test_same_tree(env, py_trees, root):
    want = py_trees[f"{ORG}/{root}"]
    assert "nodes" in want, want
    got = hk_tree(env, f"{ORG}/{root}")
    assert "dependency_tree" in got, got
    hset = {(n["repo_id"], n["commit"], n["variant"]) for n in got["dependency_tree"]}
    # kernels keeps a revision as given ("main"); the commit it stands for is the published one
    pyset = {(r, c if len(c) == 40 else COMMITS[(r, c)], v) for r, c, v in want["nodes"]}
    assert hset == pyset
    assert len(got["dependency_tree"]) == len(want["nodes"])  # shared nodes appear under each dependent


def test_provenance_in_info(env):
    got = hk_tree(env, f"{ORG}/root")
    assert got["provenance"] == {"kernel_builder_version": "0.17.0", "kernel_builder_commit": "a" * 40,
                                 "kernel_builder_dirty": False, "kernel_commit": "b" * 40, "kernel_dirty": True,
                                 "dirty": True}
    assert got["name"] == "root" and got["license"] == "MIT"


@pytest.mark.parametrize("root", sorted(ROOTS_BAD))
def test_same_failure(env, py_trees, root):
    want = py_trees[f"{ORG}/{root}"]
    assert "error" in want, want
    got = hk_tree(env, f"{ORG}/{root}")
    err = got.get("dependency_tree_error")
    assert err, got
    assert reason(want["error"]) == ROOTS_BAD[root], want
    assert reason(err) == ROOTS_BAD[root], err
    assert err.count(f"{ORG}/{root} -> ") >= 1, err  # names the path from the root


def kernels_cli(e, *args, home):
    code = "import sys; from kernels.cli import main; sys.argv=['kernels', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=180,
                          env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(e["tmp"] / home)))


def project(e, name, deps):
    d = e["tmp"] / name
    d.mkdir(exist_ok=True)
    body = "".join(f'"{ORG}/{k}" = {v}\n' for k, v in deps.items())
    (d / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1"\n\n'
                                      "# kernels this project loads\n[tool.kernels.dependencies]\n" + body)
    return d


def test_lock_project_byte_identical(env):
    d = project(env, "proj", {"root2": 1, "d0": 1})
    p = kernels_cli(env, "lock", d, home="hf_py_lock")
    assert p.returncode == 0, p.stderr
    want = (d / "kernels.lock").read_bytes()
    (d / "kernels.lock").unlink()
    p = hk(env, "lock", d)
    assert p.returncode == 0, p.stderr
    got = (d / "kernels.lock").read_bytes()
    assert got == want
    repos = {x["dependency"]["repo-id"] for x in json.loads(got)}
    assert f"{ORG}/cudaonly" in repos  # the torch-cuda variant's dependency: every variant is locked
    assert f"{ORG}/d4" in repos and f"{ORG}/leaf-b" in repos and len(repos) == 10


def cache_files(home):
    root = home / "hub"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() or p.is_symlink() if "/snapshots/" in str(p))


def test_download_project_same_cache(env):
    d = project(env, "proj-dl", {"root2": 1})
    p = hk(env, "lock", d)
    assert p.returncode == 0, p.stderr
    # every variant: the machine's own choice depends on backend detection, which differs without torch
    p = kernels_cli(env, "download", d, "--all-variants", home="hf_py_dl")
    assert p.returncode == 0, p.stderr
    p = hk(env, "download", d, "--all-variants", home="hf_hk_dl")
    assert p.returncode == 0, p.stderr
    py_files = [f for f in cache_files(env["tmp"] / "hf_py_dl") if "/build/" in f]
    hk_files = [f for f in cache_files(env["tmp"] / "hf_hk_dl") if "/build/" in f]
    assert hk_files == py_files and py_files


def test_stale_lock_says_relock(env):
    d = project(env, "proj-stale", {"pinned": 1})
    p = hk(env, "lock", d)
    assert p.returncode == 0, p.stderr
    locks = [x for x in json.loads((d / "kernels.lock").read_text())
             if x["dependency"]["repo-id"] != f"{ORG}/leaf-b"]
    (d / "kernels.lock").write_text(json.dumps(locks, indent=2))
    p = hk(env, "download", d, "--backend", "cpu", home="hf_hk_stale")
    assert p.returncode != 0
    assert "re-lock" in p.stderr and "leaf-b" in p.stderr, p.stderr


def test_no_lockfile(env):
    d = env["tmp"] / "empty-proj"
    d.mkdir()
    p = hk(env, "download", d)
    assert p.returncode == 1 and "No kernels.lock file found in:" in p.stderr


# ---- hubkern pull: the whole tree --------------------------------------------------------------


@pytest.mark.parametrize("root", PULL_ROOTS)
def test_pull_pulls_the_tree(env, py_trees, root):
    want = py_trees[f"{ORG}/{root}"]
    home = f"hf_hk_pull_{root}"
    p = hk(env, "pull", f"{ORG}/{root}", "--version", "1", "--backend", "cpu", "--json", home=home)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)["dependency_tree"]
    pyset = {(r, c if len(c) == 40 else COMMITS[(r, c)], v) for r, c, v in want["nodes"]}
    assert {(n["repo_id"], n["commit"], n["variant"]) for n in got} == pyset
    assert len(got) == len(want["nodes"]) and got[0]["depth"] == 0 and got[0]["parent"] == -1
    hub = env["tmp"] / home / "hub"
    for r, c, v in pyset:  # every node is in the cache, digest-checked
        d = hub / f"kernels--{r.replace('/', '--')}" / "snapshots" / c / "build" / v
        assert (d / "metadata.json").is_file() and (d / "__init__.py").is_file(), d
    # text mode prints every node's variant directory
    p = hk(env, "pull", f"{ORG}/{root}", "--version", "1", "--backend", "cpu", home=home)
    assert p.returncode == 0 and len(set(p.stdout.split())) == len(pyset), p.stdout


@pytest.mark.parametrize("root", sorted(ROOTS_BAD))
def test_pull_bad_tree_names_the_path(env, root):
    home = f"hf_hk_pullbad_{root}"
    p = hk(env, "pull", f"{ORG}/{root}", "--version", "1", "--backend", "cpu", home=home)
    assert p.returncode == 1, p.stdout
    assert reason(p.stderr) == ROOTS_BAD[root], p.stderr
    assert f"{ORG}/{root} -> " in p.stderr, p.stderr
    # the tree failed before any dependency was downloaded
    hub = env["tmp"] / home / "hub"
    pulled = {d.name for d in hub.glob("kernels--*") if list(d.glob("snapshots/*/build/*/__init__.py"))}
    assert pulled == {f"kernels--{ORG}--{root}"}, pulled


def test_pull_all_variants_follows_every_variant(env):
    p = hk(env, "pull", f"{ORG}/root", "--version", "1", "--all-variants", "--json", home="hf_hk_pull_all")
    assert p.returncode == 0, p.stderr
    got = {(n["repo_id"], n["variant"]) for n in json.loads(p.stdout)["dependency_tree"]}
    # the torch-cuda variant's own dependency comes too, with every variant of every node
    assert (f"{ORG}/cudaonly", "torch-cuda") in got and (f"{ORG}/root", "torch-cuda") in got
    assert {r for r, _ in got} == {f"{ORG}/{n}" for n in ("root", "mid", "leaf-a", "leaf-b", "cudaonly")}


def offline(e, *args, home):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=clean_env(HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_OFFLINE="1",
                                        HF_HOME=str(e["tmp"] / home)))


def test_offline_load_after_online_load_with_a_branch_dependency(env):
    """mid declares leaf-b by branch ("main"): the online load installs each dependency under its
    declared ref, so the same load offline resolves the whole tree from the cache."""
    home = "hf_hk_offline_load"
    p = hk(env, "load", f"{ORG}/mid", "--version", "1", "--backend", "cpu", home=home)
    assert p.returncode == 0, p.stderr
    hub = env["tmp"] / home / "hub"
    assert (hub / f"kernels--{ORG}--leaf-b" / "refs" / "main").read_text().strip() == COMMITS[(f"{ORG}/leaf-b", "main")]
    q = offline(env, "load", f"{ORG}/mid", "--version", "1", "--backend", "cpu", home=home)
    assert q.returncode == 0, q.stderr


def test_offline_pull_after_online_pull_of_a_tree(env):
    home = "hf_hk_offline_pull"
    p = hk(env, "pull", f"{ORG}/mid", "--version", "1", "--backend", "cpu", home=home)
    assert p.returncode == 0, p.stderr
    q = offline(env, "pull", f"{ORG}/mid", "--version", "1", "--backend", "cpu", home=home)
    assert q.returncode == 0, q.stderr
