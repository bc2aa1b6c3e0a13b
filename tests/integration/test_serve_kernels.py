"""The real `kernels` package (pinned in scripts/requirements.txt) against `hubkern serve`: version
listing (`kernels versions` CLI), variant resolution, install_kernel (trust check through
/api/organizations/<org>/overview, refs, tree of build/, snapshot download), `kernels lock` and
`kernels download --all-variants`,
kernel-status.toml parsing, and refusal of untrusted publishers.

torch is not installed here, so only torch-noarch (torch-cpu) and tvm-ffi variants are resolved, with
backend="cpu". HF_HUB_DISABLE_TELEMETRY is deliberately left unset: with it, kernels 0.17.2 builds a
User-Agent ending in "; " that httpx2 (huggingface_hub 2.4.0) refuses to send."""

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import Server, publish  # noqa: E402

ORG = "hubkern-kt"


def metadata(name: str, version: int, backend: str) -> bytes:
    return json.dumps(
        {"name": name, "id": f"_{name.replace('-', '_')}_{backend}_abc1234", "version": version, "license": "MIT",
         "python-depends": [], "backend": {"type": backend}}
    ).encode()


def kernel_tree(root: pathlib.Path, name: str, version: int, extra: bytes = b"") -> dict:
    files = {
        "build/torch-cpu/metadata.json": metadata(name, version, "cpu"),
        "build/torch-cpu/__init__.py": b"VERSION = %d\n" % version + extra,
        "build/torch-cpu/_ops.py": b"ops = None\n",
        "build/tvm-ffi01-cpu-x86_64-linux/metadata.json": metadata(name, version, "cpu"),
        "build/tvm-ffi01-cpu-x86_64-linux/" + name.replace("-", "_") + ".so": b"\x7fELF\0fake",
    }
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return files


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    env.pop("DO_NOT_TRACK", None)
    env.pop("DISABLE_TELEMETRY", None)
    env.update(HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **extra)
    return env


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kernels")
    store = tmp / "store"
    f1 = kernel_tree(tmp / "s1", "rmsnorm-demo", 1)
    f2 = kernel_tree(tmp / "s2", "rmsnorm-demo", 2, b"# v2\n")
    c1 = publish(tmp / "s1", f"{ORG}/rmsnorm", "v1", store)
    c2 = publish(tmp / "s2", f"{ORG}/rmsnorm", "v2", store)
    # a repo whose v1 redirects to rmsnorm's v2 through kernel-status.toml
    old = tmp / "old"
    kernel_tree(old, "old-demo", 1)
    (old / "kernel-status.toml").write_text(f'kind = "redirect"\ndestination = "{ORG}/rmsnorm"\nrevision = "v2"\n')
    publish(old, f"{ORG}/old", "v1", store)
    # an untrusted namespace in the same store
    kernel_tree(tmp / "u", "untrusted-demo", 1)
    publish(tmp / "u", "someone-else/k", "v1", store)
    srv = Server(store, "--trust", ORG, "--access-log")
    os.environ.clear()
    os.environ.update(clean_env(HF_ENDPOINT=srv.url, HF_HOME=str(tmp / "hf_home")))
    kernels = importlib.import_module("kernels")
    yield dict(kernels=kernels, srv=srv, store=store, tmp=tmp, f1=f1, f2=f2, c1=c1, c2=c2)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


def test_kernels_versions_cli(env):
    p = subprocess.run(
        [sys.executable, "-c", "import sys; from kernels.cli import main; sys.argv=['kernels','versions',sys.argv[1]]; main()",
         f"{ORG}/rmsnorm"],
        env=clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(env["tmp"] / "hf_cli")),
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Version 1:" in out and "Version 2:" in out, out
    assert out.count("tvm-ffi01-cpu-x86_64-linux") == 2 and out.count("torch-cpu") == 2, out


