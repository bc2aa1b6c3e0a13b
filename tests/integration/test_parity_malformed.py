"""Malformed input: kernels 0.17.2 (the real package) and hubkern against the same `hubkern serve`
mirror (issue 26). Each case is a repo whose torch-cpu build is off in one way; both tools must
accept it or refuse it alike in the tree (resolve_kernel_tree / `hubkern info`), the lock
(`kernels lock` / `hubkern lock`, byte-identical when both write one) and the download.

The metadata cases are also checked without a mirror: hubkern's parser (`hubkern info` reads the
tree's metadata.json) against kernels' own `Metadata.from_bytes` on the same bytes."""

import copy
import json
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import KERNELS_TREES_PY, Server, hubkern_bin, publish  # noqa: E402
from test_parity_deps import cache_files, clean_env  # noqa: E402

ORG = "hubkern-mf"
GOOD = {"name": "x", "id": "_x_cpu_abc1234", "version": 1, "license": "MIT", "python-depends": [],
        "backend": {"type": "cpu"}, "kernel-depends": []}


def md(kname, **change):
    d = copy.deepcopy(GOOD)
    d["name"] = kname
    d["id"] = f"_{kname.replace('-', '_')}_cpu_abc1234"
    for k, v in change.items():
        k = k.replace("_", "-")
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


DROP = object()

# name -> metadata.json bytes of its torch-cpu variant (the name is the repo's)
MALFORMED = {
    "btype": lambda n: md(n, backend={"type": "npu"}),
    "btype-case": lambda n: md(n, backend={"type": "CPU"}),
    "nopy": lambda n: md(n, python_depends=DROP),
    "pynull": lambda n: md(n, python_depends=None),
    "kdextra": lambda n: md(n, kernel_depends=[{"repo-id": f"{ORG}/leaf", "version": 1, "hash": "x"}]),
    "kdfloat": lambda n: md(n, kernel_depends=[{"repo-id": f"{ORG}/leaf", "version": 1.0}]),
    "ver-float": lambda n: md(n, version=1.0),
    "ver-exp": lambda n: json.dumps(md(n)).replace('"version": 1,', '"version": 1e0,').encode(),
    "minver2": lambda n: md(n, kernels_minver="0.17"),
    "minver4": lambda n: md(n, kernels_minver="0.17.2.1"),
    "minver-rc": lambda n: md(n, kernels_minver="0.17.2rc1"),
}
# accepted by both: the edges of kernels' rules
WELLFORMED = {
    "minver-ws": lambda n: md(n, kernels_minver=" +0.17.2\t"),
    "minver-old": lambda n: md(n, kernels_minver="0.1.0"),
    "btype-tpu": lambda n: md(n, backend={"type": "tpu"}),
    "extra-top": lambda n: md(n, whatever={"version": 1.5}),
    "a9": lambda n: md(n),
}
# invalid kernel names (kernels' KernelName: [a-z][a-z0-9-]*[a-z0-9], two characters at least)
BAD_NAMES = ["r", "1a", "a_b", "a-", "Ab", "a.b", "-ab"]
GOOD_NAMES = ["ab", "a-9", "a--b", "relu2d"]


def write_raw(tmp, store, repo, files, branch="v1"):
    src = tmp / f"src-{repo.split('/')[1]}-{branch}"
    for rel, data in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return publish(src, repo, branch, store)


def cpu_variant(meta):
    return {"build/torch-cpu/metadata.json": meta, "build/torch-cpu/__init__.py": b"X = 1\n"}


