"""hubkern download's hf download options against a loopback mirror (`hubkern serve`):
--include/--exclude, --local-dir and --dry-run, each compared with huggingface_hub 2.4's own
snapshot_download on the same mirror and patterns where hf has the option.

The patterns choose among the files of the chosen variants (here every variant: --all-variants),
matched as hf's filter_repo_objects matches repo paths; of a variant with any file chosen,
metadata.json and its .sigstore are always fetched and checked. So hubkern's selection must be
exactly hf's selection within build/<variant>/ plus those metadata files."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sigstore"))
from faultproxy import make_variant  # noqa: E402
from hk_serve_helpers import SOURCE_DIR, Server, hubkern_bin, hubkern_env, publish, python_clients_env  # noqa: E402

REPO = "hubkern/sel"
TVM = "tvm-ffi01-cpu-x86_64-linux"
TORCH = "torch29-cxx11-cpu-x86_64-linux"
FILES = {
    TVM: {"_ops.so": b"\x7fELF\0" + bytes(range(256)) * 40, "lib/a.txt": b"a\n", "lib/b.txt": b"bb\n",
          "README.md": b"# tvm\n", "data/x.bin": b"\0\1\2" * 700, "[odd]name.txt": b"odd\n",
          "\u00fcnicode-\u540d.txt": "u\n".encode()},
    TORCH: {"_ops.so": b"\x7fELF\0" + bytes(range(255, -1, -1)) * 30, "__init__.py": b"from ._ops import ops\n",
            "lib/a.txt": b"torch a\n"},
}
METADATA = ("metadata.json", "metadata.json.sigstore")


def hk(*args, env, check=True):
    p = subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, env=env)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dlsel")
    src = tmp / "src"
    for variant, files in FILES.items():
        make_variant(str(src), variant, files)
    # a file outside build/: hf's patterns see it, a kernel download never does
    (src / "README.md").write_bytes(b"# top\n")
    store = tmp / "store"
    commit = publish(src, REPO, "v1", store)
    srv = Server(store, "--trust", "hubkern", "--access-log", public_url=True)
    lock = tmp / "kernels.lock"
    hk("lock", f"{REPO}=1", "-o", lock, env=hubkern_env(srv.url, tmp / "lockcache"))
    yield dict(tmp=tmp, srv=srv, url=srv.url, lock=lock, commit=commit, src=src)
    srv.stop()


def hf_selection(url, tmp, include=None, exclude=None, local_dir=None):
    """huggingface_hub's snapshot_download(dry_run=True) on the mirror: {path: DryRunFileInfo fields}."""
    script = (
        "import json, sys, huggingface_hub as hf\n"
        "a = json.loads(sys.argv[1])\n"
        "r = hf.snapshot_download(a['repo'], repo_type='kernel', revision='v1', allow_patterns=a['inc'],\n"
        "                         ignore_patterns=a['exc'], local_dir=a['ld'], dry_run=True)\n"
        "print(json.dumps({x.filename: [x.file_size, x.is_cached, x.will_download] for x in r}))\n")
    arg = json.dumps(dict(repo=REPO, inc=include, exc=exclude, ld=str(local_dir) if local_dir else None))
    env = python_clients_env(HF_ENDPOINT=url, HF_HOME=str(tmp / "hf_home"))
    p = subprocess.run([sys.executable, "-c", script, arg], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def pattern_args(include, exclude):
    out = []
    for x in include or []:
        out += ["--include", x]
    for x in exclude or []:
        out += ["--exclude", x]
    return out


def hk_files(doc):
    return {f["path"]: f for k in doc["kernels"] for f in k["files"]}


# globs that probe fnmatch's corners: '*' across '/', '?', sets, negation, '^' as a literal, a
# reversed range, a trailing '/', an unclosed '[', non-ASCII names
PATTERNS = [
    (["*.so"], None),
    (["build/*/lib/"], None),
    (None, ["*.txt"]),
    (["*.txt"], ["*/lib/*"]),
    (["build/tvm*"], ["*.so", "*.bin"]),
    (["[!b]*", "build/*/[^_]*"], None),
    (["build/*/?ib/?.txt"], None),
    (["build/*/[a-c]*", "*/[z-a]*"], None),
    (["*[[]odd]*"], None),
    (["*[odd"], None),
    (["*\u00fcnicode*"], None),
    (["build/torch*/_ops.so"], None),
    (["*/__init__.py", "*/x.bin"], ["build/torch*"]),
]


@pytest.mark.parametrize("include,exclude", PATTERNS)
def test_selection_is_hfs(mirror, tmp_path, include, exclude):
    hf = hf_selection(mirror["url"], tmp_path, include, exclude)
    want = {p for p in hf if p.startswith("build/")}
    variants = {p.split("/")[1] for p in want}
    want |= {f"build/{v}/metadata.json" for v in variants}
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--json",
           *pattern_args(include, exclude), env=hubkern_env(mirror["url"], tmp_path / "c"), check=False)
    if not want:
        assert p.returncode == 1 and "HK_ERR_NOT_FOUND" in p.stdout, (p.stdout, p.stderr)
        return
    assert p.returncode == 0, p.stderr
    got = hk_files(json.loads(p.stdout))
    assert set(got) == want, (sorted(got), sorted(want))
    for path, f in got.items():  # the same sizes hf lists
        if path in hf:
            assert f["size"] == hf[path][0], path


