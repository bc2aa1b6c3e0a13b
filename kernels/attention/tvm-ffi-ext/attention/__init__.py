"""Attention kernels (prefill/varlen and decode), tvm-ffi build.

    varlen_attention(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     causal=False, softmax_scale=None)
        q [Tq,Hq,D], k/v [Tk,Hkv,D] (packed sequences), out like q, lse float32 [Hq,Tq]
    decode_attention(out, lse, q, k_cache, v_cache, seqlens_k, max_seqlen_k,
                     block_table=None, softmax_scale=None, workspace=None)
        q/out [B,q_len<=8,Hq,D], lse float32 [B,q_len,Hq]; cache [B,S,Hkv,D], or paged
        [num_blocks,block_size,Hkv,D] with block_table int32 [B,max_blocks]; seqlens_k counts the
        q_len new tokens too. workspace (CUDA): uint8, zero-filled once, of
        decode_workspace_bytes(...) bytes; without it one split is used.
    decode_fp8_attention(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k, max_seqlen_k,
                         block_table=None, softmax_scale=None, workspace=None)
        decode_attention over an FP8 cache: k/v_cache float8_e4m3fn (same shapes), k_scale / v_scale
        float32 with 1 (per tensor) or Hkv (per kv head) elements; dequantised value = code * scale.

dtype bfloat16 or float16 (CUDA: head_dim 64 or 128); float32 accumulation. Causal masking is
bottom-right aligned (query i of Lq sees key j <= i + Lk - Lq); rows that see no key give 0 and
LSE -inf. Tensors: anything tvm-ffi accepts (torch tensors run on torch's current stream, numpy
arrays, DLPack producers). Both functions return `out`."""
import math

from ._ops import ops


def varlen_attention(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                     causal: bool = False, softmax_scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    ops.varlen_fwd(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), bool(causal), scale)
    return out


def decode_workspace_bytes(batch: int, q_len: int, num_heads_q: int, num_heads_kv: int,
                           head_dim: int, max_seqlen_k: int) -> int:
    return int(ops.decode_workspace_bytes(batch, q_len, num_heads_q, num_heads_kv, head_dim, max_seqlen_k))


def decode_attention(out, lse, q, k_cache, v_cache, seqlens_k, max_seqlen_k: int, block_table=None,
                     softmax_scale=None, workspace=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    empty = seqlens_k[:0]  # an empty int32 tensor on the right device stands for "none"
    ops.decode_fwd(out, lse, q, k_cache, v_cache, seqlens_k,
                   empty.reshape(0, 1) if block_table is None else block_table, int(max_seqlen_k), scale,
                   seqlens_k[:0] if workspace is None else workspace)
    return out


def decode_fp8_attention(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k, max_seqlen_k: int,
                         block_table=None, softmax_scale=None, workspace=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    empty = seqlens_k[:0]
    ops.decode_fp8_fwd(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k,
                       empty.reshape(0, 1) if block_table is None else block_table, int(max_seqlen_k), scale,
                       seqlens_k[:0] if workspace is None else workspace)
    return out


__all__ = ["decode_attention", "decode_fp8_attention", "decode_workspace_bytes", "varlen_attention"]
