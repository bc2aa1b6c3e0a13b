"""`hubkern serve` + `hubkern publish` proven with the real huggingface_hub client (pinned in
scripts/requirements.txt): downloads, snapshots, refs, paged trees, repo info, file_exists, errors,
the cache's checksum verification, serving a cache Python filled, and an interrupted download.

The mirror becomes HF_ENDPOINT before huggingface_hub is imported (it reads the variable once)."""

import hashlib
import importlib
import os
import pathlib
import random
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import NO_TEST_HOOKS, Server, git_blob_sha1, lfs_pointer, publish, serve_has_test_hooks  # noqa: E402

REPO = "hubkern-test/rmsnorm"
LFS_THRESHOLD = 100_000  # small, so that tests use small LFS files
PAGE = 3  # tree page size: every listing below spans several pages


def make_tree(root: pathlib.Path, seed: int) -> dict:
    """A kernel-like repo: build/<variant>/ files, text and binary, LFS-sized, odd names."""
    rnd = random.Random(seed)
    files = {
        "README.md": b"# rmsnorm\nA test kernel.\n",
        "kernel-status.toml": b'kind = "redirect"\ndestination = "hubkern-test/other"\n',
        "build/torch-cpu/__init__.py": b"from ._ops import ops\n__all__ = ['rms_norm']\n",
        "build/torch-cpu/metadata.json": b'{"version": 1, "id": "_rmsnorm_cpu_abc"}\n',
        "build/torch-cpu/_rmsnorm_cpu_abc.abi3.so": b"\x7fELF" + rnd.randbytes(150_000),  # binary → LFS
        "build/tvm-ffi01-cpu-x86_64-linux/metadata.json": b'{"version": 1}\n',
        "build/tvm-ffi01-cpu-x86_64-linux/rmsnorm.so": b"\x7fELF\0" + rnd.randbytes(3000),  # small binary → LFS
        "build/tvm-ffi01-cpu-x86_64-linux/big-table.txt": ("x" * 99 + "\n").encode() * 1500,  # 150 kB text → LFS
        "docs/dir with space/a b+c.txt": b"spaces and plus\n",
        "docs/\u00fcnicode-\u540d.txt": "unicode name\n".encode(),
        "empty.txt": b"",
    }
    for i in range(12):
        files[f"data/part-{i:02d}.txt"] = f"part {i} {rnd.random()}\n".encode()
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    # things publish must skip
    (root / "build/torch-cpu/__pycache__").mkdir()
    (root / "build/torch-cpu/__pycache__/x.cpython-311.pyc").write_bytes(b"junk")
    (root / "build/torch-cpu/stale.pyc").write_bytes(b"junk")
    return files


def is_lfs(rel: str, data: bytes) -> bool:
    return b"\0" in data[:8000] or len(data) >= LFS_THRESHOLD


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    store = tmp / "store"
    src1, src2 = tmp / "src1", tmp / "src2"
    files1 = make_tree(src1, 1)
    files2 = make_tree(src2, 2)
    thr = ("--lfs-threshold", str(LFS_THRESHOLD))
    c1 = publish(src1, REPO, "v1", store, *thr)
    c2 = publish(src2, REPO, "v2", store, *thr, "-m", "v2 build")
    cmain = publish(src1, REPO, "main", store, *thr)
    cmodel = publish(src1, "hubkern-test/a-model", "main", store, "--repo-type", "model", *thr)
    cdata = publish(src2, "hubkern-test/a-dataset", "main", store, "--repo-type", "dataset", *thr)
    cspace = publish(src1, "hubkern-test/a-space", "main", store, "--repo-type", "space", *thr)
    # a PR ref, as the Hub names them (refs/pr/1), stored nested as huggingface_hub does
    pr = store / "kernels--hubkern-test--rmsnorm" / "refs" / "refs" / "pr"
    pr.mkdir(parents=True)
    (pr / "1").write_text(c2)
    srv = Server(store, "--page-size", PAGE, "--trust", "hubkern-test", "--lfs-threshold", LFS_THRESHOLD, "--access-log",
                 public_url=True)  # huggingface_hub follows only absolute next-page Links
    hf_home = tmp / "hf_home"
    os.environ.update(
        HF_ENDPOINT=srv.url,
        HF_HOME=str(hf_home),
        HF_HUB_CACHE=str(tmp / "hf_cache"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(k, None)
    hf = importlib.import_module("huggingface_hub")
    importlib.import_module("huggingface_hub.constants")
    importlib.import_module("huggingface_hub.hf_api")
    importlib.import_module("huggingface_hub.errors")
    assert hf.constants.ENDPOINT == srv.url
    yield dict(
        hf=hf, srv=srv, store=store, tmp=tmp, files1=files1, files2=files2, c1=c1, c2=c2, cmain=cmain,
        cmodel=cmodel, cdata=cdata, cspace=cspace, src1=src1,
    )
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])  # SIGTERM → clean exit