CASES = {}  # repo short name -> expected "ok" / "bad"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("malformed")
    store = tmp / "store"
    R = lambda n: f"{ORG}/{n}"  # noqa: E731
    leaf = write_raw(tmp, store, R("leaf"), cpu_variant(md("leaf")))
    write_raw(tmp, store, R("leaf"), cpu_variant(md("leaf")), branch="v2")
    for n, f in MALFORMED.items():
        write_raw(tmp, store, R(n), cpu_variant(f(n)))
        CASES[n] = "bad"
    for n, f in WELLFORMED.items():
        write_raw(tmp, store, R(n), cpu_variant(f(n)))
        CASES[n] = "ok"
    for i, name in enumerate(BAD_NAMES):
        write_raw(tmp, store, R(f"badname{i}"), cpu_variant(md("ab", name=name)))
        CASES[f"badname{i}"] = "bad"
    for i, name in enumerate(GOOD_NAMES):
        write_raw(tmp, store, R(f"goodname{i}"), cpu_variant(md("ab", name=name)))
        CASES[f"goodname{i}"] = "ok"
    # the root variant's metadata.json missing, or not JSON
    write_raw(tmp, store, R("nometa"), {"build/torch-cpu/__init__.py": b"X = 1\n"})
    write_raw(tmp, store, R("notjson"), cpu_variant(b"{not json"))
    CASES["nometa"] = CASES["notjson"] = "bad"
    # a folder under build/ that is no variant
    write_raw(tmp, store, R("withdocs"), {**cpu_variant(md("withdocs")), "build/docs/README.md": b"# docs\n"})
    CASES["withdocs"] = "ok"
    # the same repo twice in one kernel-depends: the last entry wins (the v2 one)
    write_raw(tmp, store, R("dup"), cpu_variant(md("dup", kernel_depends=[
        {"repo-id": R("leaf"), "version": 1}, {"repo-id": R("leaf"), "version": 2}])))
    CASES["dup"] = "ok"
    # kernels-minver newer than 0.17.2: resolved and locked by both, refused at load
    write_raw(tmp, store, R("minver-new"), cpu_variant(md("minver-new", kernels_minver="0.99.0")))
    write_raw(tmp, store, R("on-minver-new"), cpu_variant(md("on-minver-new", kernel_depends=[
        {"repo-id": R("minver-new"), "version": 1}])))
    CASES["minver-new"] = CASES["on-minver-new"] = "ok"
    # both the root (0.98.0) and its dependency (0.99.0) too new: kernels names the root (it walks
    # the tree root first, before installing anything)
    write_raw(tmp, store, R("minver-both"), cpu_variant(md("minver-both", kernels_minver="0.98.0", kernel_depends=[
        {"repo-id": R("minver-new"), "version": 1}])))
    # a kernel without a variant for this machine (torch-cuda only)
    write_raw(tmp, store, R("cudaonly"), {"build/torch-cuda/metadata.json": md("cudaonly", backend={"type": "cuda"}),
                                          "build/torch-cuda/__init__.py": b"X = 1\n"})
    write_raw(tmp, store, R("a-rocmonly"), {"build/torch-rocm/metadata.json": md("a-rocmonly", backend={"type": "rocm"}),
                                            "build/torch-rocm/__init__.py": b"X = 1\n"})
    write_raw(tmp, store, R("both-cpu-cuda"), {
        **cpu_variant(md("both-cpu-cuda")), "build/torch-cuda/__init__.py": b"X = 1\n",
        "build/torch-cuda/metadata.json": md("both-cpu-cuda", backend={"type": "cuda"})})
    srv = Server(store, "--trust", ORG)
    yield dict(srv=srv, tmp=tmp, leaf=leaf)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


PY_LOAD_DEF = r"""
import json, sys
from kernels import get_kernel
def load(repo):
    try:
        get_kernel(repo, version=1, backend="cpu")
        return {"ok": True}
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)}
"""
PY_LOAD = PY_LOAD_DEF + "print(json.dumps(load(sys.argv[1])))\n"
# every kernel of argv[1:] loaded in turn by one process (one import of kernels): {repo_id: answer}
PY_LOADS = PY_LOAD_DEF + "print(json.dumps({r: load(r) for r in sys.argv[1:]}))\n"

# `kernels lock DIR` for every project of argv[1:] in one process, main() as the command runs it:
# {dir: {"rc": exit status, "stderr": what it wrote there}}
PY_LOCKS = r"""
import contextlib, io, json, sys, traceback, warnings
from kernels.cli import main
out = {}
for d in sys.argv[1:]:
    sys.argv = ["kernels", "lock", d]
    err = io.StringIO()
    # a warning shown for an earlier project is shown again, as in a process of its own
    with contextlib.redirect_stderr(err), warnings.catch_warnings():
        try:
            main()
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:
            traceback.print_exc()
            rc = 1
    out[d] = {"rc": rc, "stderr": err.getvalue()}
print(json.dumps(out))
"""


