// tvm-ffi binding of the RMSNorm kernels. Exports (symbols __tvm_ffi_<name>):
//   rms_norm(out, x, weight, eps)              out = x * rsqrt(mean(x^2, -1) + eps) * weight
//   fused_add_rms_norm(x, residual, weight, eps) residual += x; x = rms_norm(residual) * weight
// Tensors arrive as DLTensor* (type index kTVMFFIDLTensorPtr, what a C caller passes) or as
// tvm-ffi Tensor objects (what Python passes); tvm::ffi::TensorView accepts both. Every argument is
// checked before anything is launched; a bad one raises a tvm-ffi ValueError/TypeError whose
// message names the argument and what was expected. CPU tensors run the portable C kernels; when
// built with RMSNORM_WITH_CUDA, CUDA tensors run the CUDA kernels on the stream that
// TVMFFIEnvGetStream returns for the tensor's device.
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "../rmsnorm_cpu/rmsnorm_cpu.h"
#ifdef RMSNORM_WITH_CUDA
#include "../rmsnorm_cuda/rmsnorm_cuda.h"
#endif

namespace {

using tvm::ffi::TensorView;

std::string dtype_name(DLDataType t) {
    std::ostringstream os;
    switch (t.code) {
    case kDLFloat: os << "float"; break;
    case kDLBfloat: os << "bfloat"; break;
    case kDLInt: os << "int"; break;
    case kDLUInt: os << "uint"; break;
    default: os << "type" << int(t.code) << "_"; break;
    }
    os << int(t.bits);
    if (t.lanes != 1) os << "x" << t.lanes;
    return os.str();
}

std::string device_name(DLDevice d) {
    std::ostringstream os;
    switch (d.device_type) {
    case kDLCPU: os << "cpu"; break;
    case kDLCUDA: os << "cuda"; break;
    case kDLCUDAHost: os << "cuda_host"; break;
    default: os << "device_type" << int(d.device_type); break;
    }
    os << ":" << d.device_id;
    return os.str();
}

std::string shape_str(const TensorView &t) {
    std::ostringstream os;
    os << "[";
    for (int i = 0; i < t.ndim(); i++) os << (i ? ", " : "") << t.size(i);
    os << "]";
    return os.str();
}

bool to_rms_dtype(DLDataType t, rmsnorm_dtype *out) {
    if (t.lanes != 1) return false;
    if (t.code == kDLFloat && t.bits == 32) { *out = RMSNORM_F32; return true; }
    if (t.code == kDLFloat && t.bits == 16) { *out = RMSNORM_F16; return true; }
    if (t.code == kDLBfloat && t.bits == 16) { *out = RMSNORM_BF16; return true; }
    return false;
}

void *data_of(const TensorView &t) {
    return static_cast<char *>(t.data_ptr()) + t.byte_offset();
}

bool device_supported(DLDevice d) {
    if (d.device_type == kDLCPU) return true;
#ifdef RMSNORM_WITH_CUDA
    if (d.device_type == kDLCUDA) return true;
#endif
    return false;
}

const char *supported_devices() {
#ifdef RMSNORM_WITH_CUDA
    return "cpu or cuda";
#else
    return "cpu (this is the CPU build)";
#endif
}

struct Problem {
    rmsnorm_dtype dt;
    rmsnorm_dtype wdt;
    int64_t rows;
    int64_t hidden;
    DLDevice device;
};

// Checks (a, b, weight, eps) for either op; `a`/`b` are (out, x) or (x, residual).
Problem check_args(const char *op, const char *a_name, const TensorView &a, const char *b_name,
                   const TensorView &b, const TensorView &weight, double eps) {
    Problem p{};
    const TensorView *ts[3] = {&a, &b, &weight};
    const char *names[3] = {a_name, b_name, "weight"};
    for (int i = 0; i < 3; i++) {
        const TensorView &t = *ts[i];
        if (t.data_ptr() == nullptr && t.numel() != 0)
            TVM_FFI_THROW(ValueError) << op << ": `" << names[i] << "` has no data (NULL pointer)";
        if (!device_supported(t.device()))
            TVM_FFI_THROW(ValueError) << op << ": `" << names[i] << "` is on "
                                      << device_name(t.device()) << "; this kernel takes "
                                      << supported_devices() << " tensors";
        if (!t.IsContiguous())
            TVM_FFI_THROW(ValueError) << op << ": `" << names[i] << "` (shape " << shape_str(t)
                                      << ") is not contiguous; pass a contiguous tensor "
                                         "(e.g. .contiguous())";
    }
    if (a.device().device_type != b.device().device_type ||
        a.device().device_id != b.device().device_id ||
        a.device().device_type != weight.device().device_type ||
        a.device().device_id != weight.device().device_id)
        TVM_FFI_THROW(ValueError) << op << ": tensors are on different devices (`" << a_name
                                  << "` " << device_name(a.device()) << ", `" << b_name << "` "
                                  << device_name(b.device()) << ", `weight` "
                                  << device_name(weight.device()) << "); put them on one device";
    if (!to_rms_dtype(b.dtype(), &p.dt))
        TVM_FFI_THROW(TypeError) << op << ": `" << b_name << "` has dtype " << dtype_name(b.dtype())
                                 << "; supported: float32, float16, bfloat16";
    if (a.dtype().code != b.dtype().code || a.dtype().bits != b.dtype().bits ||
        a.dtype().lanes != b.dtype().lanes)
        TVM_FFI_THROW(TypeError) << op << ": dtype mismatch: `" << a_name << "` is "
                                 << dtype_name(a.dtype()) << " but `" << b_name << "` is "
                                 << dtype_name(b.dtype()) << "; they must match";
    if (!to_rms_dtype(weight.dtype(), &p.wdt) || (p.wdt != p.dt && p.wdt != RMSNORM_F32))
        TVM_FFI_THROW(TypeError) << op << ": `weight` has dtype " << dtype_name(weight.dtype())
                                 << "; it must be " << dtype_name(b.dtype()) << " (the input's) or float32";
    if (b.ndim() < 1)
        TVM_FFI_THROW(ValueError) << op << ": `" << b_name << "` is a scalar (0-d); it needs a "
                                  << "last (hidden) dimension";
    if (a.ndim() != b.ndim())
        TVM_FFI_THROW(ValueError) << op << ": shape mismatch: `" << a_name << "` is " << shape_str(a)
                                  << " but `" << b_name << "` is " << shape_str(b);
    for (int i = 0; i < b.ndim(); i++)
        if (a.size(i) != b.size(i))
            TVM_FFI_THROW(ValueError) << op << ": shape mismatch: `" << a_name << "` is "
                                      << shape_str(a) << " but `" << b_name << "` is "
                                      << shape_str(b);
    p.hidden = b.size(b.ndim() - 1);
    if (weight.ndim() != 1 || weight.size(0) != p.hidden)
        TVM_FFI_THROW(ValueError) << op << ": `weight` has shape " << shape_str(weight)
                                  << "; expected [" << p.hidden << "] (the last dimension of `"
                                  << b_name << "`)";
    if (!(eps >= 0.0) || !std::isfinite(eps))
        TVM_FFI_THROW(ValueError) << op << ": eps must be a finite number >= 0, got " << eps;
    p.rows = p.hidden == 0 ? 0 : b.numel() / p.hidden;
    p.device = b.device();
    return p;
}

#ifdef RMSNORM_WITH_CUDA
// Programmatic dependent launch (sm_90+; ignored before): a norm's launch and ramp-up overlap the
// previous kernel's tail, 0.3-0.5 us of a small call (NOTES.md v4). The kernel waits for that
// kernel's completion before it reads memory, so any producer of its inputs is safe.
constexpr unsigned kLaunchFlags = RMSNORM_CUDA_PDL;

void check_cuda(const char *op, int err) {
    if (err != 0)
        TVM_FFI_THROW(RuntimeError) << op << ": CUDA error " << err << " ("
                                    << rmsnorm_cuda_error_string(err) << ")";
}
#endif

void rms_norm(TensorView out, TensorView x, TensorView weight, double eps) {
    Problem p = check_args("rms_norm", "out", out, "x", x, weight, eps);
    if (p.rows == 0) return;
#ifdef RMSNORM_WITH_CUDA
    if (p.device.device_type == kDLCUDA) {
        void *stream = TVMFFIEnvGetStream(p.device.device_type, p.device.device_id);
        check_cuda("rms_norm",
                   rmsnorm_cuda_rms_norm_ex(data_of(out), data_of(x), data_of(weight), p.dt, p.wdt,
                                         p.rows, p.hidden, (float)eps, p.device.device_id, stream,
                                         kLaunchFlags));
        return;
    }
#endif
    rmsnorm_cpu_rms_norm(data_of(out), data_of(x), data_of(weight), p.dt, p.wdt, p.rows, p.hidden,
                         (float)eps);
}

void fused_add_rms_norm(TensorView x, TensorView residual, TensorView weight, double eps) {
    Problem p = check_args("fused_add_rms_norm", "x", x, "residual", residual, weight, eps);
    if (p.rows == 0) return;
    if (data_of(x) == data_of(residual))
        TVM_FFI_THROW(ValueError) << "fused_add_rms_norm: `x` and `residual` are the same memory; "
                                     "they must be distinct tensors";
#ifdef RMSNORM_WITH_CUDA
    if (p.device.device_type == kDLCUDA) {
        void *stream = TVMFFIEnvGetStream(p.device.device_type, p.device.device_id);
        check_cuda("fused_add_rms_norm",
                   rmsnorm_cuda_fused_add_rms_norm_ex(data_of(x), data_of(residual), data_of(weight),
                                                   p.dt, p.wdt, p.rows, p.hidden, (float)eps,
                                                   p.device.device_id, stream, kLaunchFlags));
        return;
    }
#endif
    rmsnorm_cpu_fused_add_rms_norm(data_of(x), data_of(residual), data_of(weight), p.dt, p.wdt,
                                   p.rows, p.hidden, (float)eps);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms_norm, rms_norm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(fused_add_rms_norm, fused_add_rms_norm);
