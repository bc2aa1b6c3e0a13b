"""The staged tvm-ffi CPU variant as the Python `kernels` package sees it: metadata.json passes
kernels' own parser and validators, the digest matches what kernels recomputes (and a tampered file
fails it), kernels.get_local_kernel imports it under the metadata id, and the ops compute RMSNorm
on numpy arrays (float64 reference, fresh random data, poisoned outputs) and raise clear errors.

Env: HK_RMSNORM_HUB (the staged repo root), HK_RMSNORM_VARIANT (the variant name)."""
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from kernels import get_local_kernel
from kernels._rust import Digest, DigestValidationError, Metadata
from kernels.validate import AllValidator, default_metadata_validators

HUB = Path(os.environ["HK_RMSNORM_HUB"])
VARIANT = os.environ.get("HK_RMSNORM_VARIANT", "tvm-ffi01-cpu-x86_64-linux")
VDIR = HUB / "build" / VARIANT
RNG = np.random.default_rng()


def test_metadata_valid_for_kernels():
    meta = Metadata.read_from_file(VDIR / "metadata.json")
    assert meta.name.python_name == "rmsnorm"
    assert re.fullmatch(r"_rmsnorm_cpu_[0-9a-z]+(_dirty)?", meta.id), meta.id
    assert meta.version == 1 and meta.license == "Apache-2.0"
    assert meta.python_depends == ["tvm-ffi"]
    assert str(meta.backend.backend_type).lower() == "cpu"
    # kernels' default validators (python-depends curated names + importable, minver, dirty)
    AllValidator(validators=default_metadata_validators()).validate_metadata(
        metadata=meta, variant=VARIANT)
    files = set(meta.digest.files)
    assert files == {"__init__.py", "_ops.py", meta.id + ".so"}, files
    assert (VDIR / (meta.id + ".so")).is_file()


def test_digest_matches_and_detects_tampering(tmp_path):
    meta = Metadata.read_from_file(VDIR / "metadata.json")
    meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, VDIR))
    copy = tmp_path / VARIANT
    shutil.copytree(VDIR, copy)
    with open(copy / "__init__.py", "a") as f:
        f.write("# changed\n")
    with pytest.raises(DigestValidationError):
        meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, copy))


@pytest.fixture(scope="module")
def mod():
    return get_local_kernel(HUB, backend="cpu")


def reference(x, w, eps):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


def test_loaded_under_metadata_id(mod):
    meta = Metadata.read_from_file(VDIR / "metadata.json")
    assert mod.__name__ == meta.id
    assert sorted(mod.__all__) == ["fused_add_rms_norm", "rms_norm"]


@pytest.mark.parametrize("dtype,wdtype,rtol", [(np.float32, np.float32, 1e-5),
                                               (np.float16, np.float16, 1e-2),
                                               (np.float16, np.float32, 1e-2)])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (1, 4096), (256, 128), (2, 3, 1000), (5, 4097)])
def test_rms_norm_matches_float64(mod, dtype, wdtype, rtol, shape):
    x = RNG.standard_normal(shape).astype(dtype)
    w = (1.0 + 0.5 * RNG.standard_normal(shape[-1])).astype(wdtype)
    out = np.full(shape, np.nan, dtype=dtype)
    assert mod.rms_norm(out, x, w, 1e-6) is out
    ref = reference(x, w, 1e-6)
    assert np.all(np.abs(out.astype(np.float64) - ref) <= 1e-4 + rtol * np.abs(ref))


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float16, 1e-2)])
def test_fused_add_rms_norm(mod, dtype, rtol):
    x = RNG.standard_normal((64, 384)).astype(dtype)
    r = RNG.standard_normal((64, 384)).astype(dtype)
    w = RNG.standard_normal(384).astype(dtype)
    x0, r0 = x.copy(), r.copy()
    mod.fused_add_rms_norm(x, r, w, 1e-5)
    want_r = x0.astype(np.float64) + r0.astype(np.float64)
    assert np.all(np.abs(r.astype(np.float64) - want_r) <= 1e-4 + rtol * np.abs(want_r))
    ref = reference(r, w, 1e-5)
    assert np.all(np.abs(x.astype(np.float64) - ref) <= 1e-4 + rtol * np.abs(ref))


def test_invalid_inputs_raise_clear_errors(mod):
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    w = np.ones(64, np.float32)
    with pytest.raises(TypeError, match="dtype mismatch"):
        mod.rms_norm(np.empty((8, 64), np.float16), x, w)
    with pytest.raises(ValueError, match="not contiguous"):
        mod.rms_norm(np.empty((8, 32), np.float32), x[:, ::2], w[:32])
    with pytest.raises(ValueError, match=r"expected \[64\]"):
        mod.rms_norm(np.empty_like(x), x, np.ones(63, np.float32))
    with pytest.raises(ValueError, match="shape mismatch"):
        mod.rms_norm(np.empty((4, 64), np.float32), x, w)
    with pytest.raises(TypeError, match="supported: float32"):
        xi = np.zeros((8, 64), np.int32)
        mod.rms_norm(xi, xi, w)
    with pytest.raises(ValueError, match="same memory"):
        mod.fused_add_rms_norm(x, x, w)


@pytest.mark.parametrize("vdir", sorted(p for p in (HUB / "build").iterdir() if p.is_dir()),
                         ids=lambda p: p.name)
def test_every_staged_variant_has_valid_metadata(vdir):
    """Every variant the build staged (the CUDA one too when nvcc was there) parses, carries the
    right backend and archs, and its digest matches its files."""
    meta = Metadata.read_from_file(vdir / "metadata.json")
    backend = str(meta.backend.backend_type).lower()
    assert meta.id.startswith(f"_rmsnorm_{backend}_")
    if backend == "cuda":
        assert list(meta.backend.archs) == ["8.0", "9.0+PTX"]
        assert "-cu" in vdir.name
    meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, vdir))
    assert (vdir / (meta.id + ".so")).is_file()