def test_pattern_download_fetches_only_the_chosen_files_and_the_signed_metadata(mirror, tmp_path):
    cache = tmp_path / "c"
    env = hubkern_env(mirror["url"], cache)
    # the patterns even exclude metadata.json: it is fetched and checked all the same
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "*/lib/a.txt",
           "--exclude", "*metadata.json*", "--json", env=env)
    doc = json.loads(p.stdout)
    snap = pathlib.Path(cache) / "kernels--hubkern--sel" / "snapshots" / mirror["commit"]
    present = sorted(str(x.relative_to(snap)) for x in snap.rglob("*") if not x.is_dir())
    assert present == sorted([f"build/{TORCH}/lib/a.txt", f"build/{TORCH}/metadata.json",
                              f"build/{TVM}/lib/a.txt", f"build/{TVM}/metadata.json"]), present
    assert set(hk_files(doc)) == set(present)
    for rel in present:
        src = mirror["src"] / rel
        assert (snap / rel).read_bytes() == src.read_bytes(), rel
    # only those blobs crossed the wire: one GET per chosen file and metadata.json
    gets = [line for line in mirror["srv"].log_lines if "/resolve/" in line and "GET" in line]
    assert not any("_ops.so" in g or "x.bin" in g for g in gets), gets
    # a later download without patterns completes the variant in place
    hk("download", "--lock", mirror["lock"], "--backend", "cpu", "--all-variants", env=env)
    for v, files in FILES.items():
        for rel in files:
            assert (snap / "build" / v / rel).read_bytes() == files[rel], (v, rel)


def test_a_chosen_file_is_checked_against_the_digest(tmp_path):
    """A variant whose metadata.json digest is wrong for bad.txt: pulling only good.txt works, pulling
    bad.txt is HK_ERR_DIGEST and nothing of it is linked into the snapshot."""
    src = tmp_path / "src"

    def tamper(d):
        d["bad.txt"] = "AAAA" + d["bad.txt"][4:]

    make_variant(str(src), TVM, {"good.txt": b"good\n", "bad.txt": b"bad\n"}, tamper=tamper)
    store = tmp_path / "store"
    commit = publish(src, "hubkern/dg", "v1", store)
    with Server(store, "--trust", "hubkern") as srv:
        lock = tmp_path / "kernels.lock"
        hk("lock", "hubkern/dg=1", "-o", lock, env=hubkern_env(srv.url, tmp_path / "lc"))
        cache = tmp_path / "c"
        env = hubkern_env(srv.url, cache)
        hk("download", "--lock", lock, "--all-variants", "--include", "*/good.txt", env=env)
        p = hk("download", "--lock", lock, "--all-variants", "--include", "*/bad.txt", env=env, check=False)
        assert p.returncode == 1 and "[HK_ERR_DIGEST]" in p.stderr and "HashMismatch: bad.txt" in p.stderr, p.stderr
        snap = cache / "kernels--hubkern--dg" / "snapshots" / commit / "build" / TVM
        assert (snap / "good.txt").is_file() and not (snap / "bad.txt").exists()


