"""hubkern's Sigstore verifier against a test Sigstore of our own (tests/sigstore/testsigstore.py):
the good bundles (v0.1, v0.2, v0.3 shapes of `cosign sign-blob --bundle` over a metadata.json) are
accepted by hubkern with the kernels default policy and by sigstore-python 4.5.1 with kernels'
DEFAULT_POLICIES and the same trusted_root.json; each attack is refused by both, hubkern naming
the check that failed."""
import base64
import copy
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "sigstore"))
from pyverify import hubkern_verify, python_verify, tool_path  # noqa: E402
from testsigstore import KC_BUILD, KC_REPO, OID_SIGNER_URI, OID_SOURCE_REPO, FakeSigstore, utf8_der  # noqa: E402

from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from kernels.verify import DEFAULT_POLICIES  # noqa: E402
from sigstore.verify import policy  # noqa: E402

METADATA = json.dumps({"version": 1, "digest": "sha256-" + "ab" * 32, "python-depends": []}, indent=2).encode()
ALL_CHECKS_BUT_TSA = (1 << 11) - 1 - 1


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not os.path.exists(tool_path()):
        pytest.skip("hubkern-sigstore-verify not built")
    d = tmp_path_factory.mktemp("sigstore")
    ts = FakeSigstore()
    root = ts.write_trusted_root(str(d / "trusted_root.json"))
    art = d / "metadata.json"
    art.write_bytes(METADATA)
    return ts, d, root, str(art)


def write(d, name, bundle):
    p = d / name
    p.write_text(json.dumps(bundle))
    return str(p)


def both(world, bundle, name, artifact=None):
    ts, d, root, art = world
    art = artifact or art
    bp = write(d, name, bundle)
    hk = hubkern_verify(root, bp, art, extra=["--default-policy"])
    with open(art, "rb") as f:
        py = python_verify(root, json.dumps(bundle).encode(), f.read(), pol=policy.AnyOf(DEFAULT_POLICIES))
    return hk, py


@pytest.mark.parametrize("version", [1, 2, 3])
def test_good_bundles_accepted_by_both(world, version):
    ts = world[0]
    bundle, _ = ts.sign_blob(METADATA, version=version)
    hk, py = both(world, bundle, f"good-v{version}.sigstore")
    assert hk[0], hk[1]
    assert py[0], py[1]
    res = hk[2]
    assert res["issuer"] == "https://token.actions.githubusercontent.com"
    assert res["source_repo"] == "https://github.com/huggingface/kernels-community"
    assert res["signer_uri"].endswith("/.github/workflows/build.yaml@refs/heads/main")
    assert res["bundle_version"] == version
    assert res["integrated_time"] == int(ts.now.timestamp()) + 30
    assert res["checks"] == ALL_CHECKS_BUT_TSA


def flip_b64(s, at=10):
    raw = bytearray(base64.b64decode(s))
    raw[at % len(raw)] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def entry(bundle):
    return bundle["verificationMaterial"]["tlogEntries"][0]


def case_tampered(ts, world):
    bundle, _ = ts.sign_blob(METADATA)
    p = world[1] / "tampered-metadata.json"
    p.write_bytes(METADATA.replace(b"ab", b"cd", 1))
    return bundle, str(p)


def case_tampered_no_digest(ts, world):
    bundle, _ = ts.sign_blob(METADATA)
    del bundle["messageSignature"]["messageDigest"]
    p = world[1] / "tampered-metadata2.json"
    p.write_bytes(METADATA + b" ")
    return bundle, str(p)


def case_wrong_workflow(ts, world):
    bad = "https://github.com/huggingface/kernels-community/.github/workflows/evil.yaml@refs/heads/main"
    return ts.sign_blob(METADATA, identity=bad)[0], None


def case_wrong_repo(ts, world):
    return ts.sign_blob(METADATA, identity="https://github.com/evil/kernels/.github/workflows/build.yaml@refs/heads/main",
                        repo="https://github.com/evil/kernels")[0], None


def case_expired(ts, world):
    return ts.sign_blob(METADATA, integrated_delta=3600)[0], None


def case_bad_proof(ts, world):
    bundle, _ = ts.sign_blob(METADATA)
    hs = entry(bundle)["inclusionProof"]["hashes"]
    hs[0] = flip_b64(hs[0])
    return bundle, None


def case_bad_set(ts, world):
    bundle, _ = ts.sign_blob(METADATA)
    e = entry(bundle)
    e["inclusionPromise"]["signedEntryTimestamp"] = flip_b64(e["inclusionPromise"]["signedEntryTimestamp"], at=20)
    return bundle, None


def case_bad_sct(ts, world):
    return ts.sign_blob(METADATA, ct_key=ec.generate_private_key(ec.SECP256R1()))[0], None


def case_wrong_log_key(ts, world):
    return ts.sign_blob(METADATA, log_key=ec.generate_private_key(ec.SECP256R1()))[0], None


