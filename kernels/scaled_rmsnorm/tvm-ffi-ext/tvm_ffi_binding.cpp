// tvm-ffi binding of scaled RMSNorm, a kernel that reaches another kernel's code through its
// dependency (kernel-depends: hubkern/rmsnorm, version 1). Export (symbol __tvm_ffi_scaled_rms_norm):
//   scaled_rms_norm(out, x, weight, scale, eps, rms_norm)   out = rms_norm(x, weight, eps) * scale
// `rms_norm` is the dependency's own function as a tvm-ffi Function object: the Python wrapper
// passes get_kernel_dep("hubkern/rmsnorm").ops.rms_norm, a C caller of hubkern passes
// hk_value_function of hk_kernel_function(hk_kernel_dependency(k, "hubkern/rmsnorm"), "rms_norm").
// The two libraries are never linked to each other (each is dlopen'ed RTLD_LOCAL); the call goes
// through the tvm-ffi runtime's calling convention. float32, contiguous, CPU.
#include <tvm/ffi/tvm_ffi.h>

#include <cmath>
#include <cstdint>

namespace {

using tvm::ffi::Function;
using tvm::ffi::TensorView;

bool is_f32(const TensorView &t) {
    DLDataType d = t.dtype();
    return d.code == kDLFloat && d.bits == 32 && d.lanes == 1;
}

void scaled_rms_norm(TensorView out, TensorView x, TensorView weight, double scale, double eps,
                     Function rms_norm) {
    if (!is_f32(out) || !is_f32(x))
        TVM_FFI_THROW(TypeError) << "scaled_rms_norm: `out` and `x` must be float32";
    if (out.device().device_type != kDLCPU || !out.IsContiguous())
        TVM_FFI_THROW(ValueError) << "scaled_rms_norm: `out` must be a contiguous CPU tensor";
    if (!std::isfinite(scale)) TVM_FFI_THROW(ValueError) << "scaled_rms_norm: `scale` must be finite";
    if (rms_norm == nullptr) TVM_FFI_THROW(ValueError) << "scaled_rms_norm: no rms_norm function given";
    rms_norm(out, x, weight, eps); // the dependency checks its arguments and raises its own errors
    float *p = reinterpret_cast<float *>(static_cast<char *>(out.data_ptr()) + out.byte_offset());
    const float s = static_cast<float>(scale);
    for (int64_t i = 0, n = out.numel(); i < n; i++) p[i] *= s;
}

} // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(scaled_rms_norm, scaled_rms_norm);
