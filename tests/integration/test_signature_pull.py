"""Signatures wired into pulls and loads, end to end and offline: a test Sigstore of our own
(tests/sigstore/testsigstore.py) signs the RMSNorm CPU variant's metadata.json the way cosign
sign-blob does; the signed variant is published into a loopback mirror (`hubkern publish`,
`hubkern serve`) as kernels-community repos, one per case. A good signature pulls and loads under
require (and by default, which is require for kernels-community); tampered metadata, a wrong
workflow identity, a certificate expired at the logged time, a bad inclusion proof and a missing
bundle are each refused with their own message, and nothing of the variant is published into the
snapshot; a warm load does not verify again (signature receipt); `hubkern verify-signature` gives
the same outcomes as `kernels verify-signature` (pointed at the test trust root by replacing
sigstore's Verifier.production, since kernels has no option for it)."""
import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sigstore"))
from hk_serve_helpers import SOURCE_DIR, Server, hubkern_bin, publish  # noqa: E402
from testsigstore import FakeSigstore  # noqa: E402

BUILD = pathlib.Path(os.environ.get("HK_BUILD_DIR", SOURCE_DIR / "build"))
VARIANT = "tvm-ffi01-cpu-x86_64-linux"
SRC = BUILD / "kernels" / "rmsnorm" / "hub" / "build" / VARIANT
BAD_WF = "https://github.com/huggingface/kernels-community/.github/workflows/evil.yaml@refs/heads/main"


def flip_b64(s, at=10):
    raw = bytearray(base64.b64decode(s))
    raw[at % len(raw)] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def make_variant(tmp, name, ts, how):
    src = tmp / f"src-{name}"
    vdir = src / "build" / VARIANT
    shutil.copytree(SRC, vdir)
    meta = (vdir / "metadata.json").read_bytes()
    bundle = None
    if how == "good":
        bundle, _ = ts.sign_blob(meta)
    elif how == "tampered":  # signed, then metadata.json edited (its digest still matches the files)
        bundle, _ = ts.sign_blob(meta)
        (vdir / "metadata.json").write_bytes(meta.replace(b'"Apache-2.0"', b'"MIT"'))
    elif how == "wrong-workflow":
        bundle, _ = ts.sign_blob(meta, identity=BAD_WF)
    elif how == "expired":
        bundle, _ = ts.sign_blob(meta, integrated_delta=3600)
    elif how == "bad-proof":
        bundle, _ = ts.sign_blob(meta)
        hs = bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"]
        hs[0] = flip_b64(hs[0])
    if bundle is not None:
        (vdir / "metadata.json.sigstore").write_text(json.dumps(bundle))
    return src


CASES = ["good", "tampered", "wrong-workflow", "expired", "bad-proof", "unsigned"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not (SRC / "metadata.json").is_file():
        pytest.skip("no staged RMSNorm CPU variant (HK_BUILD_KERNELS=OFF)")
    tmp = tmp_path_factory.mktemp("sigwire")
    ts = FakeSigstore()
    root = ts.write_trusted_root(str(tmp / "trusted_root.json"))
    store = tmp / "store"
    for c in CASES:
        publish(make_variant(tmp, c, ts, c), f"kernels-community/rms-{c}", "v1", store)
    srv = Server(store, "--trust", "kernels-community")
    yield dict(tmp=tmp, root=root, srv=srv, store=store, ts=ts)
    srv.stop()


def env_for(world, cache, **extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("HF_", "HUGGING", "KERNELS_", "HUBKERN_SIG", "LOCAL_KERNELS"))}
    e.update(HF_ENDPOINT=world["srv"].url, HF_HUB_CACHE=str(cache), HUBKERN_SIGSTORE_TRUST_ROOT=world["root"],
             HUBKERN_RETRY_BASE_MS="1", XDG_CONFIG_HOME=str(world["tmp"] / "xdg"))
    e.update({k: str(v) for k, v in extra.items()})
    return e


def hk(*args, env):
    return subprocess.run([hubkern_bin(), *map(str, args)], capture_output=True, text=True, env=env)


def published(cache, repo):
    d = pathlib.Path(cache) / ("kernels--" + repo.replace("/", "--"))
    return list(d.glob(f"snapshots/*/build/{VARIANT}")), (d / "refs" / "v1").exists()


