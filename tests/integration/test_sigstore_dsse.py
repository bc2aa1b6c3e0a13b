"""DSSE (in-toto) and managed-key bundles against the test Sigstore (tests/sigstore/testsigstore.py),
through hubkern-sigstore-verify's bundle-verification entry point (what sigstore-conformance
drives). A good DSSE bundle is accepted with --dsse by hubkern and by sigstore-python 4.5.1's DSSE
path; pull/load semantics (no --dsse) refuse it. A managed-key bundle is accepted with --key (no
sigstore-python counterpart: 4.5.1 verifies certificates only). Each mutation is refused with its
own message."""
import base64
import copy
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "sigstore"))
from pyverify import hubkern_verify, python_verify_dsse, tool_path  # noqa: E402
from testsigstore import FakeSigstore, b64  # noqa: E402

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

METADATA = json.dumps({"version": 1, "digest": "sha256-" + "ab" * 32}, indent=2).encode()
CHECK_SUBJECT = 1 << 11
CERT_CHECKS = (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 8)  # chain, SCT, usage, policy, validity


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not os.path.exists(tool_path()):
        pytest.skip("hubkern-sigstore-verify not built")
    d = tmp_path_factory.mktemp("sigstore-dsse")
    ts = FakeSigstore()
    root = ts.write_trusted_root(str(d / "trusted_root.json"))
    art = d / "metadata.json"
    art.write_bytes(METADATA)
    return ts, d, root, str(art)


def hk(world, bundle, name, extra=("--dsse", "--default-policy"), artifact=None):
    ts, d, root, art = world
    p = d / name
    p.write_text(json.dumps(bundle))
    return hubkern_verify(root, str(p), artifact or art, extra=list(extra))


def env(bundle):
    return bundle["dsseEnvelope"]


# ---- DSSE ----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 3])
def test_dsse_good_accepted_by_both(world, version):
    ts, d, root, art = world
    bundle, _ = ts.sign_dsse(ts.statement(METADATA), version=version)
    ok, msg, res = hk(world, bundle, f"dsse-v{version}.sigstore")
    assert ok, msg
    assert res["dsse"] == 1 and res["managed_key"] == 0 and res["bundle_version"] == version
    assert res["checks"] & CHECK_SUBJECT and res["checks"] & CERT_CHECKS == CERT_CHECKS
    py = python_verify_dsse(root, json.dumps(bundle).encode(), METADATA)
    assert py[0], py[1]


def test_dsse_by_digest(world):
    ts, d, root, art = world
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    import hashlib
    ok, msg, _ = hk(world, bundle, "dsse-digest.sigstore", artifact="sha256:" + hashlib.sha256(METADATA).hexdigest())
    assert ok, msg


def test_dsse_null_keyid_is_absent(world):
    """model-transparency writes "keyid": null in the envelope's signature; protobuf JSON reads null
    as absent, and so do sigstore-python and hubkern (which refused it as "not a string")."""
    ts, d, root, art = world
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    env(bundle)["signatures"][0]["keyid"] = None
    ok, msg, _ = hk(world, bundle, "dsse-null-keyid.sigstore")
    assert ok, msg
    py = python_verify_dsse(root, json.dumps(bundle).encode(), METADATA)
    assert py[0], py[1]
    env(bundle)["signatures"][0]["keyid"] = 7
    ok, msg, _ = hk(world, bundle, "dsse-number-keyid.sigstore")
    assert not ok and "keyid is not a string" in msg, msg


def test_dsse_refused_where_kernels_are_verified(world):
    """Without --dsse (the pull/load semantics: sigstore-python's verify_artifact) a DSSE bundle over
    metadata.json is refused, however valid."""
    ts = world[0]
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    ok, msg, _ = hk(world, bundle, "dsse-nodsse.sigstore", extra=("--default-policy",))
    assert not ok and "DSSE envelopes are not accepted for this artifact" in msg, msg


def case_tampered_payload(ts):
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    st = json.loads(base64.b64decode(env(bundle)["payload"]))
    st["predicate"] = {"evil": True}
    env(bundle)["payload"] = b64(json.dumps(st, separators=(",", ":")).encode())
    return bundle


def case_other_subject(ts):
    return ts.sign_dsse(ts.statement(METADATA + b"x"))[0]


def case_not_intoto(ts):
    return ts.sign_dsse(METADATA, payload_type="text/plain")[0]


def case_not_a_statement(ts):
    return ts.sign_dsse(json.dumps({"_type": "https://in-toto.io/Statement/v0.9", "subject": []}).encode())[0]


def case_envelope_swapped(ts):
    """Another envelope validly signed by the same key, presented with the first one's log entry."""
    key = ec.generate_private_key(ec.SECP256R1())
    a, _ = ts.sign_dsse(ts.statement(METADATA, name="a"), key=key)
    b, _ = ts.sign_dsse(ts.statement(METADATA, name="b"), key=key)
    a["dsseEnvelope"] = b["dsseEnvelope"]
    return a


def case_signature_swapped(ts):
    """The same payload signed again by the same key (ECDSA: another valid signature), not the logged one."""
    bundle, parts = ts.sign_dsse(ts.statement(METADATA))
    e = env(bundle)
    sig = parts["key"].sign(ts.pae(e["payloadType"], base64.b64decode(e["payload"])), ec.ECDSA(hashes.SHA256()))
    e["signatures"][0]["sig"] = b64(sig)
    return bundle


