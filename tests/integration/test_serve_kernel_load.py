"""End to end with our own kernel: the RMSNorm CPU tvm-ffi variant staged by the build
(<build>/kernels/rmsnorm/hub/build/<variant>/) is published with `hubkern publish`, served by
`hubkern serve`, fetched and loaded by the real Python `kernels.get_kernel`, and called on numpy
data; the result must match a float64 reference."""

import importlib
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import BUILD_DIR as BUILD, Server, kernels_built, publish  # noqa: E402

HUB = BUILD / "kernels" / "rmsnorm" / "hub"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not kernels_built():
        pytest.skip("this build has HK_BUILD_KERNELS=OFF: no staged kernel to publish")
    variants = sorted(p.name for p in (HUB / "build").glob("tvm-ffi*-cpu-*"))
    assert variants, f"the build did not stage the RMSNorm CPU tvm-ffi variant under {HUB}"
    tmp = tmp_path_factory.mktemp("kload")
    store = tmp / "store"
    commit = publish(HUB, "hubkern/rmsnorm", "v1", store)
    srv = Server(store, "--trust", "hubkern", "--access-log")
    for k in list(os.environ):
        if k.startswith(("HF_", "HUGGING", "KERNELS_")):
            del os.environ[k]
    os.environ.update(HF_ENDPOINT=srv.url, HF_HOME=str(tmp / "hf_home"), HF_HUB_DISABLE_XET="1",
                      HF_HUB_DISABLE_PROGRESS_BARS="1")
    kernels = importlib.import_module("kernels")
    yield dict(kernels=kernels, srv=srv, commit=commit, variant=variants[0], tmp=tmp)
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


def test_get_kernel_through_the_mirror_and_call_it(env):
    np = importlib.import_module("numpy")
    k = env["kernels"].get_kernel("hubkern/rmsnorm", version=1, backend="cpu")
    path = pathlib.Path(k.__file__).parent
    assert path.name == env["variant"] and path.parent.parent.name == env["commit"], path
    # every file the client holds equals the staged build output
    for f in (HUB / "build" / env["variant"]).iterdir():
        assert (path / f.name).read_bytes() == f.read_bytes(), f.name
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 1024), dtype=np.float32)
    w = rng.standard_normal(1024, dtype=np.float32)
    out = np.empty_like(x)
    k.rms_norm(out, x, w, 1e-6)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * w.astype(np.float64)
    assert np.max(np.abs(out - ref)) < 1e-4
    assert env["srv"].wait_log('"GET /api/organizations/hubkern/overview" 200')
