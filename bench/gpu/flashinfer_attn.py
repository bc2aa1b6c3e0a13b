"""FlashInfer 0.7.2 as an attention baseline for the GPU benchmarks (issue 23: FlashInfer in every
benchmark). The package is the one bench/gpu/flashinfer_prep.sh builds here for sm_90a (modules
dec_bf16/dec_fp8: the CUDA-core decode; pp_bf16/pp_fp8: the decode wrapper's tensor-core path;
pf_bf16: the FA2 ragged prefill), loaded with JIT disabled, so a module that was not built fails at
plan time and is reported, not built on the device.

Every call here takes our own tensors in our layouts, so the baseline reads the same bytes:
  paged cache [pages, page_size, Hkv, D] + block table [B, max_pages] -> FlashInfer's NHD paged cache
  (indptr / indices / last_page_len); a contiguous cache [B, S, Hkv, D] is the same bytes viewed as
  pages of 16 tokens; q [B, q_len, Hq, D]; varlen prefill q [Tq, Hq, D], k/v [Tk, Hkv, D].
The FA3 prefill backend is not among the shared tool's modules, so prefill is FlashInfer's FA2
path (backend="fa2", what its auto rule picks off sm_90); D=64 has decode modules only.

Use: fi = flashinfer_attn.load(DIR) (None when not importable, with the reason printed); then
fi.decode(...) / fi.prefill(...) return (callable, output) or raise."""
import os
import sys

import torch

WORKSPACE_BYTES = 256 << 20


class FlashInfer:
    def __init__(self, mod, version):
        self.fi, self.version = mod, version
        self.ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")

    def decode(self, q, kc, vc, lens, bt, bs, tensor_cores, k_scale=None, v_scale=None):
        """q [B, q_len, Hq, D]; kc/vc paged [pages, bs, Hkv, D] with bt [B, mb], or contiguous
        [B, S, Hkv, D] with bt None. Causal over the last q_len positions (bottom-right)."""
        B, ql, hq, D = q.shape
        dev = q.device
        lens_h = [int(x) for x in lens]
        if bt is None:
            # a contiguous [B, S, Hkv, D] cache is, byte for byte, pages of any size p dividing S
            # (sequence b's pages start at b * S / p); p = 16 (FlashInfer's usual page, and its
            # CUDA-core decode is slow on one huge page), else the largest power of two dividing S
            S = kc.shape[1]
            bs = next(p for p in (16, 8, 4, 2, 1) if S % p == 0)
            kc = kc.view(B * S // bs, bs, *kc.shape[2:])
            vc = vc.view(B * S // bs, bs, *vc.shape[2:])
            nb = [max(1, (L + bs - 1) // bs) for L in lens_h]
            indices = torch.cat([torch.arange(b * S // bs, b * S // bs + nb[b], dtype=torch.int32, device=dev)
                                 for b in range(B)])
        else:
            nb = [(L + bs - 1) // bs for L in lens_h]
            indices = torch.cat([bt[b, :nb[b]] for b in range(B)]).to(torch.int32)
        indptr = torch.tensor([0] + list(torch.tensor(nb).cumsum(0).tolist()), dtype=torch.int32, device=dev)
        last = torch.tensor([L - (n - 1) * bs for L, n in zip(lens_h, nb)], dtype=torch.int32, device=dev)
        w = self.fi.BatchDecodeWithPagedKVCacheWrapper(self.ws, "NHD", use_tensor_cores=tensor_cores,
                                                       backend="fa2" if tensor_cores else "auto")
        kw = {"q_data_type": q.dtype, "kv_data_type": kc.dtype, "o_data_type": q.dtype}
        if ql > 1:
            kw["q_len_per_req"] = ql
        w.plan(indptr, indices, last, hq, kc.shape[2], D, bs, **kw)
        qv = q.reshape(B * ql, hq, D)
        out = torch.empty_like(qv)
        rk = {"out": out}
        if ql > 1:
            rk["q_len_per_req"] = ql
        if k_scale is not None:
            rk["k_scale"], rk["v_scale"] = float(k_scale), float(v_scale)

        def call():
            w.run(qv, (kc, vc), **rk)
        return call, out.view(B, ql, hq, D)

    def prefill(self, q, k, v, cu_q, cu_k, causal):
        """Varlen prefill: q [Tq, Hq, D], k/v [Tk, Hkv, D], cu_* int32 [B+1] on the device."""
        w = self.fi.BatchPrefillWithRaggedKVCacheWrapper(self.ws, "NHD", backend="fa2")
        w.plan(cu_q, cu_k, q.shape[1], k.shape[1], q.shape[2], causal=causal, q_data_type=q.dtype,
               kv_data_type=k.dtype, o_data_type=q.dtype)
        out = torch.empty_like(q)

        def call():
            w.run(q, k, v, out=out)
        return call, out


def time_decode(fi, timeit, reps, q, kc, vc, lens, bt, bs, check=None, k_scale=None, v_scale=None):
    """Both FlashInfer decode paths (CUDA cores; tensor cores), each checked by `check(out)` (a
    relative error; over 2e-2 the path is reported as wrong and not timed) and timed. Returns
    {"FI cuda-core": ms | None, "FI tensor-core": ms | None} and prints why a path did not run."""
    res = {}
    for name, tc in (("FI cuda-core", False), ("FI tensor-core", True)):
        res[name] = None
        if q.shape[1] > 1 and not tc:
            continue  # FlashInfer's CUDA-core decode takes one query per request
        try:
            call, out = fi.decode(q, kc, vc, lens, bt, bs, tc, k_scale, v_scale)
            call()
            torch.cuda.synchronize()
            if check is not None:
                e = check(out)
                if not e < 2e-2:
                    print(f"  {name}: rel_l2 {e:.2e} vs float64: wrong, not timed", flush=True)
                    continue
            res[name] = timeit(call, reps)
        except Exception as e:  # noqa: BLE001
            print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}", flush=True)
    return res


def load(path):
    """FlashInfer from the prepared package at `path` (the dir holding flashinfer/), JIT off."""
    if not path:
        return None
    sys.path.insert(0, path)
    os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")
    try:
        import flashinfer
        import flashinfer.decode  # noqa: F401
        import flashinfer.prefill  # noqa: F401
        fi = FlashInfer(flashinfer, flashinfer.__version__)
        fi.fi.BatchDecodeWithPagedKVCacheWrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper
        fi.fi.BatchPrefillWithRaggedKVCacheWrapper = flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper
        print(f"FlashInfer {flashinfer.__version__} from {os.path.dirname(flashinfer.__file__)} "
              f"(JIT disabled={os.environ['FLASHINFER_DISABLE_JIT']}): measured", flush=True)
        return fi
    except Exception as e:  # noqa: BLE001 - a baseline that cannot load is reported, not fatal
        print(f"FlashInfer not importable from {path} ({type(e).__name__}: {e}): not measured", flush=True)
        return None