def test_hf_hub_download_every_file(env):
    hf, files = env["hf"], env["files1"]
    cache = env["tmp"] / "cache-dl"
    for rel, data in files.items():
        p = hf.hf_hub_download(REPO, rel, repo_type="kernel", revision="v1", cache_dir=cache)
        assert pathlib.Path(p).read_bytes() == data, rel
        # the blob is named by the etag the mirror announced
        blob = pathlib.Path(os.path.realpath(p)).name
        want = hashlib.sha256(data).hexdigest() if is_lfs(rel, data) else git_blob_sha1(data)
        assert blob == want, rel
    repo_dir = cache / "kernels--hubkern-test--rmsnorm"
    assert (repo_dir / "refs" / "v1").read_text() == env["c1"]
    assert sorted(p.name for p in (repo_dir / "snapshots").iterdir()) == [env["c1"]]


def test_download_by_commit_and_branch_move(env):
    hf = env["hf"]
    cache = env["tmp"] / "cache-commit"
    p1 = hf.hf_hub_download(REPO, "README.md", repo_type="kernel", revision=env["c1"], cache_dir=cache)
    p2 = hf.hf_hub_download(REPO, "data/part-00.txt", repo_type="kernel", revision=env["c2"], cache_dir=cache)
    assert pathlib.Path(p1).read_bytes() == env["files1"]["README.md"]
    assert pathlib.Path(p2).read_bytes() == env["files2"]["data/part-00.txt"]
    # URL-encoded PR revision (refs%2Fpr%2F1) resolves to its commit
    p3 = hf.hf_hub_download(REPO, "data/part-01.txt", repo_type="kernel", revision="refs/pr/1", cache_dir=cache)
    assert pathlib.Path(p3).read_bytes() == env["files2"]["data/part-01.txt"]
    assert env["c2"] in p3


def test_snapshot_download_kernel_allow_patterns(env):
    hf = env["hf"]
    cache = env["tmp"] / "cache-snap"
    d = pathlib.Path(
        hf.snapshot_download(
            REPO, repo_type="kernel", revision="v2", allow_patterns=["build/torch-cpu/*"], cache_dir=cache
        )
    )
    got = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())
    want = sorted(k for k in env["files2"] if k.startswith("build/torch-cpu/"))
    assert got == want
    for rel in want:
        assert (d / rel).read_bytes() == env["files2"][rel]
    assert d.name == env["c2"]


def test_snapshot_download_full_and_verify(env):
    hf = env["hf"]
    cache = env["tmp"] / "cache-full"
    d = pathlib.Path(hf.snapshot_download(REPO, repo_type="kernel", revision="v1", cache_dir=cache))
    got = {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}
    assert got == env["files1"]
    # huggingface_hub's own checksum verification (what `hf cache verify` runs) over the cache
    res = hf.HfApi().verify_repo_checksums(REPO, repo_type="kernel", revision=env["c1"], cache_dir=cache)
    assert res.checked_count == len(env["files1"])
    assert res.mismatches == [] and res.missing_paths == [] and res.extra_paths == []
    # huggingface_hub 2.4.0 cached the mirror's full listing as trees/<commit>.json (used offline)
    import json

    tree = json.loads((cache / "kernels--hubkern-test--rmsnorm" / "trees" / f"{env['c1']}.json").read_text())
    want = expected_entries(env["files1"])
    assert {p: (e["size"], e["blob_id"], e.get("lfs_sha256")) for p, e in tree["files"].items()} == want
    # and offline: every blob's content hashes to its name
    for blob in (cache / "kernels--hubkern-test--rmsnorm" / "blobs").iterdir():
        data = blob.read_bytes()
        name = blob.name
        assert name == (hashlib.sha256(data).hexdigest() if len(name) == 64 else git_blob_sha1(data))


