"""An installed hubkern, moved, finds its data only relative to itself (issue 24, item 1).

The build is installed (`cmake --install --prefix`) into a random prefix, which is then moved
elsewhere, so any path compiled in at build or install time points nowhere. Checked there:
- no installed binary or library carries the source or build tree's path outside its debug info
  (the old HK_SOURCE_DATA_DIR fallback did, and found data/sigstore of the checkout);
- `hubkern trust-root path` reports the moved prefix's shipped trusted_root.json, whether run from
  PATH (argv[0] a bare "hubkern": the lookup that made the issue's first install fall through to
  the source tree), by absolute path, or through a symlink in another directory;
- a C program linked against the moved prefix's libhubkern.so finds the same file through the
  library's own path;
- a kernels-community kernel (the RMSNorm CPU variant of kernels/rmsnorm, signed by the test
  Sigstore) is refused under the production root it ships with, and verifies, pulls and loads,
  through the CLI and through examples/rmsnorm_example.c, once the moved prefix's shipped file is
  the test Sigstore's root: the signature is checked against the shipped file and nothing else.
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sigstore"))
from hk_serve_helpers import BUILD_DIR, SOURCE_DIR, Server, publish  # noqa: E402
from testsigstore import FakeSigstore  # noqa: E402


def sanitized_build() -> bool:
    """HK_SANITIZE=ON: what gets installed is instrumented (ASan/UBSan record each check's source
    location, the full path, by design, and a program linked to the library must load the ASan
    runtime first): a test build, never the product. The release build runs this file."""
    cache = BUILD_DIR / "CMakeCache.txt"
    return cache.exists() and re.search(r"^HK_SANITIZE:BOOL=ON$", cache.read_text(), re.M) is not None


pytestmark = pytest.mark.skipif(sanitized_build(), reason="an installed sanitizer build is not a product install")

VARIANT = "tvm-ffi01-cpu-x86_64-linux"
SRC = BUILD_DIR / "kernels" / "rmsnorm" / "hub" / "build" / VARIANT
REPO = "kernels-community/rms-installed"


def clean_env(home, **extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("HF_", "HUGGING", "KERNELS_", "HUBKERN_", "LOCAL_KERNELS", "XDG_", "LD_"))}
    e.update(HOME=str(home), HUBKERN_RETRY_BASE_MS="1")
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(cmd, env, cwd, check=True):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd)
    if check:
        assert p.returncode == 0, f"{cmd}: {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    if not (BUILD_DIR / "cmake_install.cmake").is_file():
        pytest.skip(f"{BUILD_DIR} is not a configured build tree")
    tmp = tmp_path_factory.mktemp("install")
    staged = tmp / f"stage-{os.urandom(4).hex()}"
    p = subprocess.run(["cmake", "--install", str(BUILD_DIR), "--prefix", str(staged)], capture_output=True,
                       text=True)
    assert p.returncode == 0, f"cmake --install (is the build complete?):\n{p.stdout[-2000:]}\n{p.stderr}"
    moved = tmp / "elsewhere" / "opt-hubkern"
    moved.parent.mkdir()
    staged.rename(moved)  # every path known at install time is now stale
    lib = next(moved.glob("lib*/libhubkern.so"), None) or next(moved.glob("lib*/*/libhubkern.so"))
    home = tmp / "home"
    home.mkdir()
    return dict(tmp=tmp, prefix=moved, lib=lib, libdir=lib.parent, home=home,
                hubkern=moved / "bin" / "hubkern",
                shipped=moved / "share" / "hubkern" / "sigstore" / "trusted_root.json")


def elf_files(prefix):
    for p in sorted(prefix.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] in (b"\x7fELF", b"!<ar"):
            yield p


def test_no_source_or_build_path_is_compiled_in(inst):
    trees = {os.path.realpath(SOURCE_DIR).encode(), os.path.realpath(BUILD_DIR).encode(),
             str(SOURCE_DIR).encode(), str(BUILD_DIR).encode()}
    found = []
    files = list(elf_files(inst["prefix"]))
    assert any(f.name == "hubkern" for f in files) and any(f.name.startswith("libhubkern.so") for f in files)
    for f in files:
        # debug info names the sources by design; what the code can reach is in the other sections
        stripped = inst["tmp"] / "stripped"
        subprocess.run(["strip", "--strip-debug", "-o", str(stripped), str(f)], check=True)
        data = stripped.read_bytes()
        found += [f"{f.relative_to(inst['prefix'])}: {t.decode()}" for t in trees if t in data]
    assert not found, found


def test_trust_root_is_the_moved_prefix_shipped_copy(inst):
    want = f"{os.path.realpath(inst['shipped'])}\tshipped"
    assert hashlib.sha256(inst["shipped"].read_bytes()).digest() == \
        hashlib.sha256((SOURCE_DIR / "data" / "sigstore" / "trusted_root.json").read_bytes()).digest()
    cwd = inst["tmp"]  # holds no file named hubkern
    env = clean_env(inst["home"], PATH=f"{inst['prefix'] / 'bin'}:{os.environ['PATH']}")
    for argv0 in ["hubkern", inst["hubkern"]]:
        p = run([argv0, "trust-root", "path"], env, cwd)
        assert p.stdout.strip() == want, (argv0, p.stdout)
    link_dir = inst["tmp"] / "links"
    link_dir.mkdir(exist_ok=True)
    if not (link_dir / "hubkern").exists():
        (link_dir / "hubkern").symlink_to(inst["hubkern"])
    p = run([link_dir / "hubkern", "trust-root", "path"], env, "/")
    assert p.stdout.strip() == want, p.stdout


PROBE = r"""
#define _GNU_SOURCE 1
#include <hubkern.h>
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    Dl_info info;
    if (!dladdr((void *)hk_version, &info)) return 3;
    char *path = NULL;
    const char *source = NULL;
    if (hk_signature_trust_root_path(&path, &source, NULL) != HK_OK) {
        fprintf(stderr, "%s [%s]\n", hk_last_error(), hk_error_name(hk_last_error_code()));
        return 1;
    }
    printf("%s\n%s\t%s\n", info.dli_fname, path, source);
    hk_free(path);
    return 0;
}
"""


def cc(inst, src, out, *extra):
    # the README's way: the moved prefix's pkg-config file, plus an rpath to its libdir
    env = dict(os.environ, PKG_CONFIG_PATH=str(inst["libdir"] / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hubkern"], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    assert any(str(inst["prefix"]) in f for f in flags), flags
    subprocess.run(["cc", "-std=gnu11", str(src), *flags, *extra, f"-Wl,-rpath,{inst['libdir']}", "-o", str(out)],
                   check=True)


def test_c_program_linked_to_the_moved_library(inst):
    src = inst["tmp"] / "probe.c"
    src.write_text(PROBE)
    cc(inst, src, inst["tmp"] / "probe")
    p = run([inst["tmp"] / "probe"], clean_env(inst["home"]), "/")
    lib, root = p.stdout.splitlines()
    assert os.path.realpath(lib) == os.path.realpath(inst["lib"]), lib  # the moved copy, not the build's
    assert root == f"{os.path.realpath(inst['shipped'])}\tshipped", root


@pytest.fixture(scope="module")
def signed(inst):
    if not (SRC / "metadata.json").is_file():
        pytest.skip("no staged RMSNorm CPU variant (HK_BUILD_KERNELS=OFF)")
    tmp = inst["tmp"]
    ts = FakeSigstore()
    src = tmp / "src"
    shutil.copytree(SRC, src / "build" / VARIANT)
    bundle, _ = ts.sign_blob((src / "build" / VARIANT / "metadata.json").read_bytes())
    (src / "build" / VARIANT / "metadata.json.sigstore").write_text(json.dumps(bundle))
    store = tmp / "store"
    publish(src, REPO, "v1", store)
    srv = Server(store, "--trust", "kernels-community")
    yield dict(ts=ts, srv=srv)
    srv.stop()


def test_signed_kernel_through_cli_and_c(inst, signed, tmp_path):
    env = clean_env(inst["home"], HF_ENDPOINT=signed["srv"].url, HF_HUB_CACHE=tmp_path / "c0")
    hk = inst["hubkern"]
    # the shipped production root does not trust the test Sigstore: the shipped file is in use
    p = run([hk, "pull", REPO, "--version", 1, "--backend", "cpu"], env, tmp_path, check=False)
    assert p.returncode != 0 and "[HK_ERR_SIGNATURE]" in p.stderr, p.stderr
    saved = inst["shipped"].read_bytes()
    signed["ts"].write_trusted_root(str(inst["shipped"]))
    try:
        env["HF_HUB_CACHE"] = str(tmp_path / "c1")
        run([hk, "verify-signature", REPO, "--version", 1, "--all-variants"], env, tmp_path)
        p = run([hk, "load", REPO, "--version", 1, "--backend", "cpu", "--call"], env, tmp_path)
        example = tmp_path / "rmsnorm_example"
        cc(inst, SOURCE_DIR / "examples" / "rmsnorm_example.c", example, "-lm")
        p = run([example, "--repo", REPO, "--version", 1, "--backend", "cpu", "--rows", 4, "--hidden", 64,
                 "--endpoint", signed["srv"].url, "--cache", tmp_path / "c2"],
                clean_env(inst["home"], OMP_NUM_THREADS=1), tmp_path)
    finally:
        inst["shipped"].write_bytes(saved)
