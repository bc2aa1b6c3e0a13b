"""RMSNorm kernels, tvm-ffi build.

    rms_norm(out, x, weight, eps=1e-6)            out = x * rsqrt(mean(x**2, -1) + eps) * weight
    fused_add_rms_norm(x, residual, weight, eps)  residual += x; x = rms_norm(residual) * weight

Tensors are anything tvm-ffi accepts: torch tensors (the call runs on torch's current stream),
numpy arrays, DLPack capsules' producers, tvm_ffi.Tensor. dtype float32, float16 or bfloat16;
`weight` of the input's dtype or float32; contiguous; all on one device. Both return their first
argument. Invalid input raises ValueError/TypeError with the reason."""
from ._ops import ops


def rms_norm(out, x, weight, eps: float = 1e-6):
    ops.rms_norm(out, x, weight, float(eps))
    return out


def fused_add_rms_norm(x, residual, weight, eps: float = 1e-6):
    ops.fused_add_rms_norm(x, residual, weight, float(eps))
    return x


__all__ = ["fused_add_rms_norm", "rms_norm"]