def test_list_repo_refs(env):
    api = env["hf"].HfApi()
    refs = api.list_repo_refs(REPO, repo_type="kernel")
    branches = {b.name: b.target_commit for b in refs.branches}
    assert branches == {"v1": env["c1"], "v2": env["c2"], "main": env["cmain"]}
    refs = api.list_repo_refs(REPO, repo_type="kernel", include_pull_requests=True)
    assert [(p.name, p.ref, p.target_commit) for p in refs.pull_requests] == [("refs/pr/1", "refs/pr/1", env["c2"])]


def expected_entries(files):
    want = {}
    for rel, data in files.items():
        if is_lfs(rel, data):
            want[rel] = (len(data), git_blob_sha1(lfs_pointer(data)), hashlib.sha256(data).hexdigest())
        else:
            want[rel] = (len(data), git_blob_sha1(data), None)
    return want


def test_list_repo_tree_paged(env):
    hf = env["hf"]
    api = hf.HfApi()
    n_before = sum("/tree/" in line for line in env["srv"].log_lines)
    entries = list(api.list_repo_tree(REPO, repo_type="kernel", revision="v1", recursive=True))
    files = {e.path: e for e in entries if isinstance(e, hf.hf_api.RepoFile)}
    dirs = {e.path for e in entries if isinstance(e, hf.hf_api.RepoFolder)}
    want = expected_entries(env["files1"])
    assert set(files) == set(want)
    for rel, (size, oid, sha) in want.items():
        f = files[rel]
        assert (f.size, f.blob_id) == (size, oid), rel
        assert (f.lfs.sha256 if f.lfs else None) == sha, rel
        if f.lfs:
            assert f.lfs.size == size and f.lfs.pointer_size == len(lfs_pointer(env["files1"][rel]))
    assert dirs == {"build", "build/torch-cpu", "build/tvm-ffi01-cpu-x86_64-linux", "data", "docs", "docs/dir with space"}
    # the listing took several pages: the client followed Link rel="next" to the mirror itself
    # (a request's log line is written when its answer is done, and read by a thread: it may come
    # after the client has the answer, so the count is awaited, not read once)
    def pages():
        return sum("/tree/" in line for line in env["srv"].log_lines) - n_before
    end = time.time() + 5
    while pages() < len(entries) // PAGE and time.time() < end:
        time.sleep(0.05)
    assert pages() >= len(entries) // PAGE
    # non-recursive listing of a sub-directory
    sub = list(api.list_repo_tree(REPO, path_in_repo="build", repo_type="kernel", revision="v1"))
    assert sorted(e.path for e in sub) == ["build/torch-cpu", "build/tvm-ffi01-cpu-x86_64-linux"]
    assert all(isinstance(e, hf.hf_api.RepoFolder) for e in sub)


def test_tree_oids_are_git_oids(env, tmp_path):
    """The directory oids and the commit id are the ones git computes for the same content."""
    import shutil
    import subprocess

    if not shutil.which("git"):
        pytest.fail("git is needed to cross-check tree and commit ids")
    work = tmp_path / "g"
    for rel, data in env["files1"].items():
        p = work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(lfs_pointer(data) if is_lfs(rel, data) else data)
    genv = dict(os.environ, GIT_DIR=str(tmp_path / "git"), GIT_WORK_TREE=str(work))
    subprocess.run(["git", "init", "-q"], env=genv, check=True)
    subprocess.run(["git", "add", "-A"], env=genv, check=True, cwd=work)
    tree = subprocess.run(["git", "write-tree"], env=genv, check=True, capture_output=True, text=True).stdout.strip()
    sub = subprocess.run(
        ["git", "rev-parse", f"{tree}:build/torch-cpu"], env=genv, check=True, capture_output=True, text=True
    ).stdout.strip()
    api = env["hf"].HfApi()
    listed = {e.path: e for e in api.list_repo_tree(REPO, path_in_repo="build", repo_type="kernel", revision="v1")}
    assert listed["build/torch-cpu"].tree_id == sub
    ident = dict(
        GIT_AUTHOR_NAME="hubkern", GIT_AUTHOR_EMAIL="hubkern@localhost", GIT_AUTHOR_DATE="@0 +0000",
        GIT_COMMITTER_NAME="hubkern", GIT_COMMITTER_EMAIL="hubkern@localhost", GIT_COMMITTER_DATE="@0 +0000",
    )
    commit = subprocess.run(
        ["git", "commit-tree", tree, "-m", "Publish v1"], env=dict(genv, **ident), check=True, capture_output=True,
        text=True,
    ).stdout.strip()
    assert commit == env["c1"]