def test_no_matching_file_is_an_error(mirror, tmp_path):
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "*.nothing", "--json",
           env=hubkern_env(mirror["url"], tmp_path / "c"), check=False)
    assert p.returncode == 1 and "matches the --include/--exclude patterns" in p.stderr, p.stderr
    assert json.loads(p.stdout)["error"]["code"] == "HK_ERR_NOT_FOUND", p.stdout
    assert not list((tmp_path / "c" / "kernels--hubkern--sel").glob("snapshots/*/*")), "something was published"


@pytest.mark.parametrize("opt", ["--include", "--exclude"])
def test_empty_pattern_is_a_usage_error(mirror, tmp_path, opt):
    p = hk("download", "--lock", mirror["lock"], opt, "", env=hubkern_env(mirror["url"], tmp_path / "c"), check=False)
    assert p.returncode == 2 and opt in p.stderr, p.stderr


# ---- --dry-run ------------------------------------------------------------------------------------

def tree_state(root):
    root = pathlib.Path(root)
    if not root.exists():
        return None
    return sorted((str(p.relative_to(root)), p.is_symlink() or p.is_file() and p.stat().st_size) for p in root.rglob("*"))


def test_dry_run_lists_sizes_and_cache_state_and_writes_nothing(mirror, tmp_path):
    cache = tmp_path / "c"
    env = hubkern_env(mirror["url"], cache)
    before_log = len(mirror["srv"].log_lines)
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--json", env=env)
    doc = json.loads(p.stdout)
    assert doc["dry_run"] is True and doc["local_dir"] is None
    files = hk_files(doc)
    want = {f"build/{v}/{rel}": len(data) for v, fs in FILES.items() for rel, data in fs.items()}
    for path, size in want.items():
        assert files[path]["size"] == size and files[path]["cached"] is False and files[path]["download"] is True
    assert doc["download_files"] == len(files)
    assert doc["download_bytes"] == sum(f["size"] for f in files.values())
    assert tree_state(cache) is None, tree_state(cache)  # not even the cache folder
    # the listing requests only: no file was asked for
    new = mirror["srv"].log_lines[before_log:]
    assert not any("/resolve/" in line for line in new), new
    # hf's dry run lists the same variant files with the same sizes
    hf = hf_selection(mirror["url"], tmp_path, None, None)
    assert {k: v[0] for k, v in hf.items() if k.startswith("build/")} == {k: f["size"] for k, f in files.items()}

    # after a real download of part of it, the dry run says which are cached; the text form too
    hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "*.so", env=env)
    state = tree_state(cache)
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--json", env=env)
    files = hk_files(json.loads(p.stdout))
    cached = {k for k, f in files.items() if f["cached"]}
    assert cached == {f"build/{v}/{m}" for v in FILES for m in ("_ops.so", "metadata.json")}, cached
    assert tree_state(cache) == state  # still nothing written (no receipt, no ref, no lock file)
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--include", "*.so", env=env)
    assert "[dry-run] will download 0 of 4 files" in p.stdout, p.stdout
    assert f"  cached" in p.stdout and f"build/{TVM}/_ops.so" in p.stdout, p.stdout

    # a damaged blob is not "cached": the dry run hashes what it would reuse
    blob = next((cache / "kernels--hubkern--sel" / "blobs").iterdir())
    data = bytearray(blob.read_bytes())
    data[0] ^= 1
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--json", "--include", "*.so", env=env)
    assert json.loads(p.stdout)["download_files"] == 1, p.stdout


