"""The staged tvm-ffi CPU variant of the attention kernel as the Python `kernels` package sees it:
metadata.json passes kernels' parser and validators, the digest matches, kernels.get_local_kernel
imports it under the metadata id, and the ops compute attention on numpy float16 arrays (float64
reference, fresh random data, NaN-poisoned outputs, every element checked) and raise clear errors.

Env: HK_ATTN_HUB (the staged repo root), HK_ATTN_VARIANT (the variant name)."""
import os
import re
from pathlib import Path

import numpy as np
import pytest
from kernels import get_local_kernel
from kernels._rust import Digest, Metadata
from kernels.validate import AllValidator, default_metadata_validators

HUB = Path(os.environ["HK_ATTN_HUB"])
VARIANT = os.environ.get("HK_ATTN_VARIANT", "tvm-ffi01-cpu-x86_64-linux")
VDIR = HUB / "build" / VARIANT
RNG = np.random.default_rng()


def test_metadata_valid_for_kernels():
    meta = Metadata.read_from_file(VDIR / "metadata.json")
    assert meta.name.python_name == "attention"
    assert re.fullmatch(r"_attention_cpu_[0-9a-z]+(_dirty)?", meta.id), meta.id
    assert meta.version == 1 and meta.python_depends == ["tvm-ffi"]
    AllValidator(validators=default_metadata_validators()).validate_metadata(metadata=meta, variant=VARIANT)
    assert set(meta.digest.files) == {"__init__.py", "_ops.py", meta.id + ".so"}
    meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, VDIR))


@pytest.fixture(scope="module")
def mod():
    return get_local_kernel(HUB, backend="cpu")


