"""LOCAL_KERNELS and local kernels' own dependencies: kernels 0.17.2 (the real package) and hubkern
against the same `hubkern serve` mirror (issue 26). kernels' get_kernel / get_local_kernel consult
LOCAL_KERNELS for every node of a tree (its RepoPathsResolver comes before the Hub's), resolve a
local kernel's kernel-depends, parse the variable as `:`-separated `repo=path` entries split at the
first `=` (the last entry of a repo wins, an entry without `=` is an error, also an empty value),
and validate the whole tree (kernels-minver) before anything is installed. Each case runs through
both; the loaded set (repo or path, variant directory) and the files downloaded must match."""

import json
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import Server, hubkern_bin, publish  # noqa: E402
from test_parity_deps import cache_files, clean_env  # noqa: E402

ORG = "hubkern-lk"
R = lambda n: f"{ORG}/{n}"  # noqa: E731


def meta(name, deps=(), **extra):
    d = {"name": name, "id": f"_{name.replace('-', '_')}_cpu_abc1234", "version": 1, "license": "MIT",
         "python-depends": [], "backend": {"type": "cpu"},
         "kernel-depends": [{"repo-id": r, "version": 1} for r in deps]}
    d.update(extra)
    return json.dumps(d).encode()


def variant(root, name, deps=(), **extra):
    v = root / "torch-cpu"
    v.mkdir(parents=True, exist_ok=True)
    (v / "metadata.json").write_bytes(meta(name, deps, **extra))
    (v / "__init__.py").write_bytes(b"NAME = %r\n" % name.encode())
    return v


def hub_kernel(tmp, store, repo, deps=(), **extra):
    src = tmp / f"src-{repo.replace('/', '-')}"
    variant(src / "build", repo.split("/")[1], deps, **extra)
    return publish(src, repo, "v1", store)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    store = tmp / "store"
    hub_kernel(tmp, store, R("leaf"))
    hub_kernel(tmp, store, R("extra"))
    hub_kernel(tmp, store, R("mid"), [R("leaf")])
    hub_kernel(tmp, store, R("root"), [R("mid"), R("leaf")])
    hub_kernel(tmp, store, R("on-ext"), ["elsewhere/ext"])  # untrusted on the Hub, local below
    loc = tmp / "local"
    # a checkout (build/) of mid whose local copy declares one more dependency than the Hub's
    variant(loc / "mid" / "build", "mid", [R("leaf"), R("extra")])
    variant(loc / "flat", "mid", [R("extra")])          # a directory of variants
    vdir = variant(loc / "one", "mid", [])                # one variant directory itself
    variant(loc / "eq=dir" / "build", "leaf")             # a path holding '='
    variant(loc / "cyc" / "build", "mid", [R("root")])    # back to the root: a cycle
    variant(loc / "newer" / "build", "mid", [R("leaf")], **{"kernels-minver": "0.99.0"})
    variant(loc / "ext" / "build", "ext")
    (loc / "novar" / "build" / "docs").mkdir(parents=True)  # no variant at all
    srv = Server(store, "--trust", ORG)
    yield dict(srv=srv, tmp=tmp, loc=loc, one=vdir)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


PY_LOAD = r"""
import json, sys, pathlib
from kernels import get_kernel, get_local_kernel, get_loaded_kernels
try:
    if sys.argv[1] == "--local":
        get_local_kernel(pathlib.Path(sys.argv[2]), backend="cpu")
    else:
        get_kernel(sys.argv[1], version=1, backend="cpu")
    print(json.dumps({"loaded": sorted(str(k.metadata.name) + " " + str(k.module.__file__) for k in get_loaded_kernels())}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
"""


def run_both(e, case, target, local_kernels=None):
    extra = {} if local_kernels is None else {"LOCAL_KERNELS": local_kernels}
    py_home, hk_home = e["tmp"] / f"py-{case}", e["tmp"] / f"hk-{case}"
    p = subprocess.run([sys.executable, "-c", PY_LOAD, *target], capture_output=True, text=True, timeout=120,
                       env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(py_home), **extra))
    assert p.returncode == 0, p.stderr
    want = json.loads(p.stdout.strip().splitlines()[-1])
    args = ["load", *target] + ([] if target[0] == "--local" else ["--version", "1"])
    q = subprocess.run([hubkern_bin(), *args, "--backend", "cpu", "--json"], capture_output=True, text=True,
                       timeout=120, env=clean_env(HF_ENDPOINT=e["srv"].url, HF_HOME=str(hk_home), **extra))
    got = json.loads(q.stdout) if q.stdout.strip() else {}
    return want, got, q, cache_files(py_home), cache_files(hk_home)