def test_variants_and_install(env):
    kernels = env["kernels"]
    decisions = kernels.get_kernel_variants(f"{ORG}/rmsnorm", version=2, backend="cpu")
    accepted = [d for d in decisions if type(d).__name__ == "VariantAccepted"]
    assert len(decisions) == 2 and len(accepted) == 2
    path = pathlib.Path(kernels.install_kernel(f"{ORG}/rmsnorm", version=1, backend="cpu"))
    # version 1 resolved through refs to v1's commit, the preferred variant downloaded whole
    assert path.parts[-3] == env["c1"] and path.parts[-4] == "snapshots", path
    got = {f"build/{path.name}/{p.relative_to(path)}": p.read_bytes() for p in path.rglob("*") if p.is_file()}
    want = {k: v for k, v in env["f1"].items() if k.startswith(f"build/{path.name}/")}
    assert got == want
    # the mirror saw the publisher-trust check and the refs lookup
    srv = env["srv"]
    assert srv.wait_log(f'"GET /api/organizations/{ORG}/overview" 200'), "\n".join(srv.log_lines)
    assert srv.wait_log(f'"GET /api/kernels/{ORG}/rmsnorm/refs" 200'), "\n".join(srv.log_lines)


def test_kernel_status_redirect(env):
    """kernel-status.toml is served like any file. kernels 0.17.2 defines resolve_status() but never
    calls it on the install path, so we drive its parser directly: it fetches the file through the
    mirror and reads the redirect; a repo without the file answers EntryNotFound (no redirect)."""
    kernels = env["kernels"]
    status = importlib.import_module("kernels.status")
    from kernels.hf_hub import _get_hf_api

    api = _get_hf_api()
    st = status.KernelStatus.check_status(api, f"{ORG}/old", "v1")
    assert type(st).__name__ == "Redirect"
    assert (st.destination, st.revision) == (f"{ORG}/rmsnorm", "v2")
    assert status.resolve_status(api, f"{ORG}/old", "v1") == (f"{ORG}/rmsnorm", "v2")
    assert status.KernelStatus.check_status(api, f"{ORG}/rmsnorm", "v1") is None
    assert env["srv"].wait_log('/kernel-status.toml" 404')
    assert kernels is not None


def test_untrusted_publisher_refused(env):
    code = (
        "import sys, kernels\n"
        "try:\n"
        "    kernels.install_kernel(sys.argv[1], version=1, backend='cpu')\n"
        "except ValueError as e:\n"
        "    print('REFUSED', e)\n"
        "else:\n"
        "    print('INSTALLED')\n"
    )
    e = clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(env["tmp"] / "hf_untrusted"))
    p = subprocess.run([sys.executable, "-c", code, "someone-else/k"], env=e, capture_output=True, text=True, timeout=60)
    assert "REFUSED" in p.stdout and "not from a trusted publisher" in p.stdout, (p.stdout, p.stderr)
    # a namespace the mirror does not know: the overview is a 404 and kernels cannot verify trust
    p = subprocess.run([sys.executable, "-c", code, "nobody/k"], env=e, capture_output=True, text=True, timeout=60)
    assert "REFUSED" in p.stdout and "could not verify publisher trust status" in p.stdout, (p.stdout, p.stderr)


def test_kernels_lock_and_download(env, tmp_path):
    """`kernels lock` pins version 1 to its commit through the mirror; `kernels download
    --all-variants` then fetches every variant at that commit into an empty cache."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "x"\nversion = "0"\n[tool.kernels.dependencies]\n"{ORG}/rmsnorm" = 1\n'
    )
    cli = "import sys; from kernels.cli import main; sys.argv = ['kernels'] + sys.argv[1:]; main()"
    e = clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(tmp_path / "hf_lock"))
    p = subprocess.run([sys.executable, "-c", cli, "lock", str(proj)], env=e, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    lock = json.loads((proj / "kernels.lock").read_text())
    assert lock[0]["dependency"] == {"repo-id": f"{ORG}/rmsnorm", "version": 1}
    assert lock[0]["lock"]["commit"] == env["c1"]
    hf_home = tmp_path / "hf_download"
    e = clean_env(HF_ENDPOINT=env["srv"].url, HF_HOME=str(hf_home))
    p = subprocess.run([sys.executable, "-c", cli, "download", str(proj), "--all-variants"], env=e,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    snap = hf_home / "hub" / "kernels--hubkern-kt--rmsnorm" / "snapshots" / env["c1"]
    got = {str(f.relative_to(snap)): f.read_bytes() for f in snap.rglob("*") if f.is_file()}
    assert got == env["f1"]
