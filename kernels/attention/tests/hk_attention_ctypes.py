"""ctypes wrapper of the CUDA attention library (attention_cuda/*.cu built as one shared library) for
the GPU tests and benchmarks. Needs torch with CUDA. Library path: $HK_ATTN_LIB, or built here with
nvcc into $HK_ATTN_BUILD (default /tmp/hk_attn_build) with -DHK_TEST_HOOKS, so that the tuning
knobs of attention_cuda/attn_knobs.h (HK_ATTN_PREFILL_IMPL, HK_ATTN_PREFILL_CFG,
HK_ATTN_DECODE_TMA) are read from the environment; the shipped variants are built without them."""
import ctypes, os, subprocess
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..")
# every CUDA source of the library (the tvm-ffi and torch builds list the same files)
CUDA_SOURCES = ["attention_cuda.cu", "prefill_sm80.cu", "decode_kernel.cu", "decode_fp8.cu", "decode_cache.cu",
                "prefill_sm90.cu"]


class KV(ctypes.Structure):
    _fields_ = [("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("stride_block", ctypes.c_int64),
                ("stride_token", ctypes.c_int64), ("stride_head", ctypes.c_int64),
                ("block_table", ctypes.c_void_p), ("block_size", ctypes.c_int),
                ("max_blocks_per_seq", ctypes.c_int)]


class KV8(ctypes.Structure):
    """hk_attn_kv_cache_fp8: KV's fields, then the scales (device float32 pointers)."""
    _fields_ = KV._fields_ + [("k_scale", ctypes.c_void_p), ("v_scale", ctypes.c_void_p),
                              ("scale_per_head", ctypes.c_int)]


def build(out_dir=None, hooks=True):
    out_dir = out_dir or os.environ.get("HK_ATTN_BUILD", "/tmp/hk_attn_build")
    os.makedirs(out_dir, exist_ok=True)
    so = os.path.join(out_dir, "libhk_attention_cuda.so")
    cmd = ["nvcc", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
           "-gencode=arch=compute_80,code=sm_80", "-Xcompiler", "-fPIC", "-shared",
           *(["-DHK_TEST_HOOKS"] if hooks else []),
           "-I" + os.path.join(SRC, "attention_cpu"), "-I" + os.path.join(SRC, "attention_cuda"),
           *[os.path.join(SRC, "attention_cuda", f) for f in CUDA_SOURCES], "-o", so]
    subprocess.run(cmd, check=True)
    return so


_lib = None


def lib():
    global _lib
    if _lib is None:
        path = os.environ.get("HK_ATTN_LIB")
        try:
            _lib = ctypes.CDLL(path) if path else None
        except OSError as e:
            print("could not load", path, e, "- building")
        if _lib is None:
            _lib = ctypes.CDLL(build())
        vp, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        _lib.hk_attn_prefill_cuda.argtypes = [vp, vp, vp, vp, vp, vp, vp, i, i, i, i, i, i, i, i, i, f, vp]
        _lib.hk_attn_decode_cuda.argtypes = [vp, vp, vp, ctypes.POINTER(KV), vp, i, i, i, i, i, i, i,
                                             f, i, vp, ctypes.c_size_t, vp]
        _lib.hk_attn_decode_cuda_num_splits.argtypes = [i] * 7
        _lib.hk_attn_prefill_cuda_kernel.restype = ctypes.c_char_p
        _lib.hk_attn_decode_cuda_kernel.argtypes = [ctypes.POINTER(KV), i, i, i, i]
        _lib.hk_attn_decode_cuda_kernel.restype = ctypes.c_char_p
        _lib.hk_attn_decode_fp8_cuda.argtypes = [vp, vp, vp, ctypes.POINTER(KV8), vp, i, i, i, i, i, i, i,
                                                 f, i, vp, ctypes.c_size_t, vp]
        _lib.hk_attn_decode_fp8_cuda_kernel.argtypes = [ctypes.POINTER(KV8), i, i, i, i]
        _lib.hk_attn_decode_fp8_cuda_kernel.restype = ctypes.c_char_p
        _lib.hk_attn_decode_cuda_workspace_size.argtypes = [i] * 5
        _lib.hk_attn_decode_cuda_workspace_size.restype = ctypes.c_size_t
    return _lib


def _dt(t):
    return {torch.bfloat16: 0, torch.float16: 1}[t.dtype]


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def prefill(q, k, v, cu_q, cu_k, max_q, causal, scale=None, out=None, lse=None):
    """q [Tq,Hq,D], k/v [Tk,Hkv,D], cu_* int32 on device. Returns (out, lse[Hq,Tq])."""
    Tq, Hq, D = q.shape
    Hkv = k.shape[1]
    scale = D ** -0.5 if scale is None else scale
    out = torch.empty_like(q) if out is None else out
    lse = torch.empty(Hq, Tq, device=q.device, dtype=torch.float32) if lse is None else lse
    rc = lib().hk_attn_prefill_cuda(out.data_ptr(), lse.data_ptr(), q.data_ptr(), k.data_ptr(),
                                    v.data_ptr(), cu_q.data_ptr(), cu_k.data_ptr(), cu_q.numel() - 1,
                                    max_q, Tq, k.shape[0], Hq, Hkv, D, _dt(q), int(causal), scale, _stream())
    assert rc == 0, rc
    return out, lse


class Decode:
    """Prepared decode call (workspace allocated once) so timing covers only the launches.
    An FP8 cache (kcache/vcache of dtype float8_e4m3fn) takes k_scale/v_scale: float32 device
    tensors of 1 (per tensor) or Hkv (per kv head) entries."""

    def __init__(self, q, kcache, vcache, strides, seqlens, max_seqlen, block_table=None,
                 block_size=0, scale=None, num_splits=0, out=None, lse=None, k_scale=None, v_scale=None):
        self.B, self.qlen, self.Hq, self.D = q.shape
        self.q, self.kc, self.vc, self.seqlens, self.bt = q, kcache, vcache, seqlens, block_table
        self.Hkv = None
        self.max_seqlen = max_seqlen
        self.scale = self.D ** -0.5 if scale is None else scale
        self.out = torch.empty_like(q) if out is None else out
        self.lse = torch.empty(self.B, self.qlen, self.Hq, device=q.device, dtype=torch.float32) if lse is None else lse
        self.fp8 = kcache.dtype == torch.float8_e4m3fn
        args = (kcache.data_ptr(), vcache.data_ptr(), strides[0], strides[1], strides[2],
                block_table.data_ptr() if block_table is not None else None, block_size,
                block_table.shape[1] if block_table is not None else 0)
        if self.fp8:
            self.scales = (k_scale, v_scale)
            self.kv = KV8(*args, k_scale.data_ptr(), v_scale.data_ptr(), int(k_scale.numel() > 1))
        else:
            self.kv = KV(*args)
        self.num_splits = num_splits

    def set_hkv(self, hkv):
        self.Hkv = hkv
        L = lib()
        ns = self.num_splits or L.hk_attn_decode_cuda_num_splits(self.B, self.qlen, self.Hq, hkv, self.D, self.max_seqlen,
                                                                  self.kv.block_size if self.bt is not None else 0)
        self.num_splits = ns
        ws = L.hk_attn_decode_cuda_workspace_size(self.B, self.qlen, self.Hq, self.D, ns)
        self.ws = torch.zeros(max(ws, 16), dtype=torch.uint8, device=self.q.device)  # counters start at 0
        return self

    def kernel(self):
        """Which decode kernel this call runs ("paged-tma", "paged", "contiguous", ...)."""
        fn = lib().hk_attn_decode_fp8_cuda_kernel if self.fp8 else lib().hk_attn_decode_cuda_kernel
        return fn(ctypes.byref(self.kv), self.B, self.Hkv, self.D, self.max_seqlen).decode()

    def __call__(self):
        fn = lib().hk_attn_decode_fp8_cuda if self.fp8 else lib().hk_attn_decode_cuda
        rc = fn(self.out.data_ptr(), self.lse.data_ptr(), self.q.data_ptr(), ctypes.byref(self.kv),
                self.seqlens.data_ptr(), self.B, self.qlen, self.Hq, self.Hkv, self.D, self.max_seqlen,
                _dt(self.q), self.scale, self.num_splits, self.ws.data_ptr(), self.ws.numel(), _stream())
        assert rc == 0, rc
        return self.out, self.lse


def prefill_kernel():
    """Which prefill kernel runs on this device ("sm90a" or "portable")."""
    return lib().hk_attn_prefill_cuda_kernel().decode()
