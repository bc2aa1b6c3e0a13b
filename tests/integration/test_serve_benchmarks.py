"""Benchmark submissions on the mirror: kernels 0.17.2's own upload (kernels/cli/benchmark.py
submit_benchmark) against `hubkern serve`, stored and listed (GET, `hubkern benchmarks`), and the
refusals: no token, a read-only token, a token for another namespace, a mirror without tokens, too
large, malformed JSON, the wrong schema, a path-traversing repo id; nothing is kept of a refused
submission; the per-repo quota evicts the oldest.

`kernels benchmark --upload` itself needs torch (and tabulate) to run the benchmark and exits
without them, and torch is not installed here; so the upload is driven through the installed
package's own objects: the RMSNorm CPU tvm-ffi variant is loaded with kernels.get_kernel from the
mirror, timed, and the timings go into kernels' BenchmarkResult / TimingResults (with
collect_machine_info and get_kernel_sha_from_build_name), which submit_benchmark posts. kernels
posts to https://huggingface.co/api/kernels/{repo}/benchmarks whatever HF_ENDPOINT says; the driver
routes that host to the loopback mirror with huggingface_hub's set_client_factory."""

import json
import os
import pathlib
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hk_serve_helpers import BUILD_DIR as BUILD, Server, hubkern_bin, kernels_built, publish  # noqa: E402
from hk_serve_helpers import python_clients_env as clean_env  # noqa: E402

HUB = BUILD / "kernels" / "rmsnorm" / "hub"
TOKEN = "bench-secret"