def test_signed_variant_pulls_and_loads_under_require(world, tmp_path):
    env = env_for(world, tmp_path / "c")
    p = hk("pull", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", "--signature", "require", env=env)
    assert p.returncode == 0, p.stderr
    assert (pathlib.Path(p.stdout.strip()) / "metadata.json.sigstore").is_file()
    p = hk("load", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", "--signature", "require",
           "--call", "--json", env=env)
    assert p.returncode == 0, p.stderr
    # the default for kernels-community is require, and it passes too (cold, in another cache)
    p = hk("load", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", env=env_for(world, tmp_path / "d"))
    assert p.returncode == 0, p.stderr


REFUSALS = {
    "tampered": "signature failed: bundle message digest does not match the artifact",
    "wrong-workflow": "identity policy failed: build signer URI",
    "expired": "certificate has expired",
    "bad-proof": "inclusion proof failed",
    "unsigned": "has no metadata.json.sigstore",
}


@pytest.mark.parametrize("case", list(REFUSALS))
@pytest.mark.parametrize("cmd", ["pull", "load"])
def test_bad_signature_is_refused_and_nothing_published(world, tmp_path, case, cmd):
    cache = tmp_path / "c"
    repo = f"kernels-community/rms-{case}"
    p = hk(cmd, repo, "--version", 1, "--backend", "cpu", "--signature", "require", env=env_for(world, cache))
    assert p.returncode != 0
    assert "[HK_ERR_SIGNATURE]" in p.stderr, p.stderr
    assert REFUSALS[case] in p.stderr, p.stderr
    assert "nothing of it was published to the snapshot" in p.stderr, p.stderr
    if case == "wrong-workflow":
        assert "signer=" + BAD_WF in p.stderr, p.stderr  # the identity seen
    variants, ref = published(cache, repo)
    assert variants == [] and not ref, (variants, ref)
    assert not list(pathlib.Path(cache).glob("kernels--*/.hk-staging/*")), "a stage was left behind"


@pytest.mark.parametrize("case", ["tampered", "wrong-workflow"])
def test_present_but_failing_is_refused_even_under_warn(world, tmp_path, case):
    p = hk("pull", f"kernels-community/rms-{case}", "--version", 1, "--backend", "cpu", "--signature", "warn",
           env=env_for(world, tmp_path / "c"))
    assert p.returncode != 0 and REFUSALS[case] in p.stderr, p.stderr


def test_missing_bundle_under_warn_loads_with_a_warning(world, tmp_path):
    p = hk("load", "kernels-community/rms-unsigned", "--version", 1, "--backend", "cpu", "--signature", "warn",
           env=env_for(world, tmp_path / "c"))
    assert p.returncode == 0, p.stderr
    assert "warning: build/" + VARIANT + " of kernels-community/rms-unsigned" in p.stderr
    assert "is not signed (no metadata.json.sigstore)" in p.stderr
    p = hk("load", "kernels-community/rms-unsigned", "--version", 1, "--backend", "cpu", "--signature", "off",
           env=env_for(world, tmp_path / "c"))
    assert p.returncode == 0 and "not signed" not in p.stderr, p.stderr
    # -q hides the warning (cold, in another cache), not the error that require makes of it
    for cmd in ("pull", "load"):
        p = hk(cmd, "-q", "kernels-community/rms-unsigned", "--version", 1, "--backend", "cpu", "--signature", "warn",
               env=env_for(world, tmp_path / f"q-{cmd}"))
        assert p.returncode == 0 and p.stderr == "", p.stderr
    p = hk("pull", "-q", "kernels-community/rms-unsigned", "--version", 1, "--backend", "cpu", "--signature", "require",
           env=env_for(world, tmp_path / "q-require"))
    assert p.returncode != 0 and "has no metadata.json.sigstore" in p.stderr, p.stderr


def test_help_lists_the_signature_modes():
    for cmd in ("pull", "load"):
        p = subprocess.run([hubkern_bin(), cmd, "--help"], capture_output=True, text=True)
        lines = p.stdout.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("--signature"))
        entry = lines[at]
        for ln in lines[at + 1:]:  # the help text wraps within its column
            if not ln.startswith(" " * 29):
                break
            entry += " " + ln.strip()
        assert "require, warn or off" in entry, entry


def test_repo_no_policy_covers_defaults_to_warn(world, tmp_path):
    store = world["tmp"] / "store2"
    publish(make_variant(world["tmp"], "other", world["ts"], "unsigned"), "someone/rms", "v1", store)
    with Server(store, "--trust", "someone") as srv:
        env = env_for(world, tmp_path / "c", HF_ENDPOINT=srv.url)
        p = hk("pull", "someone/rms", "--version", 1, "--backend", "cpu", env=env)
        assert p.returncode == 0 and "is not signed" in p.stderr, p.stderr
        p = hk("pull", "someone/rms", "--version", 1, "--backend", "cpu", env=dict(env, HUBKERN_SIGNATURE="require"))
        assert p.returncode != 0 and "has no metadata.json.sigstore" in p.stderr, p.stderr


def test_policy_file_covers_an_org(world, tmp_path):
    """A company signs its own kernels: its policy file makes its org require its workflow."""
    ts = world["ts"]
    store = world["tmp"] / "store3"
    corp_repo = "https://github.com/mycorp/kernels"
    corp_wf = corp_repo + "/.github/workflows/build.yaml@refs/heads/main"
    src = make_variant(world["tmp"], "corp", ts, "unsigned")
    meta = (src / "build" / VARIANT / "metadata.json").read_bytes()
    bundle, _ = ts.sign_blob(meta, identity=corp_wf, repo=corp_repo)
    (src / "build" / VARIANT / "metadata.json.sigstore").write_text(json.dumps(bundle))
    publish(src, "mycorp/rms", "v1", store)
    pol = tmp_path / "policies.json"
    pol.write_text(json.dumps({"policies": [{"hub_org": "mycorp", "issuer": "https://token.actions.githubusercontent.com",
                                              "source_repository": corp_repo, "build_signer_uris": [corp_wf]}]}))
    with Server(store, "--trust", "mycorp") as srv:
        env = env_for(world, tmp_path / "c", HF_ENDPOINT=srv.url)
        p = hk("pull", "mycorp/rms", "--version", 1, "--backend", "cpu", "--signature", "require", env=env)
        assert p.returncode != 0 and "identity policy failed" in p.stderr, p.stderr  # kernels' policy only
        p = hk("pull", "mycorp/rms", "--version", 1, "--backend", "cpu",
               env=dict(env, HUBKERN_SIGNATURE_POLICIES=str(pol)))
        assert p.returncode == 0, p.stderr


def test_warm_load_does_not_redo_the_crypto(world, tmp_path):
    env = env_for(world, tmp_path / "c", HUBKERN_VERBOSE=2)
    args = ["load", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", "--signature", "require"]
    t0 = time.perf_counter()
    cold = hk(*args, env=env)
    t1 = time.perf_counter()
    warm = hk(*args, env=env)
    t2 = time.perf_counter()
    off = hk(*args, env=dict(env, HF_HUB_OFFLINE="1"))
    assert cold.returncode == 0 and warm.returncode == 0 and off.returncode == 0, (cold.stderr, warm.stderr, off.stderr)
    assert "Sigstore bundle verified" in cold.stderr
    for p in (warm, off):
        assert "Sigstore bundle verified" not in p.stderr and "signature receipt vouches" in p.stderr, p.stderr
    print(f"cold load {1000 * (t1 - t0):.1f} ms, warm load {1000 * (t2 - t1):.1f} ms")
    # HUBKERN_VERIFY=always trusts no receipt
    again = hk(*args, env=dict(env, HUBKERN_VERIFY="always"))
    assert again.returncode == 0 and "Sigstore bundle verified" in again.stderr
    # a changed bundle in the cache is verified again, and refused
    snap = pathlib.Path(warm.stderr and tmp_path / "c").glob(f"kernels--kernels-community--rms-good/snapshots/*/build/{VARIANT}")
    vdir = next(iter(snap))
    link = vdir / "metadata.json.sigstore"
    b = json.loads(link.read_text())
    b["messageSignature"]["signature"] = flip_b64(b["messageSignature"]["signature"], at=20)
    link.unlink()
    link.write_text(json.dumps(b))
    bad = hk(*args, env=env)
    assert bad.returncode != 0 and "[HK_ERR_SIGNATURE]" in bad.stderr, bad.stderr


def kernels_verify(world, repo, cache, *extra):
    """`kernels verify-signature` with sigstore's production verifier replaced by one over the test
    trust root (kernels 0.17.2 has no option for it)."""
    code = ("import sys\n"
            "from sigstore.models import TrustedRoot\n"
            "from sigstore.verify import Verifier\n"
            f"Verifier.production = classmethod(lambda cls, offline=False: Verifier(trusted_root=TrustedRoot.from_file({world['root']!r})))\n"
            "from kernels.cli import main\n"
            f"sys.argv = ['kernels', 'verify-signature', *{list(extra)!r}, {repo!r}, '1']\n"
            "main()\n")
    env = env_for(world, cache)
    env["HF_HOME"] = str(cache) + "-hf"
    for k in ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("case,extra,ok", [("good", [], True), ("unsigned", [], False),
                                          ("unsigned", ["--filter-unsigned"], True),
                                          ("wrong-workflow", [], False), ("tampered", [], False),
                                          ("expired", [], False), ("bad-proof", [], False)])
def test_verify_signature_matches_kernels(world, tmp_path, case, extra, ok):
    repo = f"kernels-community/rms-{case}"
    extra = ["--all-variants", *extra]  # (the repos hold one CPU variant; this machine may prefer CUDA)
    mine = hk("verify-signature", repo, "--version", 1, *extra, env=env_for(world, tmp_path / "hk"))
    theirs = kernels_verify(world, repo, tmp_path / "py", *extra)
    assert (mine.returncode == 0) == ok, mine.stdout + mine.stderr
    assert (theirs.returncode == 0) == ok, theirs.stdout + theirs.stderr
    # the same first line (outcome and variant), kernels' words
    first = lambda s: s.strip().splitlines()[0] if s.strip() else ""  # noqa: E731
    assert first(mine.stdout) == first(theirs.stdout), (mine.stdout, theirs.stdout, theirs.stderr)
    j = hk("verify-signature", repo, "--version", 1, *extra, "--json", env=env_for(world, tmp_path / "hk"))
    doc = json.loads(j.stdout)
    assert doc["ok"] == ok and doc["variants"][0]["variant"] == VARIANT


def test_trust_root_commands(world, tmp_path):
    env = env_for(world, tmp_path / "c")
    p = hk("trust-root", "path", env=env)
    assert p.returncode == 0 and p.stdout.split("\t") == [world["root"], "HUBKERN_SIGSTORE_TRUST_ROOT\n"]
    env.pop("HUBKERN_SIGSTORE_TRUST_ROOT")
    p = hk("trust-root", "path", env=env)
    # the build tree's copy, found as an install's is (bin/../share), not a compiled-in source path
    shipped = os.path.realpath(BUILD / "share" / "hubkern" / "sigstore" / "trusted_root.json")
    assert p.returncode == 0 and p.stdout.split("\t") == [shipped, "shipped\n"], p.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    p = hk("trust-root", "install", bad, env=env)
    assert p.returncode != 0 and "nothing was installed" in p.stderr, p.stderr
    p = hk("trust-root", "install", world["root"], env=env)
    assert p.returncode == 0, p.stderr
    p = hk("trust-root", "path", env=env)
    assert p.stdout.strip().endswith("installed") and p.stdout.startswith(str(tmp_path.parent)) or "xdg" in p.stdout
    show = json.loads(hk("trust-root", "show", env=env).stdout)
    assert show["certificate_authorities"][0]["url"] == "https://fulcio.test.hubkern"
    # with the installed test root and no variable, the signed variant verifies
    p = hk("pull", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", env=env)
    assert p.returncode == 0, p.stderr
    shutil.rmtree(world["tmp"] / "xdg")


def test_bundle_carries_the_sigstore_files(world, tmp_path):
    env = env_for(world, tmp_path / "c")
    assert hk("pull", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", env=env).returncode == 0
    tar = tmp_path / "b.tar"
    p = hk("bundle", "create", tar, "kernels-community/rms-good", "--cache", tmp_path / "c", env=env)
    assert p.returncode == 0, p.stderr
    names = subprocess.run(["tar", "tf", tar], capture_output=True, text=True).stdout
    assert f"build/{VARIANT}/metadata.json.sigstore" in names, names
    # and a load from the extracted cache, offline, still verifies it
    p = hk("bundle", "extract", tar, "--cache", tmp_path / "x", env=env)
    assert p.returncode == 0, p.stderr
    p = hk("load", "kernels-community/rms-good", "--version", 1, "--backend", "cpu", "--signature", "require",
           env=env_for(world, tmp_path / "x", HF_HUB_OFFLINE="1"))
    assert p.returncode == 0, p.stderr


# ---- the signature mode belongs to the request (issue 21: SIG1, SIG2, L2) ----------------------
# A hostile mirror cannot lower the mode in force by serving an unsigned file that points elsewhere
# (kernel-status.toml) or by declaring an unsigned dependency, nor by spelling the org differently.

def with_deps(src, deps, ts):
    """src's variant declaring kernel-depends `deps`, signed again (ts) after the edit."""
    vdir = src / "build" / VARIANT
    meta = json.loads((vdir / "metadata.json").read_text())
    meta["kernel-depends"] = deps
    raw = json.dumps(meta).encode()
    (vdir / "metadata.json").write_bytes(raw)
    bundle, _ = ts.sign_blob(raw)
    (vdir / "metadata.json.sigstore").write_text(json.dumps(bundle))
    return src


@pytest.fixture(scope="module")
def hostile(world):
    tmp, ts = world["tmp"], world["ts"]
    store = tmp / "store-hostile"
    publish(make_variant(tmp, "h-unsigned", ts, "unsigned"), "other/unsigned", "v1", store)
    publish(make_variant(tmp, "h-signed", ts, "good"), "other/signed", "v1", store)
    for name, dest in (("redir-unsigned", "other/unsigned"), ("redir-signed", "other/signed")):
        d = tmp / f"h-{name}"
        d.mkdir()
        (d / "kernel-status.toml").write_text(f'kind = "redirect"\ndestination = "{dest}"\nrevision = "v1"\n')
        publish(d, f"kernels-community/{name}", "v1", store)
    publish(make_variant(tmp, "h-case", ts, "unsigned"), "Kernels-Community/rms-case", "v1", store)
    publish(with_deps(make_variant(tmp, "h-dep", ts, "good"), [{"repo-id": "other/unsigned", "version": 1}], ts),
            "kernels-community/with-unsigned-dep", "v1", store)
    publish(with_deps(make_variant(tmp, "h-dep-o", ts, "unsigned"), [{"repo-id": "other/unsigned", "version": 1}], ts),
            "other/with-unsigned-dep", "v1", store)
    with Server(store, "--trust", "kernels-community", "--trust", "other", "--trust", "Kernels-Community") as srv:
        yield dict(world, srv=srv)


@pytest.mark.parametrize("cmd", ["pull", "load"])
def test_redirect_out_of_a_policy_org_keeps_require(hostile, tmp_path, cmd):
    """SIG1: kernels-community/x holding only an (unsigned) kernel-status.toml that points at an
    unsigned repo of another org is refused under the default mode, as the variant would be under
    kernels-community itself; a destination that satisfies a policy still loads."""
    cache = tmp_path / "c"
    p = hk(cmd, "kernels-community/redir-unsigned", "--version", 1, "--backend", "cpu", env=env_for(hostile, cache))
    assert p.returncode != 0, p.stderr
    assert "[HK_ERR_SIGNATURE]" in p.stderr and "other/unsigned" in p.stderr, p.stderr
    assert "has no metadata.json.sigstore" in p.stderr, p.stderr
    assert published(cache, "other/unsigned") == ([], False)
    p = hk(cmd, "kernels-community/redir-signed", "--version", 1, "--backend", "cpu", env=env_for(hostile, cache))
    assert p.returncode == 0, p.stderr
    # the caller's explicit mode is the caller's choice, and is kept as asked
    p = hk(cmd, "kernels-community/redir-unsigned", "--version", 1, "--backend", "cpu", "--signature", "warn",
           env=env_for(hostile, tmp_path / "w"))
    assert p.returncode == 0 and "is not signed" in p.stderr, p.stderr


def test_org_policy_match_ignores_case(hostile, tmp_path):
    """SIG2: the Hub treats repo ids case-insensitively, so Kernels-Community/x is kernels-community's."""
    p = hk("pull", "Kernels-Community/rms-case", "--version", 1, "--backend", "cpu", env=env_for(hostile, tmp_path / "c"))
    assert p.returncode != 0 and "[HK_ERR_SIGNATURE]" in p.stderr, p.stderr
    assert "has no metadata.json.sigstore" in p.stderr, p.stderr


@pytest.mark.parametrize("cmd", ["pull", "load"])
def test_dependency_inherits_the_mode(hostile, tmp_path, cmd):
    """L2: a signed kernels-community root (require by default) cannot bring in an unsigned
    dependency of another org; nor can an explicit --signature require on any root."""
    p = hk(cmd, "kernels-community/with-unsigned-dep", "--version", 1, "--backend", "cpu",
           env=env_for(hostile, tmp_path / "c"))
    assert p.returncode != 0, p.stderr
    assert "[HK_ERR_SIGNATURE]" in p.stderr and "other/unsigned" in p.stderr, p.stderr
    assert published(tmp_path / "c", "other/unsigned") == ([], False)
    p = hk(cmd, "other/with-unsigned-dep", "--version", 1, "--backend", "cpu", "--signature", "require",
           env=env_for(hostile, tmp_path / "d"))
    assert p.returncode != 0 and "[HK_ERR_SIGNATURE]" in p.stderr, p.stderr
    # under warn both load, with the warning naming the dependency
    p = hk(cmd, "other/with-unsigned-dep", "--version", 1, "--backend", "cpu", env=env_for(hostile, tmp_path / "e"))
    assert p.returncode == 0, p.stderr
    assert "of other/unsigned" in p.stderr and "is not signed" in p.stderr, p.stderr