def test_repo_info_and_paths_info(env):
    hf = env["hf"]
    api = hf.HfApi()
    info = api.repo_info(REPO, repo_type="kernel", revision="v2")
    assert info.sha == env["c2"]
    # huggingface_hub keeps kernel siblings as plain dicts and asks no file metadata for kernels
    assert sorted(s["rfilename"] for s in info.siblings) == sorted(env["files2"])
    # with blobs=true (files_metadata) on the model copy of the v1 tree
    m = api.model_info("hubkern-test/a-model", files_metadata=True)
    assert m.sha == env["cmodel"]
    want = expected_entries(env["files1"])
    sib = {s.rfilename: s for s in m.siblings}
    assert set(sib) == set(want)
    for rel, (size, oid, sha) in want.items():
        assert (sib[rel].size, sib[rel].blob_id) == (size, oid), rel
        assert (sib[rel].lfs.sha256 if sib[rel].lfs else None) == sha, rel
        if sha:
            assert sib[rel].lfs.pointer_size == len(lfs_pointer(env["files1"][rel]))
    assert api.repo_info(REPO, repo_type="kernel").sha == env["cmain"]  # no revision: main
    ds = api.dataset_info("hubkern-test/a-dataset")
    assert ds.sha == env["cdata"]
    sp = api.space_info("hubkern-test/a-space")
    assert sp.sha == env["cspace"] and len(sp.siblings) == len(env["files1"])
    p = hf.hf_hub_download("hubkern-test/a-space", "README.md", repo_type="space", cache_dir=env["tmp"] / "cache-sp")
    assert pathlib.Path(p).read_bytes() == env["files1"]["README.md"]
    infos = api.get_paths_info(REPO, ["README.md", "build", "nope.txt", "build/torch-cpu/_rmsnorm_cpu_abc.abi3.so"],
                               repo_type="kernel", revision="v1")
    got = {i.path: type(i).__name__ for i in infos}
    assert got == {"README.md": "RepoFile", "build": "RepoFolder", "build/torch-cpu/_rmsnorm_cpu_abc.abi3.so": "RepoFile"}


def test_file_exists_and_other_types(env):
    hf = env["hf"]
    api = hf.HfApi()
    assert api.file_exists(REPO, "build/torch-cpu/metadata.json", repo_type="kernel", revision="v1")
    assert not api.file_exists(REPO, "build/torch-cpu/nope.json", repo_type="kernel", revision="v1")
    assert api.file_exists("hubkern-test/a-model", "README.md")
    assert api.file_exists("hubkern-test/a-dataset", "data/part-03.txt", repo_type="dataset")
    p = hf.hf_hub_download("hubkern-test/a-dataset", "data/part-03.txt", repo_type="dataset",
                           cache_dir=env["tmp"] / "cache-ds")
    assert pathlib.Path(p).read_bytes() == env["files2"]["data/part-03.txt"]
    # kernel-status.toml is served like any file
    p = hf.hf_hub_download(REPO, "kernel-status.toml", repo_type="kernel", revision="main",
                           cache_dir=env["tmp"] / "cache-ks")
    assert pathlib.Path(p).read_bytes() == env["files1"]["kernel-status.toml"]


