"""hubkern pull / versions / info against a real `hubkern serve` on loopback, and cache interop both
ways with the real Python huggingface_hub and kernels packages."""
import json
import os
import re
import subprocess

import pytest

from faultproxy import FaultProxy, Server, make_variant, publish, run_cli

V = "tvm-ffi01-cpu-x86_64-linux"
SO = f"build/{V}/_testkern.so"
BIG = os.urandom(3_000_000)  # above the 1 MB LFS threshold used below: a sha256 etag


def run(args, env=None, check=True, **kw):
    return run_cli(args, env=env, check=check, base_env={"HUBKERN_RETRY_BASE_MS": "20"}, **kw)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    store = str(base / "store")
    src1 = str(base / "src1")
    make_variant(src1, V, {"__init__.py": b"from ._ops import *\n", "_ops.py": b"ops = 1\n", "_testkern.so": BIG,
                           "layers/__init__.py": b"# layers\n", "__pycache__/_ops.cpython-311.pyc": b"bytecode"})
    make_variant(src1, "torch-cpu", {"__init__.py": b"x = 1\n"})
    make_variant(src1, "tvm-ffi01-cu130-x86_64-linux", {"__init__.py": b"y = 1\n", "_testkern.so": b"cuda" * 1000},
                 backend="cuda")
    publish(src1, "org/testkern", "v1", store, ["--lfs-threshold", "1000000"])
    src2 = str(base / "src2")
    make_variant(src2, V, {"__init__.py": b"v2 = True\n"}, version=2)
    publish(src2, "org/testkern", "v2", store, ["--lfs-threshold", "1000000"])
    # an untrusted publisher, and a repo whose v1 redirects to org/testkern@v1
    publish(src2, "stranger/kern", "v1", store)
    src3 = str(base / "src3")
    os.makedirs(src3)
    with open(os.path.join(src3, "kernel-status.toml"), "w") as fh:
        fh.write('kind = "redirect"\ndestination = "org/testkern"\nrevision = "v1"\n')
    publish(src3, "org/oldkern", "v1", store)
    with Server(store, ["--trust", "org"]) as srv:
        yield srv


def commit_of(cache, branch="v1", repo="kernels--org--testkern"):
    with open(os.path.join(cache, repo, "refs", branch)) as fh:
        return fh.read()


