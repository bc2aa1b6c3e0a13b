#!/usr/bin/env python3
"""Differential campaign: hubkern's Sigstore verifier vs sigstore-python 4.5.1 on sigstore-python's
published test bundles (tests/sigstore/python-assets, Apache-2.0) and on mutations of them (bytes
flipped in the certificate, signature, SET, inclusion proof, root hash, checkpoint, body,
timestamps, DSSE payload and signature; integers nudged; fields stripped or set to null; entries
swapped between bundles). DSSE bases go through sigstore-python's DSSE path (verify_dsse + in-toto subject, as its
CLI does) and hubkern-sigstore-verify --dsse. Both verify with
the same trusted root and no identity policy; every case where one accepts and the other rejects
is a disagreement.

  scripts/sigstore_differential.py [--count N] [--seed S] [--build DIR] [--show-agreements]

Exit status 1 when there is a disagreement. The CI runs a few hundred cases
(tests/integration/test_sigstore_differential.py); run thousands by hand."""
import argparse
import base64
import copy
import json
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "sigstore"))
from pyverify import hubkern_verify, python_verify, python_verify_dsse  # noqa: E402

A = os.path.join(ROOT, "tests", "sigstore", "python-assets")
STAGING = os.path.join(ROOT, "tests", "sigstore", "staging_trusted_root.json")
PROD = os.path.join(ROOT, "data", "sigstore", "trusted_root.json")

# (bundle, artifact, trusted root): the published bundles both verifiers accept
BASES = [
    ("bundle.txt.sigstore", "bundle.txt", STAGING),
    ("bundle_v3.txt.sigstore", "bundle_v3.txt", STAGING),
    ("bundle_v3_alt.txt.sigstore", "bundle_v3_alt.txt", STAGING),
    ("tsa/bundle.txt.sigstore", "tsa/bundle.txt", STAGING),
    ("staging-rekor-v2.txt.sigstore.json", "staging-rekor-v2.txt", STAGING),
    ("bundle_v3_github.whl.sigstore", "bundle_v3_github.whl", PROD),
    # DSSE (Rekor v2 hashedrekord over the PAE): sigstore-python's verify_dsse + in-toto subject
    # (its CLI's path) vs hubkern-sigstore-verify --dsse; the statement's subject is
    # sigstore-conformance's a.txt, given by digest
    ("a.dsse.staging-rekor-v2.txt.sigstore.json", "sha256:a0cfc71271d6e278e57cd332ff957c3f7043fdda354c4cbb190a30d56efa01bf",
     STAGING),
]


def vm(b):
    return b["verificationMaterial"]


def tle(b):
    return vm(b)["tlogEntries"][0]


def flip_b64(rng, s):
    raw = bytearray(base64.b64decode(s))
    if not raw:
        return s
    i = rng.randrange(len(raw))
    raw[i] ^= 1 << rng.randrange(8)
    return base64.b64encode(bytes(raw)).decode()


def cert_holder(b):
    if "certificate" in vm(b):
        return vm(b)["certificate"]
    return vm(b)["x509CertificateChain"]["certificates"][0]


def getp(b, path):
    o = b
    for k in path:
        o = o[k]
    return o


def b64_fields(b):
    """Paths to every base64 field of interest present in the bundle."""
    paths = []
    if "certificate" in vm(b):
        paths.append(("verificationMaterial", "certificate", "rawBytes"))
    else:
        paths.append(("verificationMaterial", "x509CertificateChain", "certificates", 0, "rawBytes"))
    e = ("verificationMaterial", "tlogEntries", 0)
    t = tle(b)
    paths.append(e + ("canonicalizedBody",))
    paths.append(e + ("logId", "keyId"))
    if "inclusionPromise" in t:
        paths.append(e + ("inclusionPromise", "signedEntryTimestamp"))
    paths.append(e + ("inclusionProof", "rootHash"))
    for i in range(len(t["inclusionProof"].get("hashes", []))):
        paths.append(e + ("inclusionProof", "hashes", i))
    if "dsseEnvelope" in b:
        paths.append(("dsseEnvelope", "payload"))
        paths.append(("dsseEnvelope", "signatures", 0, "sig"))
    if "messageSignature" in b:
        paths.append(("messageSignature", "signature"))
        if "messageDigest" in b["messageSignature"]:
            paths.append(("messageSignature", "messageDigest", "digest"))
    for i, _ in enumerate(vm(b).get("timestampVerificationData", {}).get("rfc3161Timestamps", [])):
        paths.append(("verificationMaterial", "timestampVerificationData", "rfc3161Timestamps", i, "signedTimestamp"))
    return paths


def strip_paths(b):
    e = ("verificationMaterial", "tlogEntries", 0)
    out = [e + (k,) for k in tle(b)]
    out += [e + ("inclusionProof", k) for k in tle(b)["inclusionProof"]]
    out += [("messageSignature", k) for k in b.get("messageSignature", {})]
    out += [("dsseEnvelope", k) for k in b.get("dsseEnvelope", {})]
    out += [("verificationMaterial", k) for k in vm(b)]
    out += [(k,) for k in b]
    return out


def setp(b, path, value):
    getp(b, path[:-1])[path[-1]] = value


def delp(b, path):
    o = getp(b, path[:-1])
    if isinstance(o, list):
        o.pop(path[-1])
    else:
        o.pop(path[-1], None)


