"""A throwaway Sigstore for tests: a Fulcio-like CA (root + intermediate), a CT log, a Rekor-like
log, its own trusted_root.json, and bundles signed the way `cosign sign-blob --bundle` signs a
blob (hashedrekord v0.0.1 entry, SCT embedded in a precertificate-derived leaf, signed entry
timestamp, RFC 6962 inclusion proof with a signed checkpoint), the way `cosign attest` signs an
in-toto statement (DSSE envelope, dsse v0.0.1 entry), and the way `cosign sign-blob --key` signs
with a managed key (publicKey hint, no certificate). Everything is generated here with
`cryptography`; nothing is fetched."""
import base64
import datetime
import hashlib
import json
import os
import struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
KC_REPO = "https://github.com/huggingface/kernels-community"
KC_BUILD = KC_REPO + "/.github/workflows/build.yaml@refs/heads/main"

OID_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OID_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
OID_SIGNER_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
OID_SOURCE_REPO = ObjectIdentifier("1.3.6.1.4.1.57264.1.12")
OID_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")

MEDIA = {1: "application/vnd.dev.sigstore.bundle+json;version=0.1",
         2: "application/vnd.dev.sigstore.bundle+json;version=0.2",
         3: "application/vnd.dev.sigstore.bundle.v0.3+json"}


def b64(b):
    return base64.b64encode(b).decode()


def spki(key):
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(key):
    return hashlib.sha256(spki(key)).digest()


def utf8_der(s):
    b = s.encode()
    assert len(b) < 65536
    if len(b) < 128:
        return bytes([0x0C, len(b)]) + b
    if len(b) < 256:
        return bytes([0x0C, 0x81, len(b)]) + b
    return bytes([0x0C, 0x82]) + struct.pack(">H", len(b)) + b


def octet_der(b):
    n = len(b)
    if n < 128:
        return bytes([0x04, n]) + b
    if n < 256:
        return bytes([0x04, 0x81, n]) + b
    return bytes([0x04, 0x82]) + struct.pack(">H", n) + b


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(l, r):
    return hashlib.sha256(b"\x01" + l + r).digest()