def test_pull_layout_and_python_reads_it_offline(hub, tmp_path):
    cache = str(tmp_path / "cache")
    with FaultProxy(hub.url) as px:
        r = run(["pull", "org/testkern", "--version", "1", "--variant", V, "--json", "--endpoint", px.url,
                 "--cache", cache])
        out = json.loads(r.stdout)
        gets = px.requests("GET", "/resolve/.*/build/")
        # the commit's listing shows no kernel-status.toml: not asked for (absence kept in .no_exist/)
        assert len(px.requests("GET", "/resolve/.*/kernel-status.toml")) == 0
        assert len(px.requests("GET", "/tree/")) == 1
    files = sorted(out["files"])
    assert files == sorted([f"build/{V}/__init__.py", SO, f"build/{V}/_ops.py", f"build/{V}/layers/__init__.py",
                            f"build/{V}/metadata.json"])  # no __pycache__ / *.pyc
    assert out["files_downloaded"] == 5 and out["bytes_verified"] == out["bytes_downloaded"] > 3_000_000
    # byte-compatible layout: ref without newline, relative links, blob names = etags
    ref = commit_of(cache)
    assert re.fullmatch(r"[0-9a-f]{40}", ref) and out["commit"] == ref
    assert os.path.isfile(os.path.join(cache, "kernels--org--testkern", ".no_exist", ref, "kernel-status.toml"))
    snap = os.path.join(cache, "kernels--org--testkern", "snapshots", ref)
    assert out["variants"][0]["path"] == os.path.join(snap, "build", V)
    link = os.readlink(os.path.join(snap, SO))
    import hashlib
    assert link == "../../../../blobs/" + hashlib.sha256(BIG).hexdigest()
    assert os.readlink(os.path.join(snap, "build", V, "layers/__init__.py")).startswith("../../../../../blobs/")
    with open(os.path.join(cache, "CACHEDIR.TAG")) as fh:
        assert fh.readline() == "Signature: 8a477f597d28d172789f06886806bc55\n"
    assert os.path.isdir(os.path.join(cache, ".locks", "kernels--org--testkern"))
    assert not any(n.endswith(".incomplete") for n in os.listdir(os.path.join(cache, "kernels--org--testkern", "blobs")))
    # one GET per file (the tree listing told sizes and hashes: no HEAD round trips)
    assert len(gets) == 5 and all("/resolve/" + ref + "/" in g["path"] for g in gets)

    # Python huggingface_hub reads hubkern's cache offline
    from huggingface_hub import hf_hub_download, snapshot_download
    p = hf_hub_download("org/testkern", SO, repo_type="kernel", revision="v1", cache_dir=cache, local_files_only=True)
    assert p == os.path.join(snap, SO)
    with open(p, "rb") as fh:
        assert fh.read() == BIG
    s = snapshot_download("org/testkern", repo_type="kernel", revision="v1", cache_dir=cache, local_files_only=True,
                          allow_patterns=[f"build/{V}/*"])
    assert s == snap
    # ... and the kernels package resolves version 1 offline from hubkern's refs/v1 (no torch needed)
    code = ("import kernels,sys;"
            "print(kernels.install_kernel('org/testkern', version=1, backend='cpu', local_files_only=True))")
    env = dict(os.environ, KERNELS_CACHE=cache, HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    py = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert py.returncode == 0, py.stderr
    assert py.stdout.strip().splitlines()[-1] == os.path.join(snap, "build", V)

    # warm: nothing is fetched again
    with FaultProxy(hub.url) as px:
        r = run(["pull", "org/testkern", "--version", "1", "--variant", V, "--json", "--endpoint", px.url,
                 "--cache", cache])
        assert json.loads(r.stdout)["files_downloaded"] == 0
        assert px.requests("GET", "/resolve/" + ref + "/build") == []
        assert px.requests("GET", "/tree/") == []  # the complete, digest-checked variant needs no listing
    v = run(["cache", "verify", "--cache", cache])
    assert "clean" in v.stdout and "NOT CLEAN" not in v.stdout


def test_offline_never_touches_the_network(hub, tmp_path):
    cache = str(tmp_path / "cache")
    run(["pull", "org/testkern", "--version", "1", "--variant", V, "--endpoint", hub.url, "--cache", cache])
    # a dead endpoint: offline must not even try it
    for args, env in ((["--offline"], {}), ([], {"HF_HUB_OFFLINE": "1"})):
        r = run(["pull", "org/testkern", "--version", "1", "--variant", V, "--json", "--endpoint",
                 "http://127.0.0.1:9", "--cache", cache, *args], env=env)
        assert json.loads(r.stdout)["offline"] is True
    r = run(["pull", "org/testkern", "--version", "2", "--endpoint", "http://127.0.0.1:9", "--cache", cache,
             "--offline"], check=False)
    assert r.returncode == 1 and "HK_ERR_OFFLINE" in r.stderr and "refs/v2" in r.stderr
    r = run(["pull", "org/testkern", "--version", "1", "--variant", "torch-cpu", "--cache", cache, "--offline"],
            check=False)
    assert r.returncode == 1 and "HK_ERR_NO_VARIANT" in r.stderr
    r = run(["versions", "org/testkern", "--offline", "--cache", cache])
    assert re.search(r"^v1 +[0-9a-f]{40}", r.stdout, re.M) and "v2" not in r.stdout


def test_python_pulled_then_hubkern_offline(hub, tmp_path):
    cache = str(tmp_path / "pycache")
    env = dict(os.environ, HF_ENDPOINT=hub.url)
    # (with HF_HUB_DISABLE_TELEMETRY=1, kernels 0.17.2 + huggingface_hub 2.4.0 send a User-Agent with a
    # trailing "; " that httpx rejects: LocalProtocolError. So telemetry stays on here.)
    for k in ("HF_HUB_OFFLINE", "HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK"):
        env.pop(k, None)
    code = ("from huggingface_hub import snapshot_download as s;"
            f"print(s('org/testkern', repo_type='kernel', revision='v1', cache_dir={cache!r},"
            f" allow_patterns=['build/{V}/*'], ignore_patterns=['*.pyc', '**/__pycache__/**']))")
    py = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert py.returncode == 0, py.stderr
    r = run(["pull", "org/testkern", "--version", "1", "--variant", V, "--json", "--offline", "--cache", cache])
    out = json.loads(r.stdout)
    assert out["offline"] and out["variants"][0]["name"] == V and out["bytes_verified"] > 3_000_000
    assert out["snapshot"] == py.stdout.strip()
    v = run(["cache", "verify", "--cache", cache])
    assert "clean" in v.stdout
    # what the kernels package pulled online (by commit: it never writes refs/v1) resolves offline
    # in hubkern by commit; by version it fails the same way upstream's offline load does.
    kcache = str(tmp_path / "kcache")
    code = ("import kernels;print(kernels.install_kernel('org/testkern', version=1, backend='cpu',"
            " trust_remote_code=True))")
    py = subprocess.run(["python3", "-c", code], capture_output=True, text=True,
                        env=dict(env, KERNELS_CACHE=kcache), cwd=str(tmp_path))
    assert py.returncode == 0, py.stderr
    path = py.stdout.strip().splitlines()[-1]
    commit = path.split("/snapshots/")[1].split("/")[0]
    assert not os.path.exists(os.path.join(kcache, "kernels--org--testkern", "refs", "v1"))
    variant = path.rstrip("/").split("/")[-1]  # kernels' own choice (torch-cpu without torch installed)
    r = run(["pull", "org/testkern", "--revision", commit, "--variant", variant, "--json", "--offline", "--cache",
             kcache])
    assert json.loads(r.stdout)["variants"][0]["path"] == path
    r = run(["pull", "org/testkern", "--version", "1", "--offline", "--cache", kcache], check=False)
    assert r.returncode == 1 and "refs/v1" in r.stderr


def test_versions_info_warning_and_auto_variant(hub, tmp_path):
    cache = str(tmp_path / "cache")
    r = run(["versions", "org/testkern", "--json", "--endpoint", hub.url, "--cache", cache])
    vs = json.loads(r.stdout)["versions"]
    assert [v["version"] for v in vs] == [1, 2] and vs[1]["latest"] and not vs[0]["cached"]
    r = run(["pull", "org/testkern", "--version", "1", "--backend", "cpu", "--json", "--endpoint", hub.url,
             "--cache", cache])
    assert "version 2 is available" in r.stderr
    assert json.loads(r.stdout)["variants"][0]["name"] in (V, "torch-cpu")
    r = run(["versions", "org/testkern", "--json", "--endpoint", hub.url, "--cache", cache])
    assert json.loads(r.stdout)["versions"][0]["cached"] is True
    r = run(["info", "org/testkern", "--json", "--endpoint", hub.url, "--cache", cache])
    info = json.loads(r.stdout)
    assert info["trusted_publisher"] is True and info["version"] == 2 and info["variants"] == [V]
    r = run(["pull", "org/testkern", "--version", "7", "--endpoint", hub.url, "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_VERSION_NOT_FOUND" in r.stderr and "available versions: 1, 2" in r.stderr
    r = run(["pull", "org/nothere", "--version", "1", "--endpoint", hub.url, "--cache", cache], check=False)
    assert r.returncode == 1 and "HK_ERR_REPO_NOT_FOUND" in r.stderr
    r = run(["pull", "org/testkern", "--revision", "no-such-branch", "--endpoint", hub.url, "--cache", cache],
            check=False)
    assert r.returncode == 1 and "HK_ERR_REVISION_NOT_FOUND" in r.stderr
    # --all-variants pulls every build
    r = run(["pull", "org/testkern", "--version", "1", "--all-variants", "--json", "--endpoint", hub.url,
             "--cache", cache])
    assert len(json.loads(r.stdout)["variants"]) == 3


def test_trust_check_and_opt_out(hub, tmp_path):
    cache = str(tmp_path / "cache")
    r = run(["pull", "stranger/kern", "--version", "1", "--variant", V, "--endpoint", hub.url, "--cache", cache],
            check=False)
    assert r.returncode == 1 and "HK_ERR_UNTRUSTED" in r.stderr and "--trust-remote-code" in r.stderr
    assert not os.path.exists(os.path.join(cache, "kernels--stranger--kern", "blobs"))
    run(["pull", "stranger/kern", "--version", "1", "--variant", V, "--trust-remote-code", "--endpoint", hub.url,
         "--cache", cache])


def test_kernel_status_redirect(hub, tmp_path):
    cache = str(tmp_path / "cache")
    r = run(["pull", "org/oldkern", "--version", "1", "--variant", V, "--json", "--endpoint", hub.url,
             "--cache", cache])
    out = json.loads(r.stdout)
    assert "redirected to 'org/testkern'" in r.stderr
    assert out["repo_id"] == "org/testkern" and out["revision"] == "v1"
    assert out["commit"] == commit_of(cache)


def test_pull_json_lists_odd_file_names_escaped_in_place(tmp_path):
    """pull --json's "files": every name the Hub can hold (non-ASCII, quotes, spaces, '#', '%'), escaped
    so that the document parses to the names, in its place between "variants" and "files_downloaded"."""
    # (control characters and backslashes are refused where names enter: publish says so)
    names = ["__init__.py", "data/caf\u00e9 \u2603.txt", "data/it's #1 50%.txt", "data/a \"quoted\" name.txt"]
    src, store = str(tmp_path / "src"), str(tmp_path / "store")
    make_variant(src, V, {n: n.encode() for n in names})
    publish(src, "org/oddnames", "v1", store)
    with Server(store, ["--trust", "org"]) as srv:
        r = run(["pull", "org/oddnames", "--version", "1", "--variant", V, "--json", "-q", "--endpoint", srv.url,
                 "--cache", str(tmp_path / "cache")], check=False)
    if r.returncode != 0:  # a name the server or client refuses is not what this test is about
        pytest.fail(f"pull failed: {r.stdout}\n{r.stderr}")
    doc = json.loads(r.stdout)
    listed = {f.split(f"build/{V}/", 1)[-1] for f in doc["files"]}
    assert set(names) <= listed, listed
    keys = list(doc)
    assert keys.index("files") == keys.index("variants") + 1 and keys[keys.index("files") + 1] == "files_downloaded"
    assert r.stdout.count('"files":') == 1