def case_body_mismatch(ts, world):
    a, _ = ts.sign_blob(METADATA)
    b, parts = ts.sign_blob(METADATA)
    # b's certificate and signature (valid over the same artifact) presented with a's log entry
    a = copy.deepcopy(a)
    a["verificationMaterial"]["certificate"] = b["verificationMaterial"]["certificate"]
    a["messageSignature"] = b["messageSignature"]
    return a, None


def case_ber_repo(ts, world):
    # the right repository, its UTF8String's length in the long form (BER, not DER)
    repo = KC_REPO.encode()
    return ts.sign_blob(METADATA, ext_values={OID_SOURCE_REPO: b"\x0c\x81" + bytes([len(repo)]) + repo})[0], None


def case_constructed_signer(ts, world):
    # the right workflow as a constructed UTF8String of two pieces (BER only)
    sig = KC_BUILD.encode()
    a, b = utf8_der(sig[:40].decode()), utf8_der(sig[40:].decode())
    return ts.sign_blob(METADATA, ext_values={OID_SIGNER_URI: bytes([0x2C, len(a) + len(b)]) + a + b})[0], None


CASES = {
    "tampered artifact": (case_tampered, "signature failed: bundle message digest does not match the artifact"),
    "tampered artifact, no digest": (case_tampered_no_digest, "signature failed: signature is invalid for the artifact"),
    "wrong workflow": (case_wrong_workflow, "identity policy failed: build signer URI"),
    "wrong repository": (case_wrong_repo, "identity policy failed: source repository is https://github.com/evil/kernels"),
    "cert expired at integrated time": (case_expired, "certificate chain failed: certificate does not chain to a Fulcio CA at time"),
    "bad inclusion proof": (case_bad_proof, "inclusion proof failed"),
    "bad SET": (case_bad_set, "inclusion promise failed: signed entry timestamp does not verify"),
    "bad SCT": (case_bad_sct, "SCT failed: SCT signature does not verify"),
    "wrong log key": (case_wrong_log_key, "checkpoint failed: checkpoint signature does not verify"),
    "body mismatch": (case_body_mismatch, "log entry body failed: transparency log entry is inconsistent with the bundle"),
    "BER source repository": (case_ber_repo, "certificate profile failed: extension 1.3.6.1.4.1.57264.1.12 (source "
                              "repository URI) is not a DER UTF8String: long-form length where the short form fits"),
    "constructed build signer URI": (case_constructed_signer, "certificate profile failed: extension "
                                     "1.3.6.1.4.1.57264.1.9 (build signer URI) is not a DER UTF8String: constructed string"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_attacks_rejected_by_both(world, name):
    make, expected = CASES[name]
    bundle, artifact = make(world[0], world)
    hk, py = both(world, bundle, name.replace(" ", "_").replace(",", "") + ".sigstore", artifact=artifact)
    assert not hk[0], f"hubkern accepted: {name}"
    assert expected in hk[1], hk[1]
    assert "HK_ERR_SIGNATURE" in hk[1]
    assert not py[0], f"sigstore-python accepted: {name}"


def test_expired_message_names_the_reason(world):
    bundle, _ = case_expired(world[0], world)
    hk, _ = both(world, bundle, "expired2.sigstore")
    assert "certificate has expired" in hk[1]
    assert "signer=https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main" in hk[1]


def test_identity_policy_flags(world):
    """The conformance-style flags: SAN identity + v1 issuer."""
    ts, d, root, art = world
    bundle, _ = ts.sign_blob(METADATA)
    bp = write(d, "flags.sigstore", bundle)
    ident = "https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main"
    assert hubkern_verify(root, bp, art, identity=ident, issuer="https://token.actions.githubusercontent.com")[0]
    ok, msg, _ = hubkern_verify(root, bp, art, identity=ident, issuer="https://accounts.google.com")
    assert not ok and "OIDC issuer (v1) is https://token.actions.githubusercontent.com" in msg
    ok, msg, _ = hubkern_verify(root, bp, art, identity="someone@example.com")
    assert not ok and "no SAN equals someone@example.com" in msg


def test_malformed_bundles_are_parse_errors(world):
    ts, d, root, art = world
    bundle, _ = ts.sign_blob(METADATA)
    for mutate in (lambda b: b.pop("verificationMaterial"),
                   lambda b: b.update(mediaType="application/vnd.dev.sigstore.bundle.v9+json"),
                   lambda b: entry(b).pop("inclusionProof"),
                   lambda b: entry(b)["inclusionProof"].pop("checkpoint"),
                   lambda b: b["verificationMaterial"].update(tlogEntries=[]),
                   lambda b: b["verificationMaterial"]["certificate"].update(rawBytes="!!")):
        b = copy.deepcopy(bundle)
        mutate(b)
        ok, msg, _ = hubkern_verify(root, write(d, "malformed.sigstore", b), art)
        assert not ok and msg.startswith("HK_ERR_PARSE: invalid bundle"), msg
