"""hk_get_kernel end to end from the outside, with the real clients.

A loopback `hubkern serve` holds our RMSNorm CPU tvm-ffi variant (published with `hubkern publish`).
The example C program (examples/rmsnorm_example.c) gets it with hk_get_kernel, calls rms_norm on
random data and checks it against a float64 reference; Python `kernels.get_kernel` (kernels 0.17.2
with apache-tvm-ffi, no torch installed) gets the same kernel from the same mirror and the same
cache and must produce bit-identical numbers on the same input. Also: `hubkern load` (+ --call),
kernels.lock written by `hubkern lock` and read by kernels' own KernelLocks, `hubkern download
--lock` + offline `hubkern load --lock` (and kernels.load_kernel on that cache), the old lock format
verified with a hash computed here from the mirror's tree listing, LOCAL_KERNELS, bad inputs."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

from hk_serve_helpers import Server, hubkern_bin, publish

BUILD = pathlib.Path(os.environ["HK_BUILD_DIR"])
HUB_SRC = BUILD / "kernels" / "rmsnorm" / "hub"
VARIANT = "tvm-ffi01-cpu-x86_64-linux"
EXAMPLE = BUILD / "examples" / "rmsnorm_example"
DEAD = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    assert (HUB_SRC / "build" / VARIANT / "metadata.json").is_file(), "build the rmsnorm_hub_variants target"
    store = tmp_path_factory.mktemp("store")
    commit = publish(HUB_SRC, "hubkern/rmsnorm", "v1", store)
    # a repo whose only build is for another CPU
    arm = tmp_path_factory.mktemp("armsrc")
    (arm / "build").mkdir()
    subprocess.run(["cp", "-r", str(HUB_SRC / "build" / VARIANT), str(arm / "build" / "tvm-ffi01-cpu-aarch64-linux")], check=True)
    publish(arm, "hubkern/armonly", "v1", store)
    srv = Server(store, "--trust", "hubkern")
    yield srv, commit
    srv.stop()


def env_for(cache, endpoint, **extra):
    e = dict(os.environ)
    for k in ("HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_TOKEN", "KERNELS_CACHE", "HUBKERN_TVM_FFI_LIB", "TVM_FFI_LIB"):
        e.pop(k, None)
    # Not HF_HUB_DISABLE_TELEMETRY: with it, kernels 0.17.2 sends the User-Agent
    # "kernels/0.17.2; hf_hub/2.4.0; python/3.11.7; " whose trailing blank httpx refuses
    # (LocalProtocolError), so its publisher-trust request fails.
    for k in ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK"):
        e.pop(k, None)
    e.update(HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS="1",
             OMP_NUM_THREADS="1", HUBKERN_RETRY_BASE_MS="1")
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(cmd, env, check=True):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p


def hk(*args, env, check=True):
    return run([hubkern_bin(), *args], env, check)


def test_pull_then_example_then_python_same_numbers(mirror, tmp_path):
    srv, commit = mirror
    cache = tmp_path / "cache"
    env = env_for(cache, srv.url)
    pulled = json.loads(hk("pull", "hubkern/rmsnorm", "--version", "1", "--backend", "cpu", "--json", env=env).stdout)
    assert pulled["commit"] == commit and pulled["bytes_verified"] > 0
    assert [v["name"] for v in pulled["variants"]] == [VARIANT]

    dump = tmp_path / "dump"
    dump.mkdir()
    p = run([EXAMPLE, "--repo", "hubkern/rmsnorm", "--version", "1", "--endpoint", srv.url, "--cache", cache,
             "--backend", "cpu", "--rows", "16", "--hidden", "1000", "--seed", "7", "--dump", dump], env)
    assert f"-> commit {commit}" in p.stdout
    assert f"variant   {VARIANT}" in p.stdout
    assert "exports   fused_add_rms_norm rms_norm" in p.stdout
    assert "0 outside 1e-5: ok" in p.stdout
    library = next(line.split(None, 1)[1] for line in p.stdout.splitlines() if line.startswith("library"))
    assert library.startswith(str(cache / "kernels--hubkern--rmsnorm" / "snapshots" / commit / "build" / VARIANT))

    # Python kernels, same mirror, same cache, same input: the same bits out.
    script = f"""
