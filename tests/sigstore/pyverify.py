"""Verify a Sigstore bundle with sigstore-python 4.5.1 (the reference) and with hubkern's
hubkern-sigstore-verify, the same inputs for both. Shared by tests/integration/test_sigstore*.py
and scripts/sigstore_differential.py."""
import json
import os
import subprocess

from sigstore.errors import Error as SigstoreError
from sigstore.models import Bundle, ClientTrustConfig, TrustedRoot
from sigstore.verify import Verifier, policy


def trusted_root_from(path):
    """A TrustedRoot from a trusted_root.json or a ClientTrustConfig json."""
    with open(path, "rb") as f:
        doc = json.load(f)
    if doc.get("mediaType", "").startswith("application/vnd.dev.sigstore.clienttrustconfig"):
        return ClientTrustConfig.from_json(json.dumps(doc)).trusted_root
    return TrustedRoot.from_file(path)


def python_verify(root_path, bundle_bytes, artifact, identity=None, issuer=None, pol=None):
    """(ok, message). identity/issuer: sigstore-python's Identity policy; none: UnsafeNoOp."""
    try:
        root = trusted_root_from(root_path)
        verifier = Verifier(trusted_root=root)
        bundle = Bundle.from_json(bundle_bytes)
        if pol is None:
            pol = policy.Identity(identity=identity, issuer=issuer) if identity else policy.UnsafeNoOp()
        verifier.verify_artifact(artifact, bundle, pol)
        return True, "ok"
    except (SigstoreError, ValueError, KeyError, TypeError, AttributeError) as e:
        return False, f"{type(e).__name__}: {e}"
    except Exception as e:  # pydantic / cryptography errors on hostile input are rejections too
        return False, f"{type(e).__name__}: {e}"


def python_verify_dsse(root_path, bundle_bytes, artifact, pol=None, digest=None):
    """(ok, message): sigstore-python's DSSE path as its CLI runs it (`verify_dsse`, then the
    payload type and an in-toto subject with the artifact's sha256, or `digest` if given)."""
    import hashlib

    from sigstore import dsse
    from sigstore.hashes import Hashed
    from sigstore_models.common.v1 import HashAlgorithm
    try:
        verifier = Verifier(trusted_root=trusted_root_from(root_path))
        bundle = Bundle.from_json(bundle_bytes)
        type_, payload = verifier.verify_dsse(bundle, pol or policy.UnsafeNoOp())
        if type_ != dsse.Envelope._TYPE:
            return False, f"expected JSON payload for DSSE, got {type_}"
        hashed = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=digest or hashlib.sha256(artifact).digest())
        if not dsse.Statement(payload)._matches_digest(hashed):
            return False, "in-toto statement has no subject for the digest"
        return True, "ok"
    except Exception as e:  # every failure is a rejection
        return False, f"{type(e).__name__}: {e}"


def tool_path():
    build = os.environ.get("HK_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
    return os.path.join(build, "tests", "hubkern-sigstore-verify")


def hubkern_verify(root_path, bundle_path, artifact_path, identity=None, issuer=None, extra=(), tool=None):
    """(ok, message, result-dict-or-None)."""
    cmd = [tool or tool_path(), "verify-bundle", "--bundle", bundle_path, "--trusted-root", root_path, "--json"]
    if identity:
        cmd += ["--certificate-identity", identity]
    if issuer:
        cmd += ["--certificate-oidc-issuer", issuer, "--issuer-ext", "v1"]
    cmd += list(extra)
    cmd.append(artifact_path)
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=60)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"tool crashed or misused (rc {p.returncode}): {p.stderr}")
    if p.returncode == 0:
        return True, "ok", json.loads(p.stdout)
    return False, p.stderr.strip(), None
