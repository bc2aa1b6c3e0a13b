"""hubkern pull --include/--exclude against a loopback mirror (`hubkern serve`): the same selection
as `hubkern download` (one code path: hk_pull_spec include/exclude), metadata.json always coming
along, a later pull without patterns completing the variant, and offline pulls with patterns that
choose among the files the cached metadata.json lists (as huggingface_hub 2.4's snapshot_download
checks the chosen files against its cached tree listing)."""
import json
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from faultproxy import make_variant  # noqa: E402
from hk_serve_helpers import Server, hubkern_bin, hubkern_env, publish  # noqa: E402

REPO = "hubkern/psel"
TVM = "tvm-ffi01-cpu-x86_64-linux"
FILES = {"_ops.so": b"\x7fELF\0" + bytes(range(256)) * 40, "lib/a.txt": b"a\n", "lib/b.txt": b"bb\n",
         "data/x.bin": b"\0\1\2" * 700}


def pull(*args, env, check=True):
    p = subprocess.run([hubkern_bin(), "pull", REPO, "--version", "1", "--variant", TVM, "--json",
                        *map(str, args)], capture_output=True, text=True, env=env)
    if check:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def on_disk(cache):
    snaps = list(pathlib.Path(cache).glob(f"kernels--hubkern--psel/snapshots/*/build/{TVM}"))
    assert len(snaps) == 1, snaps
    return {str(p.relative_to(snaps[0])) for p in snaps[0].rglob("*") if not p.is_dir()}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("psel")
    src = tmp / "src"
    make_variant(str(src), TVM, FILES)
    store = tmp / "store"
    publish(src, REPO, "v1", store)
    srv = Server(store, "--trust", "hubkern", public_url=True)
    yield dict(url=srv.url)
    srv.stop()


def test_include_pulls_the_file_and_metadata_then_a_plain_pull_completes(mirror, tmp_path):
    cache = tmp_path / "c"
    env = hubkern_env(mirror["url"], cache)
    doc = json.loads(pull("--include", "*/lib/a.txt", env=env).stdout)
    assert set(doc["files"]) == {f"build/{TVM}/lib/a.txt", f"build/{TVM}/metadata.json"}, doc["files"]
    assert on_disk(cache) == {"lib/a.txt", "metadata.json"}
    assert doc["dependency_tree"][0]["variant"] == TVM
    # the variant is not complete: a plain offline pull says so, an online one completes it
    off = pull(env=hubkern_env(mirror["url"], cache, HF_HUB_OFFLINE=1), check=False)
    assert off.returncode != 0 and "incomplete" in off.stdout + off.stderr, (off.stdout, off.stderr)
    doc = json.loads(pull(env=env).stdout)
    assert doc["files_downloaded"] == 3, doc  # _ops.so, lib/b.txt, data/x.bin
    assert on_disk(cache) == set(FILES) | {"metadata.json"}
    pull(env=hubkern_env(mirror["url"], cache, HF_HUB_OFFLINE=1))


def test_exclude_leaves_out_the_files_but_never_metadata(mirror, tmp_path):
    cache = tmp_path / "c"
    doc = json.loads(pull("--exclude", "*.bin", "--exclude", "*metadata.json", env=hubkern_env(mirror["url"], cache)).stdout)
    want = {"_ops.so", "lib/a.txt", "lib/b.txt", "metadata.json"}
    assert on_disk(cache) == want
    assert set(doc["files"]) == {f"build/{TVM}/{f}" for f in want}


def test_patterns_that_take_nothing_fail(mirror, tmp_path):
    p = pull("--include", "*.nothing", env=hubkern_env(mirror["url"], tmp_path / "c"), check=False)
    assert p.returncode == 1 and "HK_ERR_NOT_FOUND" in p.stdout, (p.stdout, p.stderr)
    p = subprocess.run([hubkern_bin(), "pull", REPO, "--version", "1", "--include", ""], capture_output=True,
                       text=True, env=hubkern_env(mirror["url"], tmp_path / "c"))
    assert p.returncode == 2 and "--include needs a pattern" in p.stderr, p.stderr


def test_offline_patterns_choose_among_the_listed_files(mirror, tmp_path):
    """Offline with patterns: the chosen files must be cached, the rest of the variant need not be
    (huggingface_hub's snapshot_download(local_files_only=True, allow_patterns=...) checks only the
    chosen files against its cached tree listing too); a chosen file that is not cached is
    HK_ERR_OFFLINE naming it."""
    cache = tmp_path / "c"
    pull("--include", "*/lib/*", env=hubkern_env(mirror["url"], cache))
    off = hubkern_env(mirror["url"], cache, HF_HUB_OFFLINE=1)
    doc = json.loads(pull("--include", "*/lib/a.txt", env=off).stdout)
    assert set(doc["files"]) == {f"build/{TVM}/lib/a.txt", f"build/{TVM}/metadata.json"}, doc["files"]
    doc = json.loads(pull("--exclude", "*.so", "--exclude", "*.bin", env=off).stdout)
    assert set(doc["files"]) == {f"build/{TVM}/lib/a.txt", f"build/{TVM}/lib/b.txt", f"build/{TVM}/metadata.json"}
    p = pull("--include", "*/lib/*", "--include", "*.so", env=off, check=False)
    assert p.returncode != 0 and "HK_ERR_OFFLINE" in p.stdout, (p.stdout, p.stderr)
    assert "_ops.so" in p.stdout and "1 of the 3 files" in p.stdout, p.stdout
    p = pull("--include", "*.nothing", env=off, check=False)
    assert p.returncode == 1 and "HK_ERR_NOT_FOUND" in p.stdout, (p.stdout, p.stderr)
    # a chosen cached file that was damaged is caught by its digest, not served
    snap = next(pathlib.Path(cache).glob(f"kernels--hubkern--psel/snapshots/*/build/{TVM}"))
    blob = (snap / "lib/a.txt").resolve()
    blob.chmod(0o644)
    blob.write_bytes(b"A\n")
    p = pull("--include", "*/lib/a.txt", env=off, check=False)
    assert p.returncode != 0 and "HK_ERR_DIGEST" in p.stdout, (p.stdout, p.stderr)
