"""RMSNorm kernels, torch build (ops registered under this variant's metadata id).

    rms_norm(out, x, weight, eps=1e-6)            out = x * rsqrt(mean(x**2, -1) + eps) * weight
    fused_add_rms_norm(x, residual, weight, eps)  residual += x; x = rms_norm(residual) * weight

CUDA tensors run on torch's current stream; CPU tensors run the portable C kernels. dtype float32,
float16 or bfloat16; weight of the input's dtype or float32; contiguous. `layers.RMSNorm` is the
drop-in forward for transformers' RMSNorm modules (kernels.kernelize)."""
import torch

from ._ops import ops


def rms_norm(out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    ops.rms_norm(out, x, weight, eps)
    return out


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float = 1e-6) -> torch.Tensor:
    ops.fused_add_rms_norm(x, residual, weight, eps)
    return x


from . import layers  # noqa: E402  (layers imports the ops above)

__all__ = ["fused_add_rms_norm", "layers", "rms_norm"]
