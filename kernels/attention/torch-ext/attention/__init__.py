"""Attention kernels (prefill/varlen and decode), torch build: ops registered under this variant's
metadata id (torch.ops.<id>.varlen_fwd / decode_fwd / decode_workspace_bytes).

    varlen_attention(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     causal=False, softmax_scale=None)
        q [Tq,Hq,D], k/v [Tk,Hkv,D] (packed sequences), out like q, lse float32 [Hq,Tq],
        cu_seqlens int32 [B+1]
    decode_attention(out, lse, q, k_cache, v_cache, seqlens_k, max_seqlen_k,
                     block_table=None, softmax_scale=None, workspace=None)
        q/out [B,q_len<=8,Hq,D], lse float32 [B,q_len,Hq]; cache [B,S,Hkv,D] (any strides with a
        unit last stride, e.g. an SDPA [B,Hkv,S,D] cache passed as .transpose(1, 2)), or paged
        [num_blocks,block_size,Hkv,D] with block_table int32 [B,max_blocks]; seqlens_k counts
        the q_len new tokens too. workspace (CUDA): uint8, zero-filled once, of
        decode_workspace_bytes(...) bytes; without it one split is used.
    decode_fp8_attention(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k, max_seqlen_k,
                         block_table=None, softmax_scale=None, workspace=None)
        decode_attention over an FP8 cache: k/v_cache float8_e4m3fn (same shapes), k_scale / v_scale
        float32 with 1 (per tensor) or Hkv (per kv head) elements; dequantised value = code * scale.

dtype bfloat16 or float16 (CUDA: head_dim 64 or 128); float32 accumulation. Causal masking is
bottom-right aligned (query i of Lq sees key j <= i + Lk - Lq); rows that see no key give 0 and
LSE -inf. CUDA tensors run on torch's current stream; CPU tensors run the C implementation. Same
argument order as the tvm-ffi build. Both functions return `out`."""
import math

import torch

from ._ops import ops


def varlen_attention(out: torch.Tensor, lse: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                     max_seqlen_q: int, causal: bool = False, softmax_scale=None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    ops.varlen_fwd(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), bool(causal), scale)
    return out


def decode_workspace_bytes(batch: int, q_len: int, num_heads_q: int, num_heads_kv: int,
                           head_dim: int, max_seqlen_k: int) -> int:
    return int(ops.decode_workspace_bytes(batch, q_len, num_heads_q, num_heads_kv, head_dim, max_seqlen_k))


def decode_attention(out: torch.Tensor, lse: torch.Tensor, q: torch.Tensor, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, seqlens_k: torch.Tensor, max_seqlen_k: int,
                     block_table=None, softmax_scale=None, workspace=None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    if workspace is None:  # an empty tensor stands for "none": one split
        workspace = torch.empty(0, dtype=torch.uint8, device=q.device)
    ops.decode_fwd(out, lse, q, k_cache, v_cache, seqlens_k, block_table, int(max_seqlen_k), scale, workspace)
    return out


def decode_fp8_attention(out: torch.Tensor, lse: torch.Tensor, q: torch.Tensor, k_cache: torch.Tensor,
                         v_cache: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor,
                         seqlens_k: torch.Tensor, max_seqlen_k: int, block_table=None, softmax_scale=None,
                         workspace=None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    if workspace is None:
        workspace = torch.empty(0, dtype=torch.uint8, device=q.device)
    ops.decode_fp8_fwd(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k, block_table, int(max_seqlen_k),
                       scale, workspace)
    return out


__all__ = ["decode_attention", "decode_fp8_attention", "decode_workspace_bytes", "varlen_attention"]
