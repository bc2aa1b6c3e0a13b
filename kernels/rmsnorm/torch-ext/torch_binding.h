// torch-ext binding of the RMSNorm kernels: ops registered under the namespace given by
// RMSNORM_OPS_NAMESPACE (the variant's metadata id), kernel-builder style.
#pragma once

#include <ATen/core/Tensor.h>

void rms_norm(at::Tensor &out, const at::Tensor &x, const at::Tensor &weight, double eps);
void fused_add_rms_norm(at::Tensor &x, at::Tensor &residual, const at::Tensor &weight, double eps);