def ref_seq(q, k, v, causal, scale):
    """float64: q [lq,Hq,D], k/v [lk,Hkv,D] -> o [lq,Hq,D], lse [Hq,lq]; bottom-right causal."""
    lq, hq, _ = q.shape
    lk, hkv, _ = k.shape
    g = hq // hkv
    o = np.zeros(q.shape)
    lse = np.full((hq, lq), -np.inf)
    for h in range(hq):
        s = q[:, h].astype(np.float64) @ k[:, h // g].astype(np.float64).T * scale
        if causal:
            s = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None] + lk - lq, -np.inf, s)
        for i in range(lq):
            if np.isinf(s[i]).all():
                continue
            m = s[i].max()
            p = np.exp(s[i] - m)
            o[i, h] = p @ v[:, h // g].astype(np.float64) / p.sum()
            lse[h, i] = m + np.log(p.sum())
    return o, lse


def assert_close(out, lse, ro, rl):
    masked = np.isinf(rl)
    assert not np.isnan(out).any() and not np.isnan(lse).any()
    rowmax = np.abs(ro).max(-1, keepdims=True)
    assert np.all(np.abs(out.astype(np.float64) - ro) <= 1e-2 * np.abs(ro) + 1e-3 * rowmax)
    assert np.all(np.isneginf(lse[masked]))
    assert np.allclose(lse[~masked], rl[~masked], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_float64(mod, causal):
    lq, lk = [1, 7, 33, 20, 0], [1, 20, 33, 5, 3]  # lk < lq: 15 fully masked rows when causal
    hq, hkv, d, scale = 4, 2, 64, 0.3
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q = RNG.standard_normal((cq[-1], hq, d)).astype(np.float16)
    k = RNG.standard_normal((ck[-1], hkv, d)).astype(np.float16)
    v = RNG.standard_normal((ck[-1], hkv, d)).astype(np.float16)
    out = np.full(q.shape, np.nan, np.float16)
    lse = np.full((hq, cq[-1]), np.nan, np.float32)
    assert mod.varlen_attention(out, lse, q, k, v, cq, ck, max(lq), causal, scale) is out
    for b in range(len(lq)):
        ro, rl = ref_seq(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], causal, scale)
        assert_close(out[cq[b]:cq[b + 1]], lse[:, cq[b]:cq[b + 1]], ro, rl)
    if causal:
        assert np.isneginf(lse).sum() == 15 * hq


@pytest.mark.parametrize("paged", [False, True])
def test_decode_matches_float64(mod, paged):
    b, ql, hq, hkv, d, bs = 3, 2, 8, 2, 128, 16
    sl = np.array([1, 40, 17], np.int32)  # seq 0: its first query row sees no key
    smax = 48
    q = RNG.standard_normal((b, ql, hq, d)).astype(np.float16)
    if paged:
        nblk = b * smax // bs + 2
        kc = RNG.standard_normal((nblk, bs, hkv, d)).astype(np.float16)
        vc = RNG.standard_normal((nblk, bs, hkv, d)).astype(np.float16)
        bt = RNG.permutation(nblk)[: b * smax // bs].astype(np.int32).reshape(b, smax // bs)
    else:
        kc = RNG.standard_normal((b, smax, hkv, d)).astype(np.float16)
        vc = RNG.standard_normal((b, smax, hkv, d)).astype(np.float16)
        bt = None
    out = np.full(q.shape, np.nan, np.float16)
    lse = np.full((b, ql, hq), np.nan, np.float32)
    mod.decode_attention(out, lse, q, kc, vc, sl, smax, block_table=bt)
    for i in range(b):
        idx = np.arange(sl[i])
        kk = kc[bt[i, idx // bs], idx % bs] if paged else kc[i, : sl[i]]
        vv = vc[bt[i, idx // bs], idx % bs] if paged else vc[i, : sl[i]]
        ro, rl = ref_seq(q[i], kk, vv, True, d ** -0.5)
        assert_close(out[i], lse[i], ro, rl.T)
    assert np.isneginf(lse[0, 0]).all() and (out[0, 0] == 0).all()


def e4m3_values():
    """The e4m3fn format's definition: bias 7, subnormals at exponent 0, S.1111.111 NaN."""
    c = np.arange(256)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))
    v = np.where(c & 0x80, -v, v)
    v[[0x7F, 0xFF]] = np.nan
    return v


@pytest.mark.parametrize("paged,per_head", [(False, True), (True, False)])
def test_decode_fp8_matches_float64(mod, paged, per_head):
    """FP8 cache as uint8 e4m3fn codes (numpy has no FP8 dtype), scales per kv head or per tensor;
    float64 reference on the dequantised values."""
    b, ql, hq, hkv, d, bs, smax = 3, 3, 8, 2, 64, 16, 48
    sl = np.array([2, 40, 17], np.int32)
    shape = (b * smax // bs + 2, bs, hkv, d) if paged else (b, smax, hkv, d)
    def codes():
        return (RNG.integers(0, 2, shape) << 7 | RNG.integers(3, 10, shape) << 3 | RNG.integers(0, 8, shape)).astype(np.uint8)
    kc, vc = codes(), codes()
    bt = RNG.permutation(shape[0])[: b * smax // bs].astype(np.int32).reshape(b, smax // bs) if paged else None
    ns = hkv if per_head else 1
    ks = (RNG.random(ns) * 0.1 + 0.02).astype(np.float32)
    vs = (RNG.random(ns) + 0.5).astype(np.float32)
    q = RNG.standard_normal((b, ql, hq, d)).astype(np.float16)
    out = np.full(q.shape, np.nan, np.float16)
    lse = np.full((b, ql, hq), np.nan, np.float32)
    assert mod.decode_fp8_attention(out, lse, q, kc, vc, ks, vs, sl, smax, block_table=bt) is out
    val = e4m3_values()
    for i in range(b):
        idx = np.arange(sl[i])
        kk = kc[bt[i, idx // bs], idx % bs] if paged else kc[i, : sl[i]]
        vv = vc[bt[i, idx // bs], idx % bs] if paged else vc[i, : sl[i]]
        kd = val[kk] * ks.astype(np.float64).reshape(1, -1, 1)
        vd = val[vv] * vs.astype(np.float64).reshape(1, -1, 1)
        ro, rl = ref_seq(q[i], kd, vd, True, d ** -0.5)
        assert_close(out[i], lse[i], ro, rl.T)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        mod.decode_fp8_attention(out, lse, q, q, q, ks, vs, sl, smax)
    with pytest.raises(ValueError, match="per head"):
        mod.decode_fp8_attention(out, lse, q, kc, vc, np.ones(3, np.float32), np.ones(3, np.float32), sl, smax,
                                 block_table=bt)


def test_invalid_inputs_raise_clear_errors(mod):
    q = np.zeros((4, 2, 64), np.float16)
    cu = np.array([0, 4], np.int32)
    lse = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        mod.varlen_attention(np.zeros((4, 2, 64), np.float32), lse, q.astype(np.float32), q, q, cu, cu, 4)
    with pytest.raises(ValueError, match="multiple of num_heads_kv"):
        kv = np.zeros((4, 3, 64), np.float16)
        mod.varlen_attention(q.copy(), lse, q, kv, kv, cu, cu, 4)
    with pytest.raises(TypeError, match="int32"):
        mod.varlen_attention(q.copy(), lse, q, q, q, cu.astype(np.int64), cu, 4)
    with pytest.raises(ValueError, match="token counts"):
        mod.varlen_attention(q.copy(), lse, q, q, q, np.array([0, 3], np.int32), cu, 4)
    with pytest.raises(ValueError, match="q_len must be 1..8"):
        qd = np.zeros((1, 9, 2, 64), np.float16)
        mod.decode_attention(qd.copy(), np.zeros((1, 9, 2), np.float32), qd,
                             np.zeros((1, 16, 2, 64), np.float16), np.zeros((1, 16, 2, 64), np.float16),
                             np.array([9], np.int32), 16)
    with pytest.raises(ValueError, match="out of range"):
        qd = np.zeros((1, 1, 2, 64), np.float16)
        mod.decode_attention(qd.copy(), np.zeros((1, 1, 2), np.float32), qd,
                             np.zeros((2, 16, 2, 64), np.float16), np.zeros((2, 16, 2, 64), np.float16),
                             np.array([5], np.int32), 16, block_table=np.array([[7]], np.int32))
