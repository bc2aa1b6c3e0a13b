"""The tvm-ffi dependency proof in Python: kernels 0.17.2 loads the same published tree that
tests/unit/test_kernel_deps_tvmffi.c loads from C — kernels/scaled_rmsnorm (kernel-depends:
hubkern/rmsnorm v1) and the RMSNorm CPU variant staged by kernels/rmsnorm, both published on a
`hubkern serve` mirror. kernels resolves the tree, loads the dependency first, and the dependent's
__init__.py gets it with get_kernel_dep and passes its tvm-ffi function to the native code. Then
hubkern loads the dependent and its dependency from the cache that kernels filled."""

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import BUILD_DIR as BUILD, Server, hubkern_bin, kernels_built, publish  # noqa: E402
from hk_serve_helpers import python_clients_env as clean_env  # noqa: E402


PY = r"""
import sys
import numpy as np
import kernels
k = kernels.get_kernel("hubkern/scaled-rmsnorm", version=1, backend="cpu")
rng = np.random.default_rng(1)
x = rng.standard_normal((5, 777), dtype=np.float32)
w = rng.standard_normal(777, dtype=np.float32)
out = np.empty_like(x)
k.scaled_rms_norm(out, x, w, 3.0, 1e-6)
xd = x.astype(np.float64)
ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * w * 3.0
assert np.allclose(out, ref, rtol=1e-5, atol=1e-5), abs(out - ref).max()
names = sorted(l.metadata.name.python_name for l in kernels.get_loaded_kernels())
print(" ".join(names))
"""


def test_kernels_loads_the_tree_and_hubkern_loads_its_cache(tmp_path):
    if not kernels_built():
        pytest.skip("this build has HK_BUILD_KERNELS=OFF: no staged kernels")
    importlib.import_module("numpy")
    store = tmp_path / "store"
    publish(BUILD / "kernels" / "rmsnorm" / "hub", "hubkern/rmsnorm", "v1", store)
    publish(BUILD / "kernels" / "scaled_rmsnorm" / "hub", "hubkern/scaled-rmsnorm", "v1", store)
    with Server(store, "--trust", "hubkern") as srv:
        home = tmp_path / "hf"
        p = subprocess.run([sys.executable, "-c", PY], capture_output=True, text=True, timeout=300,
                           env=clean_env(HF_ENDPOINT=srv.url, HF_HOME=str(home)))
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == ["rmsnorm", "scaled_rmsnorm"]
        # hubkern loads the dependent and its dependency from the cache kernels filled: every file is
        # there (kernels downloads by commit and writes no refs/v1, so the versions are asked online)
        r = subprocess.run([hubkern_bin(), "load", "hubkern/scaled-rmsnorm", "--version", "1", "--backend", "cpu",
                            "--json", "-v"], capture_output=True, text=True, timeout=120,
                           env=clean_env(HF_ENDPOINT=srv.url, HF_HOME=str(home)))
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["functions"] == ["scaled_rms_norm"] and doc["path"].startswith(str(home)), doc
        assert [d["repo_id"] for d in doc["dependencies"]] == ["hubkern/rmsnorm"], doc
        assert "/resolve/" not in r.stderr  # nothing downloaded again
