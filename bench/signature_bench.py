"""Cost of Sigstore verification per load, hubkern beside `kernels verify-signature`, offline.

A test Sigstore (tests/sigstore/testsigstore.py) signs the RMSNorm CPU variant's metadata.json; it
is published into a loopback `hubkern serve` as kernels-community/rms-bench. Measured (median of
--reps runs, wall clock of whole processes unless said otherwise):
  hubkern load, cold (empty cache) and warm (cached, receipts), with --signature require and off:
      the difference is what the signature costs a load; warm+require shows that the receipt
      makes it ~0; HUBKERN_VERIFY=always (no receipts) shows the crypto redone on a warm load;
  hubkern verify-signature (pull + signature + full digest rehash, as kernels' command does);
  kernels verify-signature (the CLI, sigstore's production Verifier replaced by one over the test
      trust root) and kernels.verify.verify_variant in-process (its crypto + digest, no startup).
Usage: python3 bench/signature_bench.py [--reps N] [--json OUT]   (needs a build: HK_BUILD_DIR)"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SRC_DIR = HERE.parent
sys.path.insert(0, str(SRC_DIR / "tests" / "integration"))
sys.path.insert(0, str(SRC_DIR / "tests" / "sigstore"))
from hk_serve_helpers import Server, hubkern_bin, publish  # noqa: E402
from testsigstore import FakeSigstore  # noqa: E402

BUILD = pathlib.Path(os.environ.get("HK_BUILD_DIR", SRC_DIR / "build"))
VARIANT = "tvm-ffi01-cpu-x86_64-linux"
REPO = "kernels-community/rms-bench"


def timed(cmd, env):
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {p.stdout}{p.stderr}")
    return dt


def median_ms(xs):
    return round(1000 * statistics.median(xs), 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ.setdefault("HK_BUILD_DIR", str(BUILD))
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hk-sigbench-"))
    ts = FakeSigstore()
    root = ts.write_trusted_root(str(tmp / "trusted_root.json"))
    src = tmp / "src"
    vdir = src / "build" / VARIANT
    shutil.copytree(BUILD / "kernels" / "rmsnorm" / "hub" / "build" / VARIANT, vdir)
    bundle, _ = ts.sign_blob((vdir / "metadata.json").read_bytes())
    (vdir / "metadata.json.sigstore").write_text(json.dumps(bundle))
    publish(src, REPO, "v1", tmp / "store")
    srv = Server(tmp / "store", "--trust", "kernels-community")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_", "HUBKERN_"))}
    base.update(HF_ENDPOINT=srv.url, HUBKERN_SIGSTORE_TRUST_ROOT=root, HF_HUB_DISABLE_PROGRESS_BARS="1")
    hk = hubkern_bin()
    load = [hk, "load", REPO, "--version", "1", "--backend", "cpu"]
    res = {}
    try:
        for mode in ("require", "off"):
            cold, warm, always = [], [], []
            for i in range(a.reps):
                env = dict(base, HF_HUB_CACHE=str(tmp / f"c-{mode}-{i}"))
                cold.append(timed(load + ["--signature", mode], env))
                warm.append(timed(load + ["--signature", mode], env))
                always.append(timed(load + ["--signature", mode], dict(env, HUBKERN_VERIFY="always")))
            res[f"hubkern load cold, --signature {mode}"] = median_ms(cold)
            res[f"hubkern load warm, --signature {mode}"] = median_ms(warm)
            res[f"hubkern load warm, no receipts, --signature {mode}"] = median_ms(always)
        for k in ("cold", "warm", "warm, no receipts"):
            res[f"signature cost per load, {k}"] = round(res[f"hubkern load {k}, --signature require"]
                                                         - res[f"hubkern load {k}, --signature off"], 2)
        env = dict(base, HF_HUB_CACHE=str(tmp / "c-verify"))
        vs = [timed([hk, "verify-signature", REPO, "--version", "1", "--all-variants"], env) for _ in range(a.reps)]
        res["hubkern verify-signature (warm cache)"] = median_ms(vs)
        patch = ("from sigstore.models import TrustedRoot\nfrom sigstore.verify import Verifier\n"
                 f"Verifier.production = classmethod(lambda cls, offline=False: Verifier(trusted_root=TrustedRoot.from_file({root!r})))\n")
        kenv = dict(base, HF_HOME=str(tmp / "hf"))
        cli = patch + f"import sys\nfrom kernels.cli import main\nsys.argv=['kernels','verify-signature','--all-variants',{REPO!r},'1']\nmain()\n"
        ks = [timed([sys.executable, "-c", cli], kenv) for _ in range(a.reps)]
        res["kernels verify-signature (warm cache)"] = median_ms(ks)
        inproc = patch + (
            "import pathlib, statistics, time, glob\nfrom kernels.verify import verify_variant, VerificationResult\n"
            f"p = pathlib.Path(glob.glob({str(tmp / 'hf')!r} + '/hub/kernels--kernels-community--rms-bench/snapshots/*/build/{VARIANT}')[0])\n"
            "assert isinstance(verify_variant(p), VerificationResult.Success)\n"
            f"ts = []\nfor _ in range({a.reps}):\n    t = time.perf_counter(); verify_variant(p); ts.append(time.perf_counter() - t)\n"
            "print(statistics.median(ts))\n")
        out = subprocess.run([sys.executable, "-c", inproc], capture_output=True, text=True, env=kenv)
        if out.returncode == 0:
            res["kernels verify_variant in-process"] = round(1000 * float(out.stdout.strip().splitlines()[-1]), 2)
        else:
            res["kernels verify_variant in-process"] = "failed: " + out.stderr.strip().splitlines()[-1]
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    width = max(map(len, res))
    for k, v in res.items():
        print(f"{k:<{width}}  {v} ms" if not isinstance(v, str) else f"{k:<{width}}  {v}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