# ---- --local-dir ----------------------------------------------------------------------------------

def inodes(d):
    d = pathlib.Path(d)
    return {str(p.relative_to(d)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in d.rglob("*")
            if p.is_file() and ".cache" not in p.parts}


def test_local_dir_real_files_reused_repaired_and_reused_by_hf(mirror, tmp_path):
    cache, ld = tmp_path / "c", tmp_path / "local"
    env = hubkern_env(mirror["url"], cache)
    args = ("download", "--lock", mirror["lock"], "--all-variants", "--include", "build/tvm*", "--exclude", "*.bin",
            "--local-dir", ld)
    p = hk(*args, env=env)
    chosen = {rel for rel in FILES[TVM] if not rel.endswith(".bin")} | {"metadata.json"}
    got = {str(p.relative_to(ld)) for p in ld.rglob("*") if p.is_file() and ".cache" not in p.parts}
    assert got == {f"build/{TVM}/{rel}" for rel in chosen}, got
    for rel in got:
        f = ld / rel
        assert not f.is_symlink() and f.read_bytes() == (mirror["src"] / rel).read_bytes(), rel
        meta = (ld / ".cache/huggingface/download" / (rel + ".metadata")).read_text().splitlines()
        data = f.read_bytes()
        etag = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert meta[0] == mirror["commit"] and meta[1] in (etag, hashlib.sha256(data).hexdigest()), (rel, meta)
    assert not list(ld.rglob("*.incomplete")), "a temp file was left in the local dir"
    assert f"{len(got)} files copied, 0 already there" in p.stderr, p.stderr

    # again: everything is there and correct, nothing is rewritten
    first = inodes(ld)
    p = hk(*args, env=env)
    assert f"0 files copied, {len(got)} already there" in p.stderr, p.stderr
    assert inodes(ld) == first

    # a damaged local file is replaced (only it); the others keep their inodes
    victim = ld / "build" / TVM / "_ops.so"
    raw = bytearray(victim.read_bytes())
    raw[10] ^= 0xFF
    victim.write_bytes(bytes(raw))
    p = hk(*args, env=env)
    assert f"1 file copied, {len(got) - 1} already there" in p.stderr, p.stderr
    assert victim.read_bytes() == FILES[TVM]["_ops.so"]
    after = inodes(ld)
    assert {k for k in after if after[k] != first[k]} == {f"build/{TVM}/_ops.so"}

    # our dry run and hf's agree that nothing is left to download into the local dir
    p = hk(*args, "--dry-run", "--json", env=env)
    files = hk_files(json.loads(p.stdout))
    assert all(f["in_local_dir"] for f in files.values()), files
    hf = hf_selection(mirror["url"], tmp_path, ["build/tvm*"], ["*.bin"], local_dir=ld)
    assert hf and all(is_cached and not will for _, is_cached, will in hf.values()), hf


def test_local_dir_hf_filled_is_reused(mirror, tmp_path):
    """The other way round: a folder `hf download --local-dir` filled is taken as it is (each file
    hashed and found equal), nothing copied again."""
    ld = tmp_path / "local"
    script = ("import sys, huggingface_hub as hf\n"
              "hf.snapshot_download(sys.argv[1], repo_type='kernel', revision='v1', allow_patterns=['build/tvm*'],\n"
              "                     local_dir=sys.argv[2])\n")
    env = python_clients_env(HF_ENDPOINT=mirror["url"], HF_HOME=str(tmp_path / "hf_home"))
    subprocess.run([sys.executable, "-c", script, REPO, str(ld)], check=True, env=env, capture_output=True)
    before = inodes(ld)
    assert len(before) == len(FILES[TVM]) + 1, before  # the variant's files and metadata.json
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "build/tvm*", "--local-dir", ld,
           env=hubkern_env(mirror["url"], tmp_path / "c"))
    assert f"0 files copied, {len(before)} already there" in p.stderr, p.stderr
    assert inodes(ld) == before