import sys, numpy as np, kernels
m = kernels.get_kernel("hubkern/rmsnorm", version=1, backend="cpu")
x = np.fromfile({str(dump / 'x.f32')!r}, dtype=np.float32).reshape(16, 1000)
w = np.fromfile({str(dump / 'weight.f32')!r}, dtype=np.float32)
out = np.full_like(x, np.nan)
m.rms_norm(out, x, w, 1e-6)
out.tofile({str(dump / 'py_out.f32')!r})
import importlib, os
print(m.__name__, os.path.dirname(m.__file__), 'torch' in sys.modules)
"""
    py = run([sys.executable, "-c", script], env)
    name, where, torch_loaded = py.stdout.split()
    assert where == str(pathlib.Path(library).parent)  # the very same cached variant directory
    assert torch_loaded == "False"  # kernels + tvm_ffi, no torch in the process
    c_out = np.fromfile(dump / "out.f32", dtype=np.float32)
    py_out = np.fromfile(dump / "py_out.f32", dtype=np.float32)
    assert c_out.shape == py_out.shape == (16000,)
    assert np.array_equal(c_out, py_out)


def test_load_cli_and_errors(mirror, tmp_path):
    srv, commit = mirror
    env = env_for(tmp_path / "c", srv.url)
    j = json.loads(hk("load", "hubkern/rmsnorm", "--version", "1", "--backend", "cpu", "--call", "--json", env=env).stdout)
    assert j["commit"] == commit and j["variant"] == VARIANT and j["kind"] == "tvm-ffi"
    assert j["functions"] == ["fused_add_rms_norm", "rms_norm"]
    assert j["metadata"]["name"] == "rmsnorm" and j["metadata"]["license"] == "Apache-2.0"
    assert j["call"]["rms_norm"]["ok"] and j["call"]["fused_add_rms_norm"]["ok"]
    # the digest check before each load (hk_kernel_bytes_verified / _trusted): cold, every byte was
    # hashed (as it streamed in); warm, the verification receipt vouches for every file
    total = sum(f.stat().st_size for f in pathlib.Path(j["path"]).iterdir() if f.name != "metadata.json")
    assert j["bytes_verified"] >= total and j["bytes_trusted"] == 0
    time.sleep(0.05)  # past the receipts' racy window
    load = ["load", "hubkern/rmsnorm", "--version", "1", "--backend", "cpu", "--json"]
    hk(*load, env=env)
    for extra in ([], ["--offline"]):
        w = json.loads(hk(*load, *extra, env=env).stdout)
        assert (w["bytes_verified"], w["bytes_trusted"]) == (0, total), w
    w = json.loads(hk(*load, env={**env, "HUBKERN_VERIFY": "always"}).stdout)
    assert (w["bytes_verified"], w["bytes_trusted"]) == (total, 0), w
    w = json.loads(hk("load", "--local", str(HUB_SRC), "--backend", "cpu", "--json", env=env).stdout)
    assert (w["bytes_verified"], w["bytes_trusted"]) == (0, 0)  # a local build is not checked

    # the text form says the same on one `verified` line, sizes in decimal kB/MB
    def size(n):
        if n < 1000:
            return f"{n} B"
        v, units = n / 1000, ["kB", "MB", "GB", "TB"]
        while v >= 999.95 and len(units) > 1:
            v, units = v / 1000, units[1:]
        return f"{v:.1f} {units[0]}"

    def verified_line(args, e):
        lines = [ln for ln in hk(*args, env=e).stdout.splitlines() if ln.startswith("verified ")]
        assert len(lines) == 1, lines
        return lines[0]

    assert total >= 1000  # so that the unit is exercised, not only "B"
    text = load[:-1]  # without --json
    assert verified_line(text, env) == (f"verified  0 B hashed against the metadata.json digest, {size(total)} "
                                        "trusted by its verification receipt")
    assert verified_line(text, {**env, "HUBKERN_VERIFY": "always"}) == (
        f"verified  {size(total)} hashed against the metadata.json digest, 0 B trusted by its verification receipt")
    assert verified_line(["load", "--local", str(HUB_SRC), "--backend", "cpu"], env).startswith(
        "verified  nothing: no digest check ran")

    def fails(code, *args, **extra):
        p = hk("load", *args, "--backend", "cpu", env=env_for(tmp_path / "c", srv.url, **extra), check=False)
        assert p.returncode == 1 and f"[{code}]" in p.stderr, (args, p.stderr)
        return p.stderr

    fails("HK_ERR_REPO_NOT_FOUND", "hubkern/unknown", "--version", "1")
    fails("HK_ERR_VERSION_NOT_FOUND", "hubkern/rmsnorm", "--version", "9")
    err = fails("HK_ERR_NO_VARIANT", "hubkern/armonly", "--version", "1")
    assert "tvm-ffi01-cpu-aarch64-linux" in err
    err = fails("HK_ERR_RUNTIME_MISSING", "hubkern/rmsnorm", "--version", "1",
                HUBKERN_TVM_FFI_LIB="/nonexistent/libtvm_ffi.so")
    assert "HUBKERN_TVM_FFI_LIB" in err
    # a corrupted cache file: the library blob is damaged after a verified pull
    blob = pathlib.Path(os.path.realpath(tmp_path / "c" / "kernels--hubkern--rmsnorm" / "snapshots" / commit / "build" /
                                        VARIANT / (j["metadata"]["id"] + ".so")))
    data = bytearray(blob.read_bytes())
    data[5000] ^= 0xFF
    blob.chmod(0o644)
    blob.write_bytes(bytes(data))
    p = hk("load", "hubkern/rmsnorm", "--version", "1", "--backend", "cpu", "--offline", env=env, check=False)
    assert p.returncode == 1 and ("[HK_ERR_DIGEST]" in p.stderr or "[HK_ERR_INTEGRITY]" in p.stderr), p.stderr


def tree_hash(url, repo, commit, variant):
    """git_lfs_concat of build/<variant>/ from the mirror's tree listing (the documented algorithm,
    written independently of hubkern: pairs (relative path, lfs sha256 or git blob id), sorted,
    sha256 over path bytes + raw id bytes)."""
    from huggingface_hub import HfApi
    api = HfApi(endpoint=url, token=False)
    pairs = []
    prefix = f"build/{variant}/"
    for f in api.list_repo_tree(repo, repo_type="kernel", revision=commit, recursive=True):
        if not hasattr(f, "blob_id") or not f.path.startswith(prefix):
            continue
        rel = f.path[len(prefix):]
        if rel.endswith(".pyc") or "__pycache__" in rel.split("/"):
            continue
        hexid = f.lfs.sha256 if f.lfs else f.blob_id
        pairs.append((rel.encode(), bytes.fromhex(hexid)))
    assert pairs
    h = hashlib.sha256()
    for path, raw in sorted(pairs):
        h.update(path + raw)
    return "sha256-" + h.hexdigest()


def test_locks(mirror, tmp_path):
    srv, commit = mirror
    from kernels._rust import KernelLocks

    online = env_for(tmp_path / "lockcache", srv.url)
    lock = tmp_path / "kernels.lock"
    hk("lock", "hubkern/rmsnorm=1", "-o", lock, "--endpoint", srv.url, env=online)
    text = lock.read_text()
    locks = KernelLocks.from_json(text)  # kernels' own parser accepts it
    assert [lk.commit for lk in locks.values()] == [commit]
    assert [(d.repo_id, str(d.version)) for d in locks.keys()] == [("hubkern/rmsnorm", str(locks.keys()[0].version))]
    assert locks.to_json() == text  # and would write exactly the same bytes

    fresh = tmp_path / "fresh"
    hk("download", "--lock", lock, "--backend", "cpu", env=env_for(fresh, srv.url))
    offline = env_for(fresh, DEAD, HF_HUB_OFFLINE="1")
    out = hk("load", "hubkern/rmsnorm", "--lock", lock, "--backend", "cpu", "--call", env=offline).stdout
    assert f"commit    {commit}" in out and "rms_norm" in out and "ok" in out
    # kernels.load_kernel reads our lock and our cache
    py = run([sys.executable, "-c",
              "import kernels, pathlib, sys; m = kernels.load_kernel('hubkern/rmsnorm', "
              f"lockfile=pathlib.Path({str(lock)!r}), backend='cpu'); print(m.__file__)"], offline)
    assert f"/snapshots/{commit}/build/{VARIANT}/" in py.stdout
    # not prefetched: a clear offline error
    p = hk("load", "hubkern/rmsnorm", "--lock", lock, "--backend", "cpu", env=env_for(tmp_path / "empty", DEAD), check=False)
    assert p.returncode == 1 and "[HK_ERR_OFFLINE]" in p.stderr and "download --lock" in p.stderr

    # the old format, with the variant hash computed from the mirror's tree listing
    good = tree_hash(srv.url, "hubkern/rmsnorm", commit, VARIANT)
    old = tmp_path / "old.lock"
    old.write_text(json.dumps([{"repo_id": "hubkern/rmsnorm", "sha": commit,
                                "variants": {VARIANT: {"hash": good, "hash_type": "git_lfs_concat"}}}]))
    out = hk("load", "hubkern/rmsnorm", "--lock", old, "--backend", "cpu", "--call", env=offline).stdout
    assert "ok" in out
    bad = "sha256-" + ("0" * 64)
    old.write_text(json.dumps([{"repo_id": "hubkern/rmsnorm", "sha": commit,
                                "variants": {VARIANT: {"hash": bad, "hash_type": "git_lfs_concat"}}}]))
    p = hk("load", "hubkern/rmsnorm", "--lock", old, "--backend", "cpu", env=offline, check=False)
    assert p.returncode == 1 and "[HK_ERR_LOCKFILE]" in p.stderr and good in p.stderr


def test_local_kernels(mirror, tmp_path):
    env = env_for(tmp_path / "none", DEAD, LOCAL_KERNELS=f"hubkern/dev={HUB_SRC}")
    p = run([EXAMPLE, "--repo", "hubkern/dev", "--version", "1", "--backend", "cpu", "--rows", "4", "--hidden", "64"], env)
    assert f"library   {HUB_SRC.resolve()}/build/{VARIANT}/" in p.stdout and "ok" in p.stdout