def test_errors_seen_by_python(env):
    hf = env["hf"]
    errors = hf.errors
    cache = env["tmp"] / "cache-err"
    with pytest.raises(errors.RepositoryNotFoundError):
        hf.hf_hub_download("hubkern-test/missing", "README.md", repo_type="kernel", cache_dir=cache)
    with pytest.raises(errors.RepositoryNotFoundError):
        hf.HfApi().list_repo_refs("hubkern-test/missing", repo_type="kernel")
    # the kernel repo does not exist as a model repo
    with pytest.raises(errors.RepositoryNotFoundError):
        hf.HfApi().model_info(REPO)
    with pytest.raises(errors.RevisionNotFoundError):
        hf.hf_hub_download(REPO, "README.md", repo_type="kernel", revision="v9", cache_dir=cache)
    with pytest.raises(errors.RevisionNotFoundError):
        hf.HfApi().repo_info(REPO, repo_type="kernel", revision="nope")
    with pytest.raises(errors.RevisionNotFoundError):
        list(hf.HfApi().list_repo_tree(REPO, repo_type="kernel", revision="nope"))
    with pytest.raises(errors.RemoteEntryNotFoundError):
        hf.hf_hub_download(REPO, "build/nope.so", repo_type="kernel", revision="v1", cache_dir=cache)
    # EntryNotFound carried X-Repo-Commit: the client recorded the absence at that commit
    repo_dir = cache / "kernels--hubkern-test--rmsnorm"
    assert (repo_dir / ".no_exist" / env["c1"] / "build" / "nope.so").exists()
    assert (repo_dir / "refs" / "v1").read_text() == env["c1"]
    with pytest.raises(errors.RemoteEntryNotFoundError):
        list(hf.HfApi().list_repo_tree(REPO, path_in_repo="nope", repo_type="kernel", revision="v1"))


def test_serves_a_cache_python_filled(env, tmp_path):
    """A second mirror over the cache huggingface_hub wrote (blobs named by git sha1 / sha256) serves
    the same bytes, oids and LFS metadata."""
    hf = env["hf"]
    pycache = env["tmp"] / "cache-py-store"
    hf.snapshot_download(REPO, repo_type="kernel", revision="v1", cache_dir=pycache)
    with Server(pycache, "--page-size", 5, public_url=True) as srv2:
        api = hf.HfApi(endpoint=srv2.url)
        assert {b.name: b.target_commit for b in api.list_repo_refs(REPO, repo_type="kernel").branches} == {
            "v1": env["c1"]
        }
        a = {(e.path, getattr(e, "blob_id", None) or e.tree_id, getattr(e, "size", None),
              getattr(getattr(e, "lfs", None), "sha256", None))
             for e in api.list_repo_tree(REPO, repo_type="kernel", revision="v1", recursive=True)}
        b = {(e.path, getattr(e, "blob_id", None) or e.tree_id, getattr(e, "size", None),
              getattr(getattr(e, "lfs", None), "sha256", None))
             for e in env["hf"].HfApi().list_repo_tree(REPO, repo_type="kernel", revision="v1", recursive=True)}
        assert a == b
        d = pathlib.Path(hf.snapshot_download(REPO, repo_type="kernel", revision="v1", cache_dir=tmp_path / "c",
                                              endpoint=srv2.url))
        assert {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()} == env["files1"]


def test_interrupted_download_resumes(env, tmp_path):
    """The mirror cuts the first body after 11 MiB; huggingface_hub (which hands data over in 10 MiB
    chunks) keeps the first 10 MiB and resumes with a Range request that the mirror answers 206."""
    if not serve_has_test_hooks():
        pytest.skip(NO_TEST_HOOKS)
    hf = env["hf"]
    src = tmp_path / "src"
    src.mkdir()
    data = random.Random(7).randbytes(12 * 1024 * 1024)
    (src / "weights.bin").write_bytes(data)
    publish(src, "hubkern-test/big", "main", env["store"])
    cut = 11 * 1024 * 1024
    with Server(env["store"], "--fault-cut-after", cut, "--fault-cut-count", 1, "--access-log") as srv2:
        p = hf.hf_hub_download("hubkern-test/big", "weights.bin", repo_type="kernel", cache_dir=tmp_path / "c",
                               endpoint=srv2.url)
        assert pathlib.Path(p).read_bytes() == data
        assert srv2.wait_log("fault injection")
        assert srv2.wait_log(" 206 "), "\n".join(srv2.log_lines)
        gets = [line for line in srv2.log_lines if "access" in line and '"GET ' in line]
        assert len(gets) == 2 and "(aborted)" in gets[0] and " 206 2097152 " in gets[1], gets
