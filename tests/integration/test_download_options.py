"""hubkern download --max-workers N (hf download's option): at most N files in transfer at once.

A loopback mirror holds a variant of eight files; a fault proxy in front of it drips each file's
body so that one transfer takes about half a second, and logs when each request arrives. With
--max-workers 1 the files arrive one after another, each after the previous one ended; with
--max-workers 8 they are all asked for together. 0 and values over 64 are usage errors."""
import os
import re
import subprocess

import pytest

from faultproxy import FaultProxy, Rule, make_variant
from hk_serve_helpers import Server, hubkern_bin, publish

VARIANT = "tvm-ffi01-cpu-x86_64-linux"
FILE_GET = r"/resolve/[0-9a-f]{40}/build/" + VARIANT + r"/f\d\.bin"


def env_for(cache):
    e = {k: v for k, v in os.environ.items()
         if k not in ("HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_TOKEN", "HUBKERN_MAX_PARALLEL")}
    e.update(HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS="1", HUBKERN_RETRY_BASE_MS="1")
    return e


def hk(*args, env, check=True):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, env=env, check=check)


@pytest.fixture()
def dripping_mirror(tmp_path):
    src = tmp_path / "src"
    make_variant(str(src), VARIANT, {f"f{i}.bin": bytes([i]) * 4096 for i in range(8)})
    store = tmp_path / "store"
    publish(src, "hubkern/many", "v1", store)
    srv = Server(store, "--trust", "hubkern")
    # each file's 4 KiB in 512-byte steps at 8 KiB/s: about 0.5 s per transfer
    proxy = FaultProxy(srv.url, rules=[Rule("drip", FILE_GET, count=None, chunk=512, rate=8192)])
    proxy.server.socket.listen(64)  # socketserver's backlog of 5 would delay the 6th connect by 1 s
    lock = tmp_path / "kernels.lock"
    hk("lock", "hubkern/many=1", "-o", lock, "--endpoint", srv.url, env=env_for(tmp_path / "lockcache"))
    yield proxy, lock
    proxy.close()
    srv.stop()


def file_get_arrivals(proxy):
    return sorted(e["t"] for e in proxy.requests("GET", FILE_GET))


def test_max_workers_bounds_concurrent_transfers(dripping_mirror, tmp_path):
    proxy, lock = dripping_mirror
    hk("download", "--lock", lock, "--all-variants", "--max-workers", "1", "--endpoint", proxy.url,
       env=env_for(tmp_path / "one"))
    one = file_get_arrivals(proxy)
    assert len(one) == 8
    gaps = [b - a for a, b in zip(one, one[1:])]
    assert min(gaps) > 0.35, gaps  # each file asked for only after the previous one ended

    proxy.log.clear()
    hk("download", "--lock", lock, "--all-variants", "--max-workers", "8", "--endpoint", proxy.url,
       env=env_for(tmp_path / "eight"))
    eight = file_get_arrivals(proxy)
    assert len(eight) == 8
    assert eight[-1] - eight[0] < 0.35, eight  # all in flight together


@pytest.mark.parametrize("value", ["0", "65", "x"])
def test_max_workers_out_of_range_is_a_usage_error(dripping_mirror, tmp_path, value):
    _, lock = dripping_mirror
    p = hk("download", "--lock", lock, "--max-workers", value, env=env_for(tmp_path / "c"), check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "--max-workers" in p.stderr and "try 'hubkern download --help'" in p.stderr, p.stderr