def test_local_dir_that_is_a_file_is_a_usage_error(mirror, tmp_path):
    (tmp_path / "afile").write_text("x")
    p = hk("download", "--lock", mirror["lock"], "--local-dir", tmp_path / "afile",
           env=hubkern_env(mirror["url"], tmp_path / "c"), check=False)
    assert p.returncode == 2 and "is not a directory" in p.stderr, p.stderr
    assert not (tmp_path / "c").exists()  # refused before anything was fetched


def test_local_dir_never_holds_a_partial_file(mirror, tmp_path):
    """A copy that cannot be completed (the destination is a folder) fails, leaving no temp file
    and nothing half-written under the local dir."""
    cache, ld = tmp_path / "c", tmp_path / "local"
    (ld / "build" / TVM / "_ops.so").mkdir(parents=True)  # in the way of the rename
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "*/_ops.so", "--local-dir", ld,
           env=hubkern_env(mirror["url"], cache), check=False)
    assert p.returncode == 1 and "cannot move the verified copy" in p.stderr, p.stderr
    assert not list(ld.rglob("*.incomplete")), list(ld.rglob("*"))
    assert (ld / "build" / TVM / "_ops.so").is_dir()


# ---- signatures cannot be skipped by a pattern -----------------------------------------------------

BUILD = pathlib.Path(os.environ.get("HK_BUILD_DIR", SOURCE_DIR / "build"))
SIGNED_SRC = BUILD / "kernels" / "rmsnorm" / "hub" / "build" / TVM


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    if not (SIGNED_SRC / "metadata.json").is_file():
        pytest.skip("no staged RMSNorm CPU variant (HK_BUILD_KERNELS=OFF)")
    from testsigstore import FakeSigstore
    from test_signature_pull import make_variant as signed_variant
    tmp = tmp_path_factory.mktemp("dlsig")
    ts = FakeSigstore()
    root = ts.write_trusted_root(str(tmp / "trusted_root.json"))
    store = tmp / "store"
    for case in ("good", "tampered"):  # tampered: signed, then edited (its digest still matches the files)
        publish(signed_variant(tmp, case, ts, case), f"kernels-community/dl-{case}", "v1", store)
    srv = Server(store, "--trust", "kernels-community")
    extra = dict(HUBKERN_SIGSTORE_TRUST_ROOT=root, XDG_CONFIG_HOME=tmp / "xdg")
    locks = {}
    for case in ("good", "tampered"):
        locks[case] = tmp / f"{case}.lock"
        hk("lock", f"kernels-community/dl-{case}=1", "-o", locks[case], env=hubkern_env(srv.url, tmp / "lc", **extra))
    yield dict(srv=srv, locks=locks, extra=extra, files=sorted(p.name for p in SIGNED_SRC.iterdir() if p.is_file()))
    srv.stop()


def test_signature_is_checked_whatever_the_patterns(signed, tmp_path):
    sofile = next(f for f in signed["files"] if f.endswith(".so"))
    cache = tmp_path / "c"
    env = hubkern_env(signed["srv"].url, cache, **signed["extra"])
    excl = ("--exclude", "*metadata.json*")
    p = hk("download", "--lock", signed["locks"]["tampered"], "--backend", "cpu", "--include", f"*/{sofile}", *excl,
           env=env, check=False)
    assert p.returncode == 1 and "[HK_ERR_SIGNATURE]" in p.stderr, p.stderr
    assert not list(cache.glob(f"kernels--*/snapshots/*/build/{TVM}/*")), "an unverified file was linked"
    p = hk("download", "--lock", signed["locks"]["good"], "--backend", "cpu", "--include", f"*/{sofile}", *excl,
           env=env)
    vdir = next(cache.glob(f"kernels--kernels-community--dl-good/snapshots/*/build/{TVM}"))
    assert sorted(x.name for x in vdir.iterdir()) == sorted([sofile, "metadata.json", "metadata.json.sigstore"])