def mth(leaves):
    """RFC 6962 Merkle tree hash of a list of leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def audit_path(m, leaves):
    """RFC 6962 §2.1.1 PATH(m, D[n]), bottom-up."""
    if len(leaves) == 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if m < k:
        return audit_path(m, leaves[:k]) + [mth(leaves[k:])]
    return audit_path(m - k, leaves[k:]) + [mth(leaves[:k])]


class FakeSigstore:
    def __init__(self, now=None):
        self.now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.inter_key = ec.generate_private_key(ec.SECP384R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.log_key = ec.generate_private_key(ec.SECP256R1())
        self.origin = "rekor.test.hubkern - 1234567890"
        start = self.now - datetime.timedelta(days=365)
        end = self.now + datetime.timedelta(days=3650)
        name = lambda cn: x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hubkern-test"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        self.root = (x509.CertificateBuilder().subject_name(name("test-fulcio-root")).issuer_name(name("test-fulcio-root"))
                     .public_key(self.root_key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(start).not_valid_after(end)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.root_key.public_key()), critical=False)
                     .sign(self.root_key, hashes.SHA384()))
        self.inter = (x509.CertificateBuilder().subject_name(name("test-fulcio-intermediate")).issuer_name(self.root.subject)
                      .public_key(self.inter_key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(start).not_valid_after(end)
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                      .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                      .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.inter_key.public_key()), critical=False)
                      .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()), critical=False)
                      .sign(self.root_key, hashes.SHA384()))
        self.log_index = 1000
        self.filler = [os.urandom(40) for _ in range(6)]

    # ---- trust root ------------------------------------------------------------------------
    def trusted_root(self, log_key=None, ct_key=None):
        start = (self.now - datetime.timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
        lk = log_key or self.log_key
        ck = ct_key or self.ct_key
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{"baseUrl": "https://rekor.test.hubkern", "hashAlgorithm": "SHA2_256",
                       "publicKey": {"rawBytes": b64(spki(lk)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                     "validFor": {"start": start}},
                       "logId": {"keyId": b64(key_id(lk))}}],
            "certificateAuthorities": [{"subject": {"organization": "hubkern-test", "commonName": "test-fulcio"},
                                        "uri": "https://fulcio.test.hubkern",
                                        "certChain": {"certificates": [
                                            {"rawBytes": b64(self.inter.public_bytes(serialization.Encoding.DER))},
                                            {"rawBytes": b64(self.root.public_bytes(serialization.Encoding.DER))}]},
                                        "validFor": {"start": start}}],
            "ctlogs": [{"baseUrl": "https://ctfe.test.hubkern", "hashAlgorithm": "SHA2_256",
                        "publicKey": {"rawBytes": b64(spki(ck)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                      "validFor": {"start": start}},
                        "logId": {"keyId": b64(key_id(ck))}}],
            "timestampAuthorities": [],
        }

    def write_trusted_root(self, path, **kw):
        with open(path, "w") as f:
            json.dump(self.trusted_root(**kw), f, indent=1)
        return path

    # ---- Fulcio ----------------------------------------------------------------------------
    def leaf(self, key, issued_at, identity=KC_BUILD, repo=KC_REPO, issuer=GITHUB_ISSUER, ct_key=None,
             ext_values=None):
        """Leaf with the Fulcio extensions and an embedded SCT over its precertificate. ext_values
        ({OID: bytes}) replaces a Fulcio extension's encoded value (e.g. a BER form of it)."""
        ct_key = ct_key or self.ct_key
        ext = {OID_ISSUER_V1: issuer.encode(), OID_ISSUER_V2: utf8_der(issuer), OID_SIGNER_URI: utf8_der(identity),
               OID_SOURCE_REPO: utf8_der(repo), **(ext_values or {})}
        builder = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.inter.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(issued_at).not_valid_after(issued_at + datetime.timedelta(minutes=10))
                   .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.inter_key.public_key()), critical=False)
                   .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]), critical=True)
                   .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V1, ext[OID_ISSUER_V1]), critical=False)
                   .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V2, ext[OID_ISSUER_V2]), critical=False)
                   .add_extension(x509.UnrecognizedExtension(OID_SIGNER_URI, ext[OID_SIGNER_URI]), critical=False)
                   .add_extension(x509.UnrecognizedExtension(OID_SOURCE_REPO, ext[OID_SOURCE_REPO]), critical=False))
        precert = builder.sign(self.inter_key, hashes.SHA384())
        tbs = precert.tbs_certificate_bytes
        ts_ms = int(issued_at.timestamp() * 1000)
        issuer_hash = hashlib.sha256(self.inter.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).digest()
        signed = (struct.pack(">BBQH", 0, 0, ts_ms, 1) + issuer_hash + struct.pack(">I", len(tbs))[1:] + tbs
                  + struct.pack(">H", 0))
        sig = ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (b"\x00" + key_id(ct_key) + struct.pack(">Q", ts_ms) + struct.pack(">H", 0)
               + bytes([4, 3]) + struct.pack(">H", len(sig)) + sig)
        sct_list = struct.pack(">H", len(sct) + 2) + struct.pack(">H", len(sct)) + sct
        return builder.add_extension(x509.UnrecognizedExtension(OID_SCT_LIST, octet_der(sct_list)),
                                     critical=False).sign(self.inter_key, hashes.SHA384())

    # ---- Rekor -----------------------------------------------------------------------------
    @staticmethod
    def cert_material(cert, entry, version):
        """verificationMaterial for a leaf certificate and one log entry: v0.3 names the certificate,
        v0.1 / v0.2 a one-certificate chain."""
        raw = {"rawBytes": b64(cert.public_bytes(serialization.Encoding.DER))}
        cert_part = {"certificate": raw} if version == 3 else {"x509CertificateChain": {"certificates": [raw]}}
        return {**cert_part, "tlogEntries": [entry]}

    @staticmethod
    def hashedrekord(cert, sig, digest):
        body = {"apiVersion": "0.0.1", "kind": "hashedrekord",
                "spec": {"data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                         "signature": {"content": b64(sig),
                                       "publicKey": {"content": b64(cert.public_bytes(serialization.Encoding.PEM))}}}}
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    def tlog_entry(self, body, integrated_time, log_key=None, index_in_tree=3, kind="hashedrekord"):
        log_key = log_key or self.log_key
        lid = key_id(log_key)
        leaves = [leaf_hash(x) for x in self.filler]
        leaves.insert(index_in_tree, leaf_hash(body))
        root = mth(leaves)
        proof = audit_path(index_in_tree, leaves)
        note = f"{self.origin}\n{len(leaves)}\n{b64(root)}\n"
        csig = log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = note + "\n" + f"\u2014 rekor.test.hubkern {b64(lid[:4] + csig)}\n"
        canon = ('{"body":"%s","integratedTime":%d,"logID":"%s","logIndex":%d}'
                 % (b64(body), integrated_time, lid.hex(), self.log_index)).encode()
        set_sig = log_key.sign(canon, ec.ECDSA(hashes.SHA256()))
        return {"logIndex": str(self.log_index), "logId": {"keyId": b64(lid)},
                "kindVersion": {"kind": kind, "version": "0.0.1"},
                "integratedTime": str(integrated_time),
                "inclusionPromise": {"signedEntryTimestamp": b64(set_sig)},
                "inclusionProof": {"logIndex": str(index_in_tree), "rootHash": b64(root),
                                   "treeSize": str(len(leaves)), "hashes": [b64(h) for h in proof],
                                   "checkpoint": {"envelope": checkpoint}},
                "canonicalizedBody": b64(body)}

    # ---- cosign sign-blob --bundle ---------------------------------------------------------
    def sign_blob(self, artifact, version=3, identity=KC_BUILD, repo=KC_REPO, issuer=GITHUB_ISSUER,
                  integrated_delta=30, log_key=None, ct_key=None, key=None, ext_values=None):
        """Returns (bundle dict, parts) where parts carries the cert/key/signature for tampering."""
        key = key or ec.generate_private_key(ec.SECP256R1())
        issued = self.now
        cert = self.leaf(key, issued, identity=identity, repo=repo, issuer=issuer, ct_key=ct_key, ext_values=ext_values)
        digest = hashlib.sha256(artifact).digest()
        from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
        sig = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        body = self.hashedrekord(cert, sig, digest)
        entry = self.tlog_entry(body, int(issued.timestamp()) + integrated_delta, log_key=log_key)
        vm = self.cert_material(cert, entry, version)
        bundle = {"mediaType": MEDIA[version], "verificationMaterial": vm,
                  "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
                                       "signature": b64(sig)}}
        return bundle, {"cert": cert, "key": key, "sig": sig, "digest": digest}

    # ---- cosign attest (DSSE, in-toto) -----------------------------------------------------
    @staticmethod
    def statement(artifact, name="metadata.json"):
        return json.dumps({"_type": "https://in-toto.io/Statement/v1",
                           "subject": [{"name": name, "digest": {"sha256": hashlib.sha256(artifact).hexdigest()}}],
                           "predicateType": "https://hubkern.invalid/test/v1", "predicate": {}},
                          separators=(",", ":")).encode()

    @staticmethod
    def pae(payload_type, payload):
        t = payload_type.encode()
        return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)

    def sign_dsse(self, payload, payload_type="application/vnd.in-toto+json", version=3, key=None,
                  identity=KC_BUILD, repo=KC_REPO, issuer=GITHUB_ISSUER, integrated_delta=30):
        """A DSSE bundle over `payload` with a dsse v0.0.1 log entry. Returns (bundle, parts)."""
        key = key or ec.generate_private_key(ec.SECP256R1())
        cert = self.leaf(key, self.now, identity=identity, repo=repo, issuer=issuer)
        sig = key.sign(self.pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
        envelope = {"payload": b64(payload), "payloadType": payload_type, "signatures": [{"sig": b64(sig)}]}
        body = json.dumps({"apiVersion": "0.0.1", "kind": "dsse", "spec": {
            "envelopeHash": {"algorithm": "sha256",
                             "value": hashlib.sha256(json.dumps(envelope).encode()).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": b64(sig), "verifier": b64(cert.public_bytes(serialization.Encoding.PEM))}]}},
            separators=(",", ":"), sort_keys=True).encode()
        entry = self.tlog_entry(body, int(self.now.timestamp()) + integrated_delta, kind="dsse")
        vm = self.cert_material(cert, entry, version)
        return ({"mediaType": MEDIA[version], "verificationMaterial": vm, "dsseEnvelope": envelope},
                {"cert": cert, "key": key, "sig": sig})

    # ---- cosign sign-blob --key (managed key) ----------------------------------------------
    def sign_blob_with_key(self, artifact, key=None, integrated_delta=30, body_key=None):
        """A bundle signed by a managed key: publicKey hint, hashedrekord v0.0.1 naming the key
        (or body_key, for a log entry that names another key). Returns (bundle, parts);
        parts["pem"] is the public key to verify with."""
        key = key or ec.generate_private_key(ec.SECP256R1())
        pub = lambda k: k.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        pem = pub(key)
        digest = hashlib.sha256(artifact).digest()
        from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
        sig = key.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        body = json.dumps({"apiVersion": "0.0.1", "kind": "hashedrekord",
                           "spec": {"data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                                    "signature": {"content": b64(sig), "publicKey": {"content": b64(pub(body_key or key))}}}},
                          separators=(",", ":"), sort_keys=True).encode()
        entry = self.tlog_entry(body, int(self.now.timestamp()) + integrated_delta)
        vm = {"publicKey": {"hint": b64(key_id(key))}, "tlogEntries": [entry]}
        return ({"mediaType": MEDIA[3], "verificationMaterial": vm,
                 "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
                                      "signature": b64(sig)}},
                {"key": key, "pem": pem, "sig": sig, "digest": digest})
