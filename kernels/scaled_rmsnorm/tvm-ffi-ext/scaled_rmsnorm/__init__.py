"""Scaled RMSNorm, tvm-ffi build: out = rms_norm(x, weight, eps) * scale, where rms_norm is the
kernel this one depends on (hubkern/rmsnorm, version 1, declared in metadata.json kernel-depends).

    scaled_rms_norm(out, x, weight, scale, eps=1e-6)

kernels loads the dependency first and hands it over during this import (get_kernel_dep); its
tvm-ffi function is passed to the native code as an argument."""
from kernels import get_kernel_dep

from ._ops import ops

_rmsnorm = get_kernel_dep("hubkern/rmsnorm")


def scaled_rms_norm(out, x, weight, scale: float, eps: float = 1e-6):
    ops.scaled_rms_norm(out, x, weight, float(scale), float(eps), _rmsnorm.ops.rms_norm)
    return out


__all__ = ["scaled_rms_norm"]