def hk_loaded(got):
    """(name, variant dir) of the root and every kernel below it, as kernels' get_loaded_kernels."""
    out = []

    def walk(k):
        meta_path = pathlib.Path(k["path"]) / "metadata.json"
        out.append(f'{json.loads(meta_path.read_text())["name"]} {k["path"]}/__init__.py')
        for d in k.get("dependencies", []):
            walk(d)
    walk(got)
    return sorted(set(out))


def py_loaded(want, e, case):
    # kernels' paths are under its own cache; compare them with the cache part made neutral
    return sorted(x.replace(str(e["tmp"] / f"py-{case}"), str(e["tmp"] / f"hk-{case}")) for x in want["loaded"])


# case -> (target, LOCAL_KERNELS template (LOC: the local directory), expected: "ok" or error words)
CASES = {
    "dep-local": ([R("root")], f"{R('mid')}=LOC/mid", "ok"),
    "dep-local-flat": ([R("root")], f"{R('mid')}=LOC/flat", "ok"),
    "dep-local-variant-dir": ([R("root")], f"{R('mid')}=LOC/one/torch-cpu", "ok"),
    "two-local": ([R("root")], f"{R('mid')}=LOC/mid:{R('leaf')}=LOC/eq=dir", "ok"),
    "last-entry-wins": ([R("root")], f"{R('mid')}=LOC/novar:{R('mid')}=LOC/mid", "ok"),
    "first-entry-lost": ([R("root")], f"{R('mid')}=LOC/mid:{R('mid')}=LOC/novar", "variant"),
    "root-local-deps": ([R("mid")], f"{R('mid')}=LOC/mid", "ok"),
    "local-skips-trust": ([R("on-ext")], "elsewhere/ext=LOC/ext", "ok"),
    "untrusted-without": ([R("on-ext")], None, "trust"),
    "local-cycle": ([R("root")], f"{R('mid')}=LOC/cyc", "cycl"),
    "local-minver": ([R("root")], f"{R('mid')}=LOC/newer", "kernels>=0.99.0"),
    "empty-entry": ([R("root")], f"{R('mid')}=LOC/mid:", "LOCAL_KERNELS"),
    "no-equals": ([R("root")], "nonsense", "LOCAL_KERNELS"),
    "empty-value": ([R("root")], "", "LOCAL_KERNELS"),
    "get-local": (["--local", "LOC/mid"], None, "ok"),
    "get-local-flat": (["--local", "LOC/flat"], f"{R('extra')}=LOC/eq=dir", "ok"),
    "get-local-minver": (["--local", "LOC/newer"], None, "kernels>=0.99.0"),
    "get-local-bad-spec": (["--local", "LOC/one/torch-cpu/"], "nonsense", "LOCAL_KERNELS"),
    "get-local-variant-dir": (["--local", "LOC/one/torch-cpu/"], None, "ok"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_local_kernels_like_kernels(env, case):
    target, spec, expect = CASES[case]
    loc = str(env["loc"])
    target = [t.replace("LOC", loc) for t in target]
    want, got, q, py_files, hk_files = run_both(env, case, target, None if spec is None else spec.replace("LOC", loc))
    if expect == "ok":
        assert "loaded" in want, want
        assert q.returncode == 0, q.stderr
        assert hk_loaded(got) == py_loaded(want, env, case)
    else:
        assert expect.lower() in want.get("error", "").lower(), want
        assert q.returncode != 0 and expect.lower() in q.stderr.lower(), q.stderr
    # the same files downloaded (nothing of a local node, nothing at all when the tree is refused)
    assert hk_files == py_files


def test_a_local_kernels_dependencies_are_reported(env):
    # the regression of issue 26: `load --local` listed no dependencies
    _, got, q, _, _ = run_both(env, "report", ["--local", str(env["loc"] / "mid")])
    assert q.returncode == 0, q.stderr
    assert sorted(d["repo_id"] for d in got["dependencies"]) == [R("extra"), R("leaf")]
