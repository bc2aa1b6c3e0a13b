"""Differential (CI-sized): hubkern and sigstore-python 4.5.1 accept and reject the same cases among
sigstore-python's published test bundles (a DSSE one among them, through both sides' DSSE paths)
and a few hundred mutations of them (scripts/sigstore_differential.py runs the large campaign).
One known class is tolerated (docs/sigstore.md, "Known differences"): a checkpoint witness line
made malformed (a blank or a line break inside its signature), which hubkern refuses as Go's
note.Open does and sigstore-python's regex skips. (The former RFC 3161 class, values OpenSSL's
decoder does not check, was hubkern's and is fixed: libhub/src/sigstore/der_check.c.)"""
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "..", "sigstore"))
import sigstore_differential as sd  # noqa: E402
from pyverify import tool_path  # noqa: E402


def known(label, py, hk):
    return "checkpoint[" in label and py[0] and not hk[0] and "malformed checkpoint" in hk[1]


def test_published_bundles_and_mutations_agree():
    if not os.path.exists(tool_path()):
        pytest.skip("hubkern-sigstore-verify not built")
    import logging
    logging.disable(logging.WARNING)
    stats, dis = sd.run(300, seed=1, log=lambda *_: None)
    assert stats["cases"] > 300 and stats["both_accept"] >= 6
    real = [d for d in dis if not known(*d)]
    assert not real, "\n".join(f"{l}: python={p} hubkern={h}" for l, p, h in real)