def py(e, code, *args, home):
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                       env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(e["tmp"] / home)))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def hk(e, *args, home="hf_hk"):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(e["tmp"] / home)))


def kernels_cli(e, *args, home):
    code = "import sys; from kernels.cli import main; sys.argv=['kernels', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=180,
                          env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(e["tmp"] / home)))


def project(e, name, deps):
    d = e["tmp"] / name
    d.mkdir(exist_ok=True)
    body = "".join(f'"{ORG}/{k}" = {v}\n' for k, v in deps.items())
    (d / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1"\n\n[tool.kernels.dependencies]\n' + body)
    return d


def all_cases():
    names = list(MALFORMED) + list(WELLFORMED) + [f"badname{i}" for i in range(len(BAD_NAMES))]
    return names + [f"goodname{i}" for i in range(len(GOOD_NAMES))] + [
        "nometa", "notjson", "withdocs", "dup", "minver-new", "on-minver-new"]


@pytest.fixture(scope="module")
def py_trees(env):
    # kernels' trees of every case from one process: the cases shared one HF_HOME already, and a
    # process each was mostly the import of kernels
    return py(env, KERNELS_TREES_PY, *[f"{ORG}/{c}" for c in all_cases()], home="hf_py_tree")


@pytest.mark.parametrize("case", all_cases())
def test_same_tree_answer(env, py_trees, case):
    want = py_trees[f"{ORG}/{case}"]
    assert ("error" in want) == (CASES[case] == "bad"), want  # the corpus says what kernels does
    p = hk(env, "info", f"{ORG}/{case}", "--version", "1", "--backend", "cpu", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    if "error" in want:
        assert got.get("dependency_tree_error"), got
        return
    assert "dependency_tree_error" not in got, got
    hset = sorted((n["repo_id"], n["commit"], n["variant"]) for n in got["dependency_tree"])
    assert hset == sorted(tuple(n) for n in want["nodes"])


@pytest.fixture(scope="module")
def py_locks(env):
    # `kernels lock` of every case's project from one process (one HF_HOME, as before): per case
    # its exit status and stderr, and the lock it wrote (then removed, for hubkern to write its own)
    dirs = {c: project(env, f"proj-{c}", {c: 1}) for c in all_cases()}
    p = subprocess.run([sys.executable, "-c", PY_LOCKS, *map(str, dirs.values())], capture_output=True, text=True,
                       timeout=300, env=clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(env["tmp"] / "hf_py_lock")))
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout.strip().splitlines()[-1])
    out = {}
    for c, d in dirs.items():
        r = runs[str(d)]
        lock = d / "kernels.lock"
        out[c] = dict(r, lock=lock.read_bytes() if r["rc"] == 0 else None)
        if r["rc"] == 0:
            lock.unlink()
    return out


@pytest.mark.parametrize("case", all_cases())
def test_same_lock_answer(env, py_locks, case):
    d = env["tmp"] / f"proj-{case}"
    want, stderr = py_locks[case]["lock"], py_locks[case]["stderr"]
    q = hk(env, "lock", d)
    assert (q.returncode == 0) == (want is not None), (stderr[-600:], q.stderr)
    if want is not None:
        assert (d / "kernels.lock").read_bytes() == want
    else:
        assert not (d / "kernels.lock").exists()


def test_dup_keeps_the_last_entry(env):
    p = hk(env, "info", f"{ORG}/dup", "--version", "1", "--backend", "cpu", "--json")
    tree = json.loads(p.stdout)["dependency_tree"]
    assert [(n["repo_id"], n.get("version")) for n in tree] == [(f"{ORG}/dup", 1), (f"{ORG}/leaf", 2)]
    # the load installs the one kept, not both
    p = hk(env, "pull", f"{ORG}/dup", "--version", "1", "--backend", "cpu", "--json", home="hf_hk_dup")
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["dependency_tree"]) == 2


def test_info_reports_an_unreadable_root_metadata(env):
    for case, words in (("nometa", "metadata.json"), ("notjson", "json")):
        p = hk(env, "info", f"{ORG}/{case}", "--version", "1", "--backend", "cpu", "--json")
        err = json.loads(p.stdout).get("dependency_tree_error", "")
        assert words in err.lower(), err


