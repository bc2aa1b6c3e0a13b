"""`hubkern env` and `hubkern variants` against the real machine and the real Python `kernels`
package (0.17.2, pinned in scripts/requirements.txt).

- env: compared with what Python itself reports (interpreter, tvm-ffi, CUDA devices through
  ctypes) and with kernels' own backend detection (`kernels.backends._backend()`).
- variants: hundreds of generated machines x candidate lists, resolved by hubkern
  (`hubkern variants DIR --json --blank ...`) and by kernels'
  `_resolve_variant_for_system` (which takes the system explicitly and never imports torch).
"""

import ctypes
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

HUBKERN = os.environ.get("HUBKERN_BIN", "hubkern")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBKERN_") and k != "TVM_FFI_LIB"}
    # hubkern asks this interpreter, so that the truth below comes from the same one
    env["HUBKERN_PYTHON"] = sys.executable
    env.update(extra)
    return env


def run(args, env=None, check=True):
    p = subprocess.run([HUBKERN, *args], capture_output=True, text=True, env=env or clean_env(), timeout=60)
    if check and p.returncode != 0:
        raise AssertionError(f"hubkern {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def major_minor(v):
    parts = v.split(".")
    return f"{int(parts[0])}.{int(''.join(c for c in parts[1] if c.isdigit()) or 0)}"


def cuda_device_count():
    """Independent truth: the CUDA driver, asked through ctypes."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if cuda.cuInit(0) != 0:
        return 0
    n = ctypes.c_int(0)
    return n.value if cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


# ---- hubkern env ---------------------------------------------------------------------------


def test_env_json_matches_this_machine():
    t0 = time.monotonic()
    out = run(["env", "--json"]).stdout
    elapsed = time.monotonic() - t0
    env = json.loads(out)
    assert elapsed < 10

    assert env["os"] == platform.system().lower()
    machine = platform.machine()
    assert env["cpu"] == {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)
    assert env["python"] == sys.executable
    assert env["python_version"] == platform.python_version()
    assert env["python_free_threaded"] == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    import site

    for d in site.getsitepackages():  # the interpreter's site dirs are all searched
        if os.path.isdir(d):
            assert os.path.abspath(d) in env["site_packages"]

    # torch: this CI machine has none; wherever it is installed the planted-version test below
    # covers parsing, and here the version must agree with the package metadata.
    if importlib.util.find_spec("torch") is None:
        assert env["torch_version"] is None
        assert env["torch_installed"] is False
        assert env["torch_cxx11_abi"] is None
    else:
        assert env["torch_version"] == major_minor(importlib.metadata.version("torch"))

    if importlib.util.find_spec("tvm_ffi") is None:
        assert env["tvm_ffi_version"] is None
    else:
        full = importlib.metadata.version("apache-tvm-ffi")
        assert env["tvm_ffi_full_version"] == full
        assert env["tvm_ffi_version"] == major_minor(full)
        assert Path(env["tvm_ffi_lib"]).is_file()

    # GPUs: what the driver says (none here: no libcuda.so.1 on this machine)
    assert env["gpu_count"] == cuda_device_count()
    assert len(env["gpus"]) == env["gpu_count"]
    if env["gpu_count"] == 0:
        assert env["gpus"] == []

    # the backend exactly as kernels 0.17 detects it on this machine
    from kernels.backends import _backend

    expected = _backend()
    assert env["backend"] == expected.name
    assert env["backend_variant"] == expected.variant_str


def test_env_human_output():
    p = run(["env"])
    assert "kernels backend" in p.stdout
    assert "python" in p.stdout
    p = run(["env", "--help"])
    assert "usage: hubkern env" in p.stdout
    p = run(["env", "--bogus"], check=False)
    assert p.returncode == 2


def plant_site(root: Path, torch_version="2.12.1+cu128", cuda="'12.8'", tvm="0.1.9"):
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "version.py").write_text(
        "from typing import Optional\n\n"
        f"__version__ = '{torch_version}'\n"
        "debug = False\n"
        f"cuda: Optional[str] = {cuda}\n"
        "hip: Optional[str] = None\n"
        "xpu: Optional[str] = None\n"
    )
    (root / "torch" / "__init__.py").write_text("def compiled_with_cxx11_abi() -> builtins.bool:\n    return True\n")
    if tvm:
        (root / "tvm_ffi" / "lib").mkdir(parents=True)
        (root / "tvm_ffi" / "_version.py").write_text(f"__version__ = version = '{tvm}'\n")
        (root / "tvm_ffi" / "lib" / "libtvm_ffi.so").write_bytes(b"\x7fELF")


def test_env_reports_planted_versions(tmp_path):
    site = tmp_path / "site-packages"
    plant_site(site)
    env = clean_env(HUBKERN_SITE_PACKAGES=str(site), HUBKERN_PYTHON="none", HUBKERN_NO_CUDA="1")
    got = json.loads(run(["env", "--json"], env=env).stdout)
    assert got["torch_version"] == "2.12"
    assert got["torch_full_version"] == "2.12.1+cu128"
    assert got["torch_cuda_version"] == "12.8"
    assert got["torch_dir"] == str(site / "torch")
    assert got["torch_installed"] is True
    if platform.system() == "Linux":
        assert got["torch_cxx11_abi"] is True
    assert got["backend"] == "cuda" and got["backend_variant"] == "cu128"
    assert got["backend_source"] == "torch"
    assert got["tvm_ffi_version"] == "0.1"
    assert got["tvm_ffi_lib"] == str(site / "tvm_ffi" / "lib" / "libtvm_ffi.so")
    assert got["python_version"] is None
    assert got["gpu_count"] == 0

    # the same tree through the real interpreter: torch is looked up in sys.path, so putting the
    # tree on PYTHONPATH makes the interpreter report it
    env = clean_env(PYTHONPATH=str(site), HUBKERN_NO_CUDA="1")
    got = json.loads(run(["env", "--json"], env=env).stdout)
    assert got["site_packages"][0] == str(site)
    assert got["torch_version"] == "2.12"
    assert got["python_version"] == platform.python_version()

    # flags override what was found
    got = json.loads(
        run(["env", "--json", "--torch", "2.13", "--cuda", "13.0", "--site-packages", str(site)], env=env).stdout
    )
    assert got["torch_version"] == "2.13"
    assert got["backend_variant"] == "cu130" and got["backend_source"] == "override"


# ---- hubkern variants vs kernels --------------------------------------------------------------

POOL = [
    # exact torch, tagged and untagged, every backend family
    *[f"torch{t}-cxx11-{b}-x86_64-linux" for t in ("210", "211", "212", "213") for b in ("cu126", "cu128", "cu130", "cu132", "rocm71", "rocm72", "cpu")],
    *[f"torch{t}-{b}-x86_64-linux" for t in ("212", "213") for b in ("cu126", "cu129", "cu130", "cpu")],
    "torch25-cxx98-cu124-x86_64-linux", "torch25-cxx11-cu124-x86_64-linux",
    "torch213-cxx11-cu130-aarch64-linux", "torch213-cxx11-cpu-aarch64-linux",
    "torch213-cxx11-xpu20253-x86_64-linux", "torch213-cxx11-xpu20260-x86_64-linux",
    "torch213-cxx11-cann81-x86_64-linux", "torch213-cxx11-neuron-x86_64-linux", "torch213-cxx11-tpu-x86_64-linux",
    "torch210-cpu-aarch64-darwin", "torch213-metal-aarch64-darwin", "torch213-cpu-aarch64-darwin",
    "torch213-cxx11-metal-aarch64-darwin",
    "torch212-cu128-x86_64-windows", "torch213-cu130-x86_64-windows", "torch213-cu130-aarch64-windows",
    # stable ABI
    *[f"torch-stable-abi{a}-{b}-x86_64-linux" for a in ("29", "210", "211", "213", "214") for b in ("cu126", "cu128", "cu130", "rocm71", "cpu")],
    "torch-stable-abi211-metal-aarch64-darwin", "torch-stable-abi211-cu130-aarch64-linux",
    # tvm-ffi
    *[f"tvm-ffi{v}-{b}-x86_64-linux" for v in ("01", "02") for b in ("cu126", "cu128", "cu130", "cu132", "cpu", "rocm72")],
    "tvm-ffi01-metal-aarch64-darwin", "tvm-ffi01-cu130-aarch64-linux",
    # noarch
    "torch-cuda", "torch-cpu", "torch-rocm", "torch-xpu", "torch-npu", "torch-metal", "torch-neuron",
    "torch-tpu", "torch-universal", "torch-cann",
    # names both sides refuse to parse
    "torch213-cu130-x86_64", "tvm-ffi1-cu130-x86_64-linux", "torch213-cuda-x86_64-linux",
    "jax04-cu130-x86_64-linux", "torch-stable-abi2-cu130-x86_64-linux", "notes",
]

BACKENDS = [
    ("cuda", "12.6"), ("cuda", "12.8"), ("cuda", "12.9"), ("cuda", "13.0"), ("cuda", "13.2"), ("cuda", "11.8"),
    ("rocm", "7.1"), ("rocm", "7.2"), ("xpu", "2025.3"), ("cann", "8.1"),
    ("cpu", None), ("metal", None), ("neuron", None), ("tpu", None),
]


def python_backend(kind, version):
    from packaging.version import Version

    from kernels.backends import CANN, CPU, CUDA, TPU, XPU, Metal, Neuron, ROCm

    return {
        "cuda": lambda: CUDA(version=Version(version)),
        "rocm": lambda: ROCm(version=Version(version)),
        "xpu": lambda: XPU(version=Version(version)),
        "cann": lambda: CANN(version=Version(version)),
        "cpu": CPU, "metal": Metal, "neuron": Neuron, "tpu": TPU,
    }[kind]()


def random_system(rng):
    os_, cpu = rng.choice([("linux", "x86_64"), ("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "aarch64"), ("windows", "x86_64")])
    torch = rng.choice([None, "2.5", "2.10", "2.11", "2.12", "2.13", "2.13", "2.14"])
    cxx11 = rng.choice([True, True, False]) if (torch and os_ == "linux") else None
    tvm = rng.choice([None, "0.1", "0.1", "0.2"])
    macos = rng.choice([None, "15.5", "26.0", "26.1"]) if os_ == "darwin" else None
    kind, ver = rng.choice(BACKENDS)
    if os_ == "darwin" and rng.random() < 0.6:
        kind, ver = rng.choice([("metal", None), ("cpu", None)])
    return dict(os=os_, cpu=cpu, torch=torch, cxx11=cxx11, tvm=tvm, macos=macos, kind=kind, ver=ver)


def hubkern_flags(s):
    flags = ["--blank", "--os", s["os"], "--cpu", s["cpu"], "--python-version", "3.12.0"]
    if s["torch"]:
        flags += ["--torch", s["torch"]]
    if s["cxx11"] is not None:
        flags += ["--cxx11", "1" if s["cxx11"] else "0"]
    if s["tvm"]:
        flags += ["--tvm-ffi", s["tvm"]]
    if s["macos"]:
        flags += ["--macos", s["macos"]]
    if s["ver"]:
        flags += [f"--{s['kind']}", s["ver"]]
    else:
        flags += ["--system-backend", s["kind"]]
    return flags


def python_resolve(names, s, backend_override=None):
    from packaging.version import Version

    from kernels.backends import CPU
    from kernels.variants import VariantAccepted, _resolve_variant_for_system, parse_variant

    variants, unparsed = [], set()
    for n in names:
        try:
            variants.append(parse_variant(n))
        except ValueError:
            unparsed.add(n)
    backend = CPU() if backend_override == "cpu" else python_backend(s["kind"], s["ver"])
    resolved, trace = _resolve_variant_for_system(
        variants=variants,
        selected_backend=backend,
        cpu=s["cpu"],
        os=s["os"],
        torch_version=Version(s["torch"]) if s["torch"] else None,
        torch_cxx11_abi=s["cxx11"],
        tvm_ffi_version=Version(s["tvm"]) if s["tvm"] else None,
        macos_version=Version(s["macos"]) if s["macos"] else None,
    )
    decisions = {d.variant.variant_str: d for d in trace}
    return resolved, trace, decisions, unparsed, VariantAccepted


def test_variants_match_kernels_resolver(tmp_path):
    from kernels.variants import _sort_variants

    rng = random.Random(20260820)
    cases = ties = 0
    # the upstream tie (tvm-ffi with CUDA minor 0 vs torch-cuda) first, then generated cases
    tie = dict(os="linux", cpu="x86_64", torch=None, cxx11=None, tvm="0.1", macos=None, kind="cuda", ver="13.0")
    fixed = [(tie, ["torch-cuda", "tvm-ffi01-cu130-x86_64-linux"]),
             (dict(tie, ver="13.2"), ["torch-universal", "tvm-ffi01-cpu-x86_64-linux", "tvm-ffi01-cu130-x86_64-linux"])]
    for i in range(250):
        if i < len(fixed):
            s, names = fixed[i]
        else:
            s = random_system(rng)
            names = sorted(set(rng.sample(POOL, rng.randint(1, 14))))
        override = "cpu" if i >= len(fixed) and rng.random() < 0.1 else None
        d = tmp_path / f"k{i}" / "build"
        for n in names:
            (d / n).mkdir(parents=True)
        args = ["variants", str(d.parent), "--json", *hubkern_flags(s)]
        if override:
            args += ["--backend", override]
        p = run(args, check=False)
        assert p.returncode in (0, 1), p.stderr
        got = json.loads(p.stdout)
        cands = got["candidates"]
        hk_order = [c["name"] for c in cands]
        assert sorted(hk_order) == names

        resolved, trace, decisions, unparsed, VariantAccepted = python_resolve(names, s, override)
        ctx = f"case {i}: system {s}, override {override}, names {names}"

        # the same names do not parse
        assert {c["name"] for c in cands if c["family"] == "invalid"} == unparsed, ctx
        # the same verdict and, for rejections, the same reason, word for word
        for c in cands:
            if c["family"] == "invalid":
                assert not c["accepted"]
                continue
            dec = decisions[c["name"]]
            assert c["accepted"] == isinstance(dec, VariantAccepted), ctx + f"\n  {c}"
            if not c["accepted"]:
                assert c["reason"] == dec.reason, ctx
        # hubkern's order is one that kernels' sort would produce (its sort is stable: sorting
        # hubkern's order again must not move anything)
        ours = [decisions[n] for n in hk_order if n in decisions]
        assert [x.variant.variant_str for x in _sort_variants(ours)] == [x.variant.variant_str for x in ours], ctx
        # and the chosen variant: kernels picks the same one when candidates arrive in hubkern's
        # order; in another order it may differ only on a tvm-ffi / noarch tie (upstream is
        # nondeterministic there, hubkern puts arch first)
        best = got["best"]
        py_best = resolved[0].variant_str if resolved else None
        if best is None:
            assert py_best is None, ctx
        else:
            assert _sort_variants(ours)[0].variant.variant_str == best, ctx
            if py_best != best:
                ties += 1
                fams = {cands[0]["family"]} | {c["family"] for c in cands if c["name"] == py_best}
                assert fams <= {"tvm-ffi", "noarch"}, ctx
                assert cands[0]["family"] == "tvm-ffi", ctx
        cases += 1
    assert cases == 250
    assert ties >= 1  # the fixed tie case did exercise the tie-break
    print(f"{cases} cases, {ties} upstream ties resolved by hubkern's tie-break")


def test_variants_on_this_machine_match_kernels(tmp_path):
    """Real detection on both sides: kernels' resolve_variants (detects the machine itself,
    imports torch only if installed) and plain `hubkern variants DIR`."""
    from kernels.variants import parse_variant, resolve_variants

    names = [n for n in POOL if "notes" not in n]
    root = tmp_path / "kernel"
    for n in names:
        (root / "build" / n).mkdir(parents=True)
    p = run(["variants", str(root), "--json"], check=False)
    got = json.loads(p.stdout)
    # kernels' order among equal keys is its input order (a set upstream): hand it hubkern's
    variants = []
    for c in got["candidates"]:
        try:
            variants.append(parse_variant(c["name"]))
        except ValueError:
            assert c["family"] == "invalid"
    resolved, _ = resolve_variants(variants)
    assert got["best"] == (resolved[0].variant_str if resolved else None)
    accepted = [c["name"] for c in got["candidates"] if c["accepted"]]
    assert accepted == [v.variant_str for v in resolved]
    # in name order kernels would pick differently only on the tvm-ffi / noarch tie
    resolved_by_name, _ = resolve_variants(sorted(variants, key=lambda v: v.variant_str))
    assert {v.variant_str for v in resolved_by_name} == set(accepted)


def test_explicit_backend_rule(tmp_path):
    from kernels.backends import _backend, _select_backend

    (tmp_path / "build" / "torch-cpu").mkdir(parents=True)
    detected = _backend().name
    other = "rocm" if detected != "rocm" else "xpu"
    with pytest.raises(ValueError) as err:
        _select_backend(other)
    p = run(["variants", str(tmp_path), "--backend", other], check=False)
    assert p.returncode == 2  # no answer (grep's convention; 1 is "no compatible variant")
    assert str(err.value) in p.stderr
    p = run(["variants", str(tmp_path), "--backend", "cpu"])
    assert "selected: torch-cpu" in p.stdout


def test_variants_text_and_errors(tmp_path):
    for n in ["torch213-cxx11-cu130-x86_64-linux", "torch-cuda", "not-a-variant"]:
        (tmp_path / n).mkdir()  # DIR/* when there is no DIR/build
    (tmp_path / "README.md").write_text("not a directory")
    p = run(["variants", str(tmp_path), "--blank", "--os", "linux", "--cpu", "x86_64", "--torch", "2.13",
             "--cuda", "13.0", "--python-version", "3.12.0"])
    lines = p.stdout.splitlines()
    assert lines[0].startswith("system: x86_64-linux, torch 2.13 (cxx11 ABI)")
    assert "  torch213-cxx11-cu130-x86_64-linux compatible, preferred \u2705" in lines
    assert "  torch-cuda compatible \u2705" in lines
    assert any(l.startswith("  not-a-variant: cannot parse variant name") for l in lines)
    assert lines[-1] == "selected: torch213-cxx11-cu130-x86_64-linux"
    assert "README.md" not in p.stdout

    p = run(["variants", str(tmp_path), "--blank", "--os", "linux", "--cpu", "aarch64"], check=False)
    assert p.returncode == 1 and p.stdout.splitlines()[-1] == "no compatible variant"
    assert run(["variants", str(tmp_path / "missing")], check=False).returncode == 2
    assert run(["variants"], check=False).returncode == 2
    assert run(["variants", str(tmp_path), "--cxx11", "maybe", "--blank"], check=False).returncode == 2
    assert "usage: hubkern variants" in run(["variants", "--help"]).stdout


FAKE_CUDA = r"""
#include <string.h>
static int inited;
int cuInit(unsigned flags) { (void)flags; inited = 1; return 0; }
int cuDriverGetVersion(int *v) { *v = 13010; return 0; }
int cuDeviceGetCount(int *n) { if (!inited) return 3; *n = 2; return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = 100 + ordinal; return 0; }
int cuDeviceGetAttribute(int *value, int attrib, int dev) {
    if (attrib == 75) { *value = dev == 100 ? 9 : 8; return 0; }   /* CC major */
    if (attrib == 76) { *value = dev == 100 ? 0 : 6; return 0; }   /* CC minor */
    return 1;
}
int cuDeviceGetName(char *name, int len, int dev) {
    strncpy(name, dev == 100 ? "NVIDIA H200" : "NVIDIA RTX A6000", (size_t)len);
    return 0;
}
int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }
"""


def test_env_cuda_through_dlopen(tmp_path):
    """The libcuda / libcudart path, with stand-in libraries that answer like a two-GPU machine."""
    src = tmp_path / "fakecuda.c"
    src.write_text(FAKE_CUDA)
    libdir = tmp_path / "lib"
    libdir.mkdir()
    for name in ("libcuda.so.1", "libcudart.so"):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(libdir / name), str(src)], check=True)
    empty = tmp_path / "empty-site"
    empty.mkdir()
    env = clean_env(LD_LIBRARY_PATH=f"{libdir}:{os.environ.get('LD_LIBRARY_PATH', '')}",
                    HUBKERN_PYTHON="none", HUBKERN_SITE_PACKAGES=str(empty))
    got = json.loads(run(["env", "--json"], env=env).stdout)
    assert got["cuda_driver_version"] == "13.1"
    assert got["cuda_runtime_version"] == "12.8"  # 12080 → 12.8
    assert got["gpu_count"] == 2
    assert got["gpus"] == [
        {"index": 0, "name": "NVIDIA H200", "capability": "9.0"},
        {"index": 1, "name": "NVIDIA RTX A6000", "capability": "8.6"},
    ]
    # no torch: the backend is the CUDA runtime's, as kernels' _get_cuda() does
    assert got["backend_variant"] == "cu128" and got["backend_source"] == "cudart"
    text = run(["env"], env=env).stdout
    assert "NVIDIA H200 (compute capability 9.0)" in text

    # --no-cuda loads neither library
    got = json.loads(run(["env", "--json", "--no-cuda"], env=env).stdout)
    assert got["gpu_count"] == 0 and got["cuda_driver_version"] is None and got["backend"] == "cpu"


FAKE_TORCH_INIT = """\
from . import version
from .version import __version__