def mutate(rng, base, others):
    """A mutated copy of base and a description."""
    b = copy.deepcopy(base)
    kind = rng.choice(["flip"] * 6 + ["checkpoint", "int", "strip", "null", "swap", "media"])
    if kind == "flip":
        p = rng.choice(b64_fields(b))
        setp(b, p, flip_b64(rng, getp(b, p)))
        return b, "flip " + "/".join(map(str, p[2:] if p[0] == "verificationMaterial" else p))
    if kind == "checkpoint":
        cp = tle(b)["inclusionProof"]["checkpoint"]
        s = cp["envelope"]
        i = rng.randrange(len(s))
        ch = rng.choice(["0", "A", "\n", " ", "x", "="])
        cp["envelope"] = s[:i] + ch + s[i + 1:]
        return b, f"checkpoint[{i}]={ch!r}"
    if kind == "int":
        t = tle(b)
        choices = [("logIndex", t), ("logIndex", t["inclusionProof"]), ("treeSize", t["inclusionProof"])]
        if "integratedTime" in t:
            choices.append(("integratedTime", t))
        k, o = rng.choice(choices)
        delta = rng.choice([-1, 1, 1000, -(10 ** 6)])
        o[k] = str(int(o[k]) + delta)
        return b, f"int {k}{delta:+d}"
    if kind == "strip":
        p = rng.choice(strip_paths(b))
        delp(b, p)
        return b, "strip " + "/".join(map(str, p))
    if kind == "null":  # protobuf JSON: null is the field absent, for both readers
        p = rng.choice(strip_paths(b))
        setp(b, p, None)
        return b, "null " + "/".join(map(str, p))
    if kind == "swap":
        o = rng.choice(others)
        what = rng.choice(["entry", "cert", "sig"])
        if what == "entry":
            vm(b)["tlogEntries"] = copy.deepcopy(vm(o)["tlogEntries"])
        elif what == "cert":
            setp(b, ("verificationMaterial",), {**vm(b), **{k: v for k, v in vm(o).items() if k in ("certificate", "x509CertificateChain")}})
        elif "messageSignature" in o and "messageSignature" in b:
            b["messageSignature"] = copy.deepcopy(o["messageSignature"])
        return b, "swap " + what
    b["mediaType"] = rng.choice(["application/vnd.dev.sigstore.bundle+json;version=0.1",
                                 "application/vnd.dev.sigstore.bundle+json;version=0.2",
                                 "application/vnd.dev.sigstore.bundle.v0.3+json"])
    return b, "media " + b["mediaType"]


def run(count, seed, tool=None, show=False, log=print):
    rng = random.Random(seed)
    bases = []
    for bname, aname, root in BASES:
        with open(os.path.join(A, bname)) as f:
            bases.append((bname, json.load(f), aname if aname.startswith("sha256:") else os.path.join(A, aname), root))
    disagreements = []
    stats = {"cases": 0, "both_accept": 0, "both_reject": 0}
    with tempfile.TemporaryDirectory() as tmp:
        bp = os.path.join(tmp, "b.json")

        def one(label, bundle, art, root):
            data = json.dumps(bundle)
            with open(bp, "w") as f:
                f.write(data)
            if art.startswith("sha256:"):  # a DSSE base: the subject's digest
                py = python_verify_dsse(root, data.encode(), None, digest=bytes.fromhex(art[7:]))
                hk = hubkern_verify(root, bp, art, tool=tool, extra=["--dsse"])
            else:
                with open(art, "rb") as f:
                    py = python_verify(root, data.encode(), f.read())
                hk = hubkern_verify(root, bp, art, tool=tool)
            stats["cases"] += 1
            if py[0] != hk[0]:
                disagreements.append((label, py, hk[:2]))
                log(f"DISAGREE {label}: python={py[0]} ({py[1][:160]}) hubkern={hk[0]} ({hk[1][:200]})")
            else:
                stats["both_accept" if py[0] else "both_reject"] += 1
                if show:
                    log(f"agree {py[0]!s:5} {label}")

        # every published bundle, as is, under both roots
        for name in sorted(os.listdir(A)) + ["tsa/" + n for n in sorted(os.listdir(os.path.join(A, "tsa")))]:
            if not (name.endswith(".sigstore") or name.endswith(".sigstore.json")):
                continue
            art = os.path.join(A, name.replace(".sigstore.json", "").replace(".sigstore", ""))
            if not os.path.exists(art):
                art = os.path.join(A, "tsa", "bundle.txt")
            with open(os.path.join(A, name)) as f:
                bundle = json.load(f)
            for root in (STAGING, PROD):
                one(f"{name} [{os.path.basename(root)}]", bundle, art, root)
        for i in range(count):
            bname, base, art, root = bases[i % len(bases)]
            others = [b for n, b, _, _ in bases if n != bname]
            m, what = mutate(rng, base, others)
            one(f"#{i} {bname}: {what}", m, art, root)
    return stats, disagreements


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", default=os.environ.get("HK_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--show-agreements", action="store_true")
    args = ap.parse_args()
    import logging
    logging.disable(logging.WARNING)
    stats, dis = run(args.count, args.seed, tool=os.path.join(args.build, "tests", "hubkern-sigstore-verify"),
                     show=args.show_agreements)
    print(json.dumps({**stats, "disagreements": len(dis)}))
    return 1 if dis else 0


if __name__ == "__main__":
    sys.exit(main())