def test_complete_cached_variant_dry_run_and_local_dir(mirror, tmp_path):
    """Variants complete in the cache (no listing needed): the dry run and --local-dir read each
    file's size and blob from the snapshot; everything is cached, and the copies are exact."""
    cache, ld = tmp_path / "c", tmp_path / "local"
    env = hubkern_env(mirror["url"], cache)
    hk("download", "--lock", mirror["lock"], "--all-variants", env=env)
    p = hk("download", "--lock", mirror["lock"], "--all-variants", "--dry-run", "--json", env=env)
    doc = json.loads(p.stdout)
    files = hk_files(doc)
    want = {f"build/{v}/{rel}": len(data) for v, fs in FILES.items() for rel, data in fs.items()}
    assert {k: f["size"] for k, f in files.items() if k in want} == want
    assert all(f["cached"] and not f["download"] for f in files.values()) and doc["download_files"] == 0, files
    hk("download", "--lock", mirror["lock"], "--all-variants", "--include", "*.so", "--local-dir", ld, env=env)
    for v, fs in FILES.items():
        assert (ld / "build" / v / "_ops.so").read_bytes() == fs["_ops.so"], v


def test_local_dir_interrupted_copy_leaves_nothing_partial(tmp_path):
    """Ctrl-C while a big file is being copied into the local dir: exit 130, the temp file removed,
    nothing at the file's place; the next run completes it."""
    import signal
    import time
    src = tmp_path / "src"
    big = os.urandom(1 << 20) * 200  # 200 MiB: the copy takes long enough to be caught in the act
    make_variant(str(src), TVM, {"big.so": big})
    store = tmp_path / "store"
    publish(src, "hubkern/big", "v1", store)
    with Server(store, "--trust", "hubkern") as srv:
        lock = tmp_path / "kernels.lock"
        hk("lock", "hubkern/big=1", "-o", lock, env=hubkern_env(srv.url, tmp_path / "lc"))
        env = hubkern_env(srv.url, tmp_path / "c")
        hk("download", "--lock", lock, "--all-variants", env=env)  # into the cache first
        ld = tmp_path / "local"
        proc = subprocess.Popen([hubkern_bin(), "download", "--lock", str(lock), "--all-variants", "--local-dir",
                                 str(ld)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not list(ld.glob(".cache/huggingface/download/**/*.incomplete")) and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.skip("the copy ended before it could be interrupted")
            time.sleep(0.001)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        if proc.returncode == 0:
            pytest.skip("the copy ended before the signal arrived")
        assert proc.returncode == 130, (proc.returncode, err)
        assert "interrupted" in err, err
        assert not list(ld.rglob("*.incomplete")), list(ld.rglob("*"))
        assert not (ld / "build" / TVM / "big.so").exists()
        hk("download", "--lock", lock, "--all-variants", "--local-dir", ld, env=env)
        assert (ld / "build" / TVM / "big.so").read_bytes() == big


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 200 MiB kernel (the copy into a local dir takes long enough to be caught in the act),
    downloaded into a cache once."""
    tmp = tmp_path_factory.mktemp("dlbig")
    data = os.urandom(1 << 20) * 200
    make_variant(str(tmp / "src"), TVM, {"big.so": data})
    publish(tmp / "src", "hubkern/big", "v1", tmp / "store")
    with Server(tmp / "store", "--trust", "hubkern") as srv:
        lock = tmp / "kernels.lock"
        hk("lock", "hubkern/big=1", "-o", lock, env=hubkern_env(srv.url, tmp / "lc"))
        env = hubkern_env(srv.url, tmp / "c")
        hk("download", "--lock", lock, "--all-variants", env=env)
        yield dict(lock=lock, env=env, data=data, blob=hashlib.sha256(data).hexdigest())


def test_local_dir_temp_of_a_killed_copy_is_removed_by_the_next_run(big, tmp_path):
    """kill -9 mid-copy leaves the temp file (nothing can remove it then); the next run into the
    same folder removes it (no live run holds its blob's lock) and puts the verified file."""
    import signal
    import time
    ld = tmp_path / "local"
    dl = ld / ".cache/huggingface/download"
    proc = subprocess.Popen([hubkern_bin(), "download", "--lock", str(big["lock"]), "--all-variants", "--local-dir",
                             str(ld)], env=big["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    pattern = big["blob"] + ".*.incomplete"  # the big file's (metadata.json's goes by in a moment)
    while not list(dl.glob(pattern)) and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip("the copy ended before it could be killed")
        time.sleep(0.001)
    proc.send_signal(signal.SIGSTOP)  # frozen mid-copy, then killed where it stands
    temps = list(dl.glob(pattern))
    proc.kill()
    proc.communicate(timeout=30)
    if proc.returncode != -signal.SIGKILL or not temps:
        pytest.skip("the copy ended before the kill")
    assert len(temps) == 1 and temps[0].stat().st_size < len(big["data"]), temps
    assert not (ld / "build" / TVM / "big.so").exists()
    p = hk("download", "--lock", big["lock"], "--all-variants", "--local-dir", ld, env=big["env"])
    assert "removed 1 temp file" in p.stderr, p.stderr
    assert not list(ld.rglob("*.incomplete")), list(dl.iterdir())
    assert hashlib.sha256((ld / "build" / TVM / "big.so").read_bytes()).hexdigest() == big["blob"]


def test_local_dir_never_removes_a_temp_a_live_run_holds(big, tmp_path):
    """The sweep takes each blob's lock without waiting: a temp file whose blob lock a live run
    holds stays, as do names that are not hubkern's (huggingface_hub's own temp files); once the
    holder is gone, the next run removes it."""
    import fcntl
    ld = tmp_path / "local"
    dl = ld / ".cache/huggingface/download"
    dl.mkdir(parents=True)
    held, dead = "a" * 64, "b" * 40
    (dl / f"{held}.0123abcd.incomplete").write_bytes(b"being written")
    (dl / f"{dead}.89abcdef.incomplete").write_bytes(b"left by a killed run")
    others = ["Zm9vYmFy.%s.incomplete" % ("c" * 64), "notes.incomplete", f"{held}.incomplete"]
    for name in others:
        (dl / name).write_bytes(b"not ours")
    with open(dl / f"{held}.lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        p = hk("download", "--lock", big["lock"], "--all-variants", "--local-dir", ld, env=big["env"])
        assert "removed 1 temp file" in p.stderr, p.stderr
        assert (dl / f"{held}.0123abcd.incomplete").read_bytes() == b"being written"
        assert not (dl / f"{dead}.89abcdef.incomplete").exists()
    hk("download", "--lock", big["lock"], "--all-variants", "--local-dir", ld, env=big["env"])
    assert not (dl / f"{held}.0123abcd.incomplete").exists()
    assert sorted(x.name for x in dl.glob("*.incomplete")) == sorted(others)
    assert hashlib.sha256((ld / "build" / TVM / "big.so").read_bytes()).hexdigest() == big["blob"]


def test_local_dir_concurrent_runs_both_succeed(big, tmp_path):
    """Two runs into one folder at once: the second waits on the blob's lock instead of removing
    the first one's temp file; both end with the verified file and no temp file left."""
    ld = tmp_path / "local"
    cmd = [hubkern_bin(), "download", "--lock", str(big["lock"]), "--all-variants", "--local-dir", str(ld)]
    procs = [subprocess.Popen(cmd, env=big["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert "removed" not in err, err
    assert not list(ld.rglob("*.incomplete")), list(ld.rglob("*"))
    assert hashlib.sha256((ld / "build" / TVM / "big.so").read_bytes()).hexdigest() == big["blob"]