class _MPS:
    @staticmethod
    def is_available():
        return False


class backends:
    mps = _MPS


class _C:
    pass


def compiled_with_cxx11_abi():
    return True
"""

KERNELS_RESOLVE = """\
import json, sys
import kernels.variants
from kernels.variants import parse_variant, resolve_variants
import torch
# the real tvm_ffi imports torch for its dtypes, which this stand-in lacks: leave tvm-ffi out on
# both sides (hubkern gets --set tvm_ffi_version=)
kernels.variants.has_tvm_ffi = False
assert torch.__file__.startswith(sys.argv[1]), torch.__file__
variants = []
for name in json.loads(sys.argv[2]):
    try:
        variants.append(parse_variant(name))
    except ValueError:
        pass
resolved, _ = resolve_variants(variants)
print(json.dumps([v.variant_str for v in resolved]))
"""


@pytest.mark.parametrize(
    "version,cuda,hip",
    [("2.10.0+cu128", "'12.8'", "None"), ("2.13.0+cu130", "'13.0'", "None"),
     ("2.11.0+rocm7.1", "None", "'7.1.25424-4179531dcd'"), ("2.13.0+cpu", "None", "None")],
)
def test_fake_torch_detected_like_kernels(tmp_path, version, cuda, hip):
    """A stand-in torch package that kernels can import: kernels detects the machine by importing
    it, hubkern by reading its files. Both must pick the same variants."""
    site = tmp_path / "site"
    plant_site(site, torch_version=version, cuda=cuda, tvm=None)
    (site / "torch" / "version.py").write_text(
        f"__version__ = '{version}'\ncuda = {cuda}\nhip = {hip}\nxpu = None\n")
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH_INIT)
    names = [n for n in POOL if "notes" not in n]
    root = tmp_path / "kernel"
    for n in names:
        (root / "build" / n).mkdir(parents=True)
    env = clean_env(PYTHONPATH=str(site))
    got = json.loads(run(["variants", str(root), "--json", "--set", "tvm_ffi_version="], env=env).stdout)
    assert got["system"]["torch_dir"] == str(site / "torch")
    order = [c["name"] for c in got["candidates"]]
    p = subprocess.run([sys.executable, "-c", KERNELS_RESOLVE, str(site), json.dumps(order)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    resolved = json.loads(p.stdout)
    assert resolved, "kernels found nothing: the pool covers every backend used here"
    assert [c["name"] for c in got["candidates"] if c["accepted"]] == resolved
    assert got["best"] == resolved[0]