LOAD_CASES = ["minver-new", "on-minver-new", "minver-old"]


@pytest.fixture(scope="module")
def py_loads(env):
    # kernels' loads of the three cases from one process, in the tests' order (they shared one
    # HF_HOME already)
    return py(env, PY_LOADS, *[f"{ORG}/{c}" for c in LOAD_CASES], home="hf_py_load")


@pytest.mark.parametrize("case", LOAD_CASES)
def test_minver_at_load(env, py_loads, case):
    want = py_loads[f"{ORG}/{case}"]
    p = hk(env, "load", f"{ORG}/{case}", "--version", "1", "--backend", "cpu", home="hf_hk_load")
    if case == "minver-old":
        assert "ok" in want, want
        assert p.returncode == 0, p.stderr
    else:
        assert "kernels>=0.99.0" in want.get("error", ""), want
        assert p.returncode != 0 and "kernels>=0.99.0" in p.stderr, p.stderr


@pytest.mark.parametrize("case,words", [("on-minver-new", "kernels>=0.99.0"), ("minver-both", "kernels>=0.98.0")])
def test_minver_checked_for_the_whole_tree_before_installing(env, case, words):
    want = py(env, PY_LOAD, f"{ORG}/{case}", home=f"hf_py_mv_{case}")
    assert words in want.get("error", ""), want
    p = hk(env, "load", f"{ORG}/{case}", "--version", "1", "--backend", "cpu", "--json", home=f"hf_hk_mv_{case}")
    assert p.returncode == 1, p.stderr
    err = json.loads(p.stdout)["error"]
    assert err["code"] == "HK_ERR_UNSUPPORTED" and words in err["message"], err
    # refused before anything of the tree is installed: only the metadata.json files were fetched
    py_files = cache_files(env["tmp"] / f"hf_py_mv_{case}")
    hk_files = cache_files(env["tmp"] / f"hf_hk_mv_{case}")
    assert hk_files == py_files and all(f.endswith("/metadata.json") for f in hk_files if "/build/" in f)


def test_download_all_variants_skips_a_non_variant_folder(env):
    d = project(env, "proj-docs", {"withdocs": 1})
    assert hk(env, "lock", d).returncode == 0
    p = kernels_cli(env, "download", d, "--all-variants", home="hf_py_docs")
    assert p.returncode == 0, p.stderr
    q = hk(env, "download", d, "--all-variants", home="hf_hk_docs")
    assert q.returncode == 0, q.stderr
    py_files = [f for f in cache_files(env["tmp"] / "hf_py_docs") if "/build/" in f]
    hk_files = [f for f in cache_files(env["tmp"] / "hf_hk_docs") if "/build/" in f]
    # kernels' snapshot_download takes build/* by pattern, docs too; hubkern pulls variants only
    # (docs/loading.md, compatibility table)
    assert hk_files == [f for f in py_files if "/build/docs/" not in f] and hk_files
    assert any("/build/docs/" in f for f in py_files)


def test_download_goes_on_after_a_kernel_without_variant(env):
    # a-rocmonly fits neither a cpu nor a cuda machine (whatever both detect here); both-cpu-cuda
    # fits either, and comes after it in the lock
    d = project(env, "proj-novar", {"a-rocmonly": 1, "both-cpu-cuda": 1})
    assert hk(env, "lock", d).returncode == 0
    locks = [x["dependency"]["repo-id"] for x in json.loads((d / "kernels.lock").read_text())]
    assert locks == [f"{ORG}/a-rocmonly", f"{ORG}/both-cpu-cuda"]
    p = kernels_cli(env, "download", d, home="hf_py_novar")
    q = hk(env, "download", d, home="hf_hk_novar")
    assert p.returncode == 1 and q.returncode == 1, (p.stderr, q.stderr)
    assert "a-rocmonly" in q.stderr
    py_files = [f for f in cache_files(env["tmp"] / "hf_py_novar") if "/build/" in f]
    hk_files = [f for f in cache_files(env["tmp"] / "hf_hk_novar") if "/build/" in f]
    assert hk_files == py_files and any("both-cpu-cuda" in f for f in py_files)
