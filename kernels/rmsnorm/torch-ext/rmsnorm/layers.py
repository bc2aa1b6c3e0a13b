"""Layers for kernels.kernelize: stateless classes whose forward replaces a model layer's forward.

RMSNorm reads `self.weight` and `self.variance_epsilon` (falling back to `self.eps`), the
attributes of transformers' LlamaRMSNorm / Qwen3RMSNorm and their many copies."""
import torch

from ._ops import ops


class RMSNorm(torch.nn.Module):
    has_backward = False
    can_torch_compile = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, "variance_epsilon", None)
        if eps is None:
            eps = getattr(self, "eps", 1e-6)
        x = hidden_states.contiguous()
        weight = self.weight
        if weight.dtype != x.dtype and weight.dtype != torch.float32:
            weight = weight.to(x.dtype)
        out = torch.empty_like(x)
        ops.rms_norm(out, x, weight, float(eps))
        return out


__all__ = ["RMSNorm"]