def case_two_signatures(ts):
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    env(bundle)["signatures"].append(copy.deepcopy(env(bundle)["signatures"][0]))
    return bundle


def case_wrong_workflow(ts):
    bad = "https://github.com/huggingface/kernels-community/.github/workflows/evil.yaml@refs/heads/main"
    return ts.sign_dsse(ts.statement(METADATA), identity=bad)[0]


def case_both_contents(ts):
    bundle, _ = ts.sign_dsse(ts.statement(METADATA))
    bundle["messageSignature"] = {"signature": env(bundle)["signatures"][0]["sig"]}
    return bundle


DSSE_CASES = {
    "tampered payload": (case_tampered_payload, "signature failed: DSSE envelope signature is invalid"),
    "other subject": (case_other_subject, "in-toto statement failed: in-toto statement has no subject for digest"),
    "not in-toto": (case_not_intoto, "DSSE payload type text/plain is not an in-toto statement"),
    "not a statement": (case_not_a_statement, "in-toto statement failed: malformed in-toto statement"),
    "envelope swapped": (case_envelope_swapped, "inconsistent with the DSSE envelope: its payload hash differs"),
    "signature swapped": (case_signature_swapped, "inconsistent with the DSSE envelope: its signature differs"),
    "two signatures": (case_two_signatures, "HK_ERR_PARSE: invalid bundle: DSSE envelope must contain exactly one signature"),
    "wrong workflow": (case_wrong_workflow, "identity policy failed: build signer URI"),
    "both contents": (case_both_contents, "HK_ERR_PARSE: invalid bundle: exactly one of messageSignature or dsseEnvelope"),
}


@pytest.mark.parametrize("name", list(DSSE_CASES))
def test_dsse_attacks_refused(world, name):
    ts, d, root, art = world
    make, expected = DSSE_CASES[name]
    bundle = make(ts)
    ok, msg, _ = hk(world, bundle, name.replace(" ", "_") + ".sigstore")
    assert not ok, f"hubkern accepted: {name}"
    assert expected in msg, msg
    if name != "wrong workflow":  # UnsafeNoOp on the python side: the identity is not checked
        py = python_verify_dsse(root, json.dumps(bundle).encode(), METADATA)
        assert not py[0], f"sigstore-python accepted: {name}"


# ---- managed keys --------------------------------------------------------------------------
def key_file(world, pem, name):
    p = world[1] / name
    p.write_bytes(pem)
    return str(p)


def test_managed_key_good(world):
    ts = world[0]
    bundle, parts = ts.sign_blob_with_key(METADATA)
    ok, msg, res = hk(world, bundle, "key-good.sigstore", extra=("--key", key_file(world, parts["pem"], "k.pem")))
    assert ok, msg
    assert res["managed_key"] == 1 and res["issuer"] is None and res["policy_index"] == -1
    assert res["checks"] & CERT_CHECKS == 0  # no certificate to check
    assert res["checks"] & (1 << 5) and res["checks"] & (1 << 7) and res["checks"] & (1 << 10)  # proof, SET, body


def other_pem():
    return ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_managed_key_refusals(world):
    ts, d, root, art = world
    bundle, parts = ts.sign_blob_with_key(METADATA)
    good = key_file(world, parts["pem"], "k2.pem")
    # the wrong key
    ok, msg, _ = hk(world, bundle, "key-wrong.sigstore", extra=("--key", key_file(world, other_pem(), "other.pem")))
    assert not ok and "signature failed: signature is invalid for the artifact" in msg, msg
    # no key given: a keyless verification of a managed-key bundle
    ok, msg, _ = hk(world, bundle, "key-none.sigstore", extra=("--default-policy",))
    assert not ok and "HK_ERR_PARSE: invalid bundle: expected certificate in bundle" in msg, msg
    # a key that is not one
    ok, msg, _ = hk(world, bundle, "key-junk.sigstore", extra=("--key", key_file(world, b"not a key\n", "junk.pem")))
    assert not ok and "not a PEM public key" in msg, msg
    # tampered artifact
    tampered = d / "tampered.json"
    tampered.write_bytes(METADATA + b" ")
    ok, msg, _ = hk(world, bundle, "key-tampered.sigstore", extra=("--key", good), artifact=str(tampered))
    assert not ok and "bundle message digest does not match the artifact" in msg, msg
    # a certificate bundle verified with a key
    cert_bundle, _ = ts.sign_blob(METADATA)
    ok, msg, _ = hk(world, cert_bundle, "key-cert.sigstore", extra=("--key", good))
    assert not ok and "bundle carries a signing certificate, not a managed key" in msg, msg
    # a log entry whose signature is this key's but which names another key
    body_key = ec.generate_private_key(ec.SECP256R1())
    b2, p2 = ts.sign_blob_with_key(METADATA, body_key=body_key)
    ok, msg, _ = hk(world, b2, "key-body.sigstore", extra=("--key", key_file(world, p2["pem"], "k3.pem")))
    assert not ok and "log entry body failed: transparency log entry is inconsistent with the bundle: its public key differs" in msg, msg
    # a bad inclusion proof is refused with a key as without
    b3 = copy.deepcopy(bundle)
    hs = b3["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"]
    raw = bytearray(base64.b64decode(hs[0]))
    raw[3] ^= 1
    hs[0] = b64(bytes(raw))
    ok, msg, _ = hk(world, b3, "key-proof.sigstore", extra=("--key", good))
    assert not ok and "inclusion proof failed" in msg, msg