DRIVER = r"""
import hashlib, sys, time
import httpx2
import numpy as np
from huggingface_hub.utils import set_client_factory
import kernels
from kernels.cli.benchmark import (BenchmarkResult, TimingResults, _calculate_iqr_and_outliers,
                                   collect_machine_info, get_kernel_sha_from_build_name, submit_benchmark)

mirror = httpx2.URL(sys.argv[1])

def to_mirror(request):  # kernels posts to huggingface.co, not to HF_ENDPOINT
    if request.url.host == "huggingface.co":
        request.url = request.url.copy_with(scheme=mirror.scheme, host=mirror.host, port=mirror.port)
        request.headers["Host"] = f"{mirror.host}:{mirror.port}"

set_client_factory(lambda: httpx2.Client(event_hooks={"request": [to_mirror]}, follow_redirects=True, timeout=60))

k = kernels.get_kernel("hubkern/rmsnorm", version=1, backend="cpu")
rng = np.random.default_rng(0)
timings = {}
for rows, hidden in ((8, 1024), (32, 4096)):
    x = rng.standard_normal((rows, hidden), dtype=np.float32)
    w = rng.standard_normal(hidden, dtype=np.float32)
    out = np.empty_like(x)
    k.rms_norm(out, x, w, 1e-6)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * w
    ok = bool(np.allclose(out, ref, atol=1e-2))
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        k.rms_norm(out, x, w, 1e-6)
        times.append((time.perf_counter() - t0) * 1000)
    mean = sum(times) / len(times)
    std = (sum((t - mean) ** 2 for t in times) / len(times)) ** 0.5
    q1, q3, iqr, outliers = _calculate_iqr_and_outliers(times)
    timings[f"RmsNorm.{rows}x{hidden}"] = TimingResults(
        mean_ms=round(mean, 4), std_ms=round(std, 4), min_ms=round(min(times), 4), max_ms=round(max(times), 4),
        iterations=len(times), q1_ms=round(q1, 4), q3_ms=round(q3, 4), iqr_ms=round(iqr, 4), outliers=outliers,
        verified=ok)
result = BenchmarkResult(timing_results=timings, machine_info=collect_machine_info(),
                         kernel_commit_sha=get_kernel_sha_from_build_name(k), benchmark_script_path="benchmarks",
                         benchmark_script_sha=hashlib.sha256(sys.argv[2].encode()).hexdigest())
submit_benchmark(repo_id="hubkern/rmsnorm", result=result)
import json
print(json.dumps(result.to_payload()))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not kernels_built():
        pytest.skip("this build has HK_BUILD_KERNELS=OFF: no staged kernel to benchmark")
    tmp = tmp_path_factory.mktemp("bench")
    store = tmp / "store"
    publish(HUB, "hubkern/rmsnorm", "v1", store)
    publish(HUB, "other/rmsnorm", "v1", store)
    srv = Server(store, "--trust", "hubkern", "--token", f"{TOKEN}:hubkern:write", "--token", "other-token:other:write",
                 "--token", "read-token:hubkern", "--token", "read-all-token",
                 "--benchmark-max-bytes", "65536", "--access-log")
    yield dict(srv=srv, tmp=tmp, store=store, dir=store / "kernels--hubkern--rmsnorm" / "hubkern-benchmarks")
    assert srv.stop() == 0, "\n".join(srv.log_lines[-60:])


def request(url, method="GET", body=None, token=TOKEN, ctype="application/json"):
    req = urllib.request.Request(url, data=body, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None and ctype:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def stored(e):
    return sorted(p.name for p in e["dir"].iterdir()) if e["dir"].exists() else []


def test_kernels_upload_is_stored_and_listed(env):
    p = subprocess.run([sys.executable, "-c", DRIVER, env["srv"].url, DRIVER], capture_output=True, text=True, timeout=300,
                       env=clean_env(HF_ENDPOINT=env["srv"].url, HF_TOKEN=TOKEN, HF_HOME=str(env["tmp"] / "hf")))
    assert p.returncode == 0, p.stderr + "\n".join(env["srv"].log_lines[-20:])
    sent = json.loads(p.stdout.strip().splitlines()[-1])
    files = stored(env)
    assert len(files) == 1 and re.fullmatch(r"\d{19}-[0-9a-f]{8}\.json", files[0]), files
    rec = json.loads((env["dir"] / files[0]).read_text())
    assert {k: v for k, v in rec.items() if k not in ("id", "createdAt", "repoId")} == sent
    assert rec["repoId"] == "hubkern/rmsnorm" and rec["id"] + ".json" == files[0]
    assert all(r["verified"] for r in sent["results"]) and len(sent["results"]) == 2
    # the store is still a cache huggingface_hub scans without a warning
    from huggingface_hub import scan_cache_dir
    info = scan_cache_dir(env["store"])
    assert not info.warnings, info.warnings
    # listed over HTTP and by `hubkern benchmarks`
    st, body, _ = request(env["srv"].url + "/api/kernels/hubkern/rmsnorm/benchmarks")
    assert st == 200 and json.loads(body) == [rec]
    r = subprocess.run([hubkern_bin(), "benchmarks", "hubkern/rmsnorm", "--json"], capture_output=True, text=True,
                       env=clean_env(HF_ENDPOINT=env["srv"].url, HF_TOKEN=TOKEN), timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["benchmarks"] == [rec], r.stderr
    r = subprocess.run([hubkern_bin(), "benchmarks", "hubkern/rmsnorm"], capture_output=True, text=True,
                       env=clean_env(HF_ENDPOINT=env["srv"].url, HF_TOKEN=TOKEN), timeout=60)
    assert r.returncode == 0 and rec["id"] in r.stdout and "RmsNorm.8x1024" in r.stdout, r.stderr


def payload(n=1, **over):
    p = {"results": [{"workload": f"W.w{i}", "timingResults": {"mean_ms": 1.0, "std_ms": 0.1, "min_ms": 0.9,
                                                                  "max_ms": 1.2, "q1_ms": 0.95, "q3_ms": 1.05,
                                                                  "iqr_ms": 0.1, "outliers": 0, "iterations": 10},
                      "verified": True} for i in range(n)],
         "machineInfo": {"gpu": "N/A", "backend": "CPU", "pytorchVersion": "N/A", "os": "Linux", "cpu": "x86_64"},
         "kernelCommitSha": "abc1234", "benchmarkScriptPath": "benchmarks", "benchmarkScriptSha": "0" * 64}
    p.update(over)
    return p


def test_listing_newest_first_with_pages(env):
    url = env["srv"].url + "/api/kernels/hubkern/rmsnorm/benchmarks"
    ids = []
    for i in range(3):
        st, body, _ = request(url, "POST", json.dumps(payload(kernelCommitSha=f"k{i}")).encode())
        assert st == 200, body
        ids.append(json.loads(body)["id"])
    st, body, hdr = request(url + "?limit=2")
    page = json.loads(body)
    assert st == 200 and [r["id"] for r in page] == [ids[2], ids[1]]
    nxt = re.match(r"<([^>]+)>; rel=\"next\"", hdr["Link"]).group(1)
    assert nxt.startswith("/api/kernels/hubkern/rmsnorm/benchmarks?")  # relative: no --public-url
    st, body, hdr = request(urllib.parse.urljoin(url, nxt))
    assert st == 200 and json.loads(body)[0]["id"] == ids[0]
    r = subprocess.run([hubkern_bin(), "benchmarks", "hubkern/rmsnorm", "--limit", "3", "--json"],
                       capture_output=True, text=True, env=clean_env(HF_ENDPOINT=env["srv"].url, HF_TOKEN=TOKEN))
    assert r.returncode == 0 and [x["id"] for x in json.loads(r.stdout)["benchmarks"]] == ids[::-1], r.stderr
    assert request(url + "?limit=0")[0] == 400 and request(url + "?cursor=../x")[0] == 400


@pytest.mark.parametrize("case", ["no-token", "bad-token", "read-only-token", "read-all-token", "other-namespace", "too-large", "malformed", "trailing",
                                  "not-json-type", "missing-field", "wrong-type", "unknown-field", "min-gt-max",
                                  "zero-iterations", "traversal", "traversal-encoded", "unknown-repo"])
def test_refused_and_nothing_kept(env, case):
    url = env["srv"].url + "/api/kernels/hubkern/rmsnorm/benchmarks"
    good = json.dumps(payload()).encode()
    before = stored(env)
    args = {
        "no-token": (url, good, None, None, 401, "need a token"),
        "bad-token": (url, good, "wrong", None, 401, "Invalid credentials"),
        "read-only-token": (url, good, "read-token", None, 403, "read-only"),
        "read-all-token": (url, good, "read-all-token", None, 403, "read-only"),
        "other-namespace": (url, good, "other-token", None, 403, "may not submit benchmarks for hubkern/rmsnorm"),
        "too-large": (url, json.dumps(payload(400)).encode(), TOKEN, None, 413, "at most 65536 bytes"),
        "malformed": (url, b'{"results": [', TOKEN, None, 400, "Malformed JSON"),
        "trailing": (url, good + b"x", TOKEN, None, 400, "data after the value"),
        "not-json-type": (url, good, TOKEN, "text/plain", 415, "application/json"),
        "missing-field": (url, json.dumps({k: v for k, v in payload().items() if k != "machineInfo"}).encode(), TOKEN,
                          None, 422, "machineInfo: missing"),
        "wrong-type": (url, json.dumps(payload(kernelCommitSha=7)).encode(), TOKEN, None, 422,
                       "kernelCommitSha: must be a string"),
        "unknown-field": (url, json.dumps(payload(extra=1)).encode(), TOKEN, None, 422, "unknown field 'extra'"),
        "min-gt-max": (url, json.dumps(payload(results=[dict(payload()["results"][0], timingResults=dict(
            payload()["results"][0]["timingResults"], min_ms=5.0))])).encode(), TOKEN, None, 422,
            "results[0].timingResults: min_ms must be <= max_ms"),
        "zero-iterations": (url, json.dumps(payload(results=[dict(payload()["results"][0], timingResults=dict(
            payload()["results"][0]["timingResults"], iterations=0))])).encode(), TOKEN, None, 422,
            "iterations: must be > 0"),
        "traversal": (env["srv"].url + "/api/kernels/hubkern/..%2F..%2Fx/benchmarks", good, TOKEN, None, 400,
                      "Invalid repo id"),
        "traversal-encoded": (env["srv"].url + "/api/kernels/%2E%2E/benchmarks", good, TOKEN, None, 400,
                              "Invalid repo id"),
        "unknown-repo": (env["srv"].url + "/api/kernels/hubkern/nope/benchmarks", good, TOKEN, None, 404,
                         "Repository not found"),
    }[case]
    u, body, token, ctype, want, text = args
    st, got, hdr = request(u, "POST", body, token=token, ctype=ctype or "application/json")
    assert st == want, (st, got)
    assert text in json.loads(got)["error"], got
    assert stored(env) == before
    assert not list(env["store"].rglob("*.tmp"))
    assert not (env["store"] / "kernels--hubkern--nope").exists() and not (env["store"].parent / "x").exists()


def test_mirror_without_tokens_refuses_uploads(env, tmp_path):
    store = tmp_path / "store"
    publish(HUB, "hubkern/rmsnorm", "v1", store)
    with Server(store) as srv:
        url = srv.url + "/api/kernels/hubkern/rmsnorm/benchmarks"
        st, got, _ = request(url, "POST", json.dumps(payload()).encode(), token=None)
        assert st == 403 and "started without --token" in json.loads(got)["error"]
        assert request(url)[:2] == (200, b"[]")
    assert not (store / "kernels--hubkern--rmsnorm" / "hubkern-benchmarks").exists()


def test_read_tokens_read_benchmarks(env):
    """B1: reading is not writing. A read token lists (GET) but cannot upload (the refusal cases)."""
    url = env["srv"].url + "/api/kernels/hubkern/rmsnorm/benchmarks"
    for tok in ("read-token", "read-all-token"):
        st, body, _ = request(url, token=tok)
        assert st == 200 and isinstance(json.loads(body), list), (tok, body)


def test_quota_evicts_the_oldest(tmp_path):
    """B1: 232 uploads were all kept. Now at most --benchmark-quota-count submissions and
    --benchmark-quota-bytes bytes per repo stay; a new one is stored and the oldest go."""
    store = tmp_path / "store"
    src = tmp_path / "src"
    src.mkdir()
    (src / "README.md").write_text("x\n")
    publish(src, "q/k", "v1", store)
    publish(src, "q/other", "v1", store)
    d = store / "kernels--q--k" / "hubkern-benchmarks"
    with Server(store, "--token", "w:q:write", "--benchmark-quota-count", 3, "--benchmark-max-bytes", 8192,
                "--access-log") as srv:
        url = srv.url + "/api/kernels/q/k/benchmarks"
        ids = []
        for i in range(7):
            st, body, _ = request(url, "POST", json.dumps(payload(kernelCommitSha=f"k{i}")).encode(), token="w")
            assert st == 200, body
            ids.append(json.loads(body)["id"])
            assert len(list(d.iterdir())) == min(i + 1, 3)
        st, body, _ = request(url, token="w")
        assert [r["id"] for r in json.loads(body)] == ids[:-4:-1]  # the newest three, newest first
        assert srv.wait_log("oldest evicted")
        # another repo's records are its own quota
        st, _, _ = request(srv.url + "/api/kernels/q/other/benchmarks", "POST", json.dumps(payload()).encode(),
                           token="w")
        assert st == 200 and len(list(d.iterdir())) == 3
    # by bytes: each record is ~600 bytes; a 1500-byte quota keeps two
    one = len(json.dumps(payload(kernelCommitSha="k0"))) + 100
    with Server(store, "--token", "w:q:write", "--benchmark-max-bytes", 1024, "--benchmark-quota-bytes", 2 * one + 50) as srv:
        url = srv.url + "/api/kernels/q/k/benchmarks"
        for i in range(4):
            st, body, _ = request(url, "POST", json.dumps(payload(kernelCommitSha=f"b{i}")).encode(), token="w")
            assert st == 200, body
        kept = [json.loads(p.read_text())["kernelCommitSha"] for p in sorted(d.iterdir())]
        assert kept == ["b2", "b3"], kept
        assert sum(p.stat().st_size for p in d.iterdir()) <= 2 * one + 50
    # a quota below the largest accepted submission is refused at start
    r = subprocess.run([hubkern_bin(), "serve", "--cache", str(store), "--port", "0", "--benchmark-max-bytes", "4096",
                        "--benchmark-quota-bytes", "1000"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "below the largest submission" in r.stderr, r.stderr
