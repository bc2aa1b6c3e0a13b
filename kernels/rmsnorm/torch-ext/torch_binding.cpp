// torch-ext binding: registers
//   <ns>::rms_norm(Tensor! out, Tensor x, Tensor weight, float eps) -> ()
//   <ns>::fused_add_rms_norm(Tensor! x, Tensor! residual, Tensor weight, float eps) -> ()
// for CUDA (the CUDA kernels on torch's current stream of the tensors' device), CPU (the portable C
// kernels) and Meta (checks only, so torch.compile can trace the ops). <ns> = RMSNORM_OPS_NAMESPACE,
// the variant's metadata id, so that several builds can be loaded in one process. Loading the
// library registers the ops (static initialisers); with RMSNORM_PYINIT it is also an (empty)
// Python extension module named <ns>.
#include "torch_binding.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "../rmsnorm_cuda/rmsnorm_cuda.h"

#ifndef RMSNORM_OPS_NAMESPACE
#error "define RMSNORM_OPS_NAMESPACE as the kernel id, e.g. _rmsnorm_cuda_abc1234"
#endif

namespace {

struct Problem {
    rmsnorm_dtype dt;
    rmsnorm_dtype wdt;
    int64_t rows;
    int64_t hidden;
};

bool to_dt(at::ScalarType t, rmsnorm_dtype *out) {
    switch (t) {
    case at::kFloat: *out = RMSNORM_F32; return true;
    case at::kHalf: *out = RMSNORM_F16; return true;
    case at::kBFloat16: *out = RMSNORM_BF16; return true;
    default: return false;
    }
}

Problem check(const char *op, const char *an, const at::Tensor &a, const char *bn,
              const at::Tensor &b, const at::Tensor &w, double eps) {
    Problem p{};
    TORCH_CHECK(a.device() == b.device() && b.device() == w.device(), op,
                ": tensors are on different devices (`", an, "` ", a.device(), ", `", bn, "` ",
                b.device(), ", `weight` ", w.device(), "); put them on one device");
    TORCH_CHECK(b.is_cuda() || b.is_cpu() || b.is_meta(), op, ": `", bn, "` is on ", b.device(),
                "; this kernel takes cpu or cuda tensors");
    TORCH_CHECK(to_dt(b.scalar_type(), &p.dt), op, ": `", bn, "` has dtype ", b.scalar_type(),
                "; supported: float32, float16, bfloat16");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": dtype mismatch: `", an, "` is ",
                a.scalar_type(), " but `", bn, "` is ", b.scalar_type(), "; they must match");
    TORCH_CHECK(to_dt(w.scalar_type(), &p.wdt) && (p.wdt == p.dt || p.wdt == RMSNORM_F32), op,
                ": `weight` has dtype ", w.scalar_type(), "; it must be ", b.scalar_type(),
                " (the input's) or float32");
    TORCH_CHECK(b.dim() >= 1, op, ": `", bn, "` is a scalar (0-d); it needs a last (hidden) dimension");
    TORCH_CHECK(a.sizes() == b.sizes(), op, ": shape mismatch: `", an, "` is ", a.sizes(),
                " but `", bn, "` is ", b.sizes());
    p.hidden = b.size(-1);
    TORCH_CHECK(w.dim() == 1 && w.size(0) == p.hidden, op, ": `weight` has shape ", w.sizes(),
                "; expected [", p.hidden, "] (the last dimension of `", bn, "`)");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous() && w.is_contiguous(), op,
                ": tensors must be contiguous (`", an, "` ", a.is_contiguous() ? "is" : "is not",
                ", `", bn, "` ", b.is_contiguous() ? "is" : "is not", ", `weight` ",
                w.is_contiguous() ? "is" : "is not", "); call .contiguous() first");
    TORCH_CHECK(eps >= 0.0 && std::isfinite(eps), op, ": eps must be a finite number >= 0, got ",
                eps);
    p.rows = p.hidden == 0 ? 0 : b.numel() / p.hidden;
    return p;
}

// Programmatic dependent launch (sm_90+; ignored before): a norm's launch and ramp-up overlap the
// previous kernel's tail, 0.3-0.5 us of a small call (NOTES.md v4). The kernel waits for that
// kernel's completion before it reads memory, so any producer of its inputs is safe.
constexpr unsigned kLaunchFlags = RMSNORM_CUDA_PDL;

void check_cuda(const char *op, int err) {
    TORCH_CHECK(err == 0, op, ": CUDA error ", err, " (", rmsnorm_cuda_error_string(err), ")");
}

void rms_norm_meta(at::Tensor &out, const at::Tensor &x, const at::Tensor &weight, double eps) {
    check("rms_norm", "out", out, "x", x, weight, eps);
}

void fused_meta(at::Tensor &x, at::Tensor &residual, const at::Tensor &weight, double eps) {
    check("fused_add_rms_norm", "x", x, "residual", residual, weight, eps);
}

}  // namespace

void rms_norm(at::Tensor &out, const at::Tensor &x, const at::Tensor &weight, double eps) {
    Problem p = check("rms_norm", "out", out, "x", x, weight, eps);
    if (p.rows == 0) return;
    if (x.is_cuda()) {
        const c10::cuda::CUDAGuard guard(x.device());
        check_cuda("rms_norm",
                   rmsnorm_cuda_rms_norm_ex(out.data_ptr(), x.data_ptr(), weight.data_ptr(), p.dt,
                                         p.wdt, p.rows, p.hidden, (float)eps, x.get_device(),
                                         at::cuda::getCurrentCUDAStream(x.get_device()).stream(),
                                         kLaunchFlags));
    } else {
        rmsnorm_cpu_rms_norm(out.data_ptr(), x.data_ptr(), weight.data_ptr(), p.dt, p.wdt, p.rows,
                             p.hidden, (float)eps);
    }
}

void fused_add_rms_norm(at::Tensor &x, at::Tensor &residual, const at::Tensor &weight, double eps) {
    Problem p = check("fused_add_rms_norm", "x", x, "residual", residual, weight, eps);
    if (p.rows == 0) return;
    TORCH_CHECK(x.data_ptr() != residual.data_ptr(),
                "fused_add_rms_norm: `x` and `residual` are the same memory; they must be distinct");
    if (x.is_cuda()) {
        const c10::cuda::CUDAGuard guard(x.device());
        check_cuda("fused_add_rms_norm",
                   rmsnorm_cuda_fused_add_rms_norm_ex(
                       x.data_ptr(), residual.data_ptr(), weight.data_ptr(), p.dt, p.wdt, p.rows,
                       p.hidden, (float)eps, x.get_device(),
                       at::cuda::getCurrentCUDAStream(x.get_device()).stream(), kLaunchFlags));
    } else {
        rmsnorm_cpu_fused_add_rms_norm(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), p.dt,
                                       p.wdt, p.rows, p.hidden, (float)eps);
    }
}

// One more macro level so that RMSNORM_OPS_NAMESPACE is expanded before TORCH_LIBRARY pastes it.
#define RMSNORM_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define RMSNORM_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

RMSNORM_LIBRARY(RMSNORM_OPS_NAMESPACE, m) {
    m.def("rms_norm(Tensor! out, Tensor x, Tensor weight, float eps) -> ()");
    m.def("fused_add_rms_norm(Tensor! x, Tensor! residual, Tensor weight, float eps) -> ()");
}

RMSNORM_LIBRARY_IMPL(RMSNORM_OPS_NAMESPACE, CUDA, m) {
    m.impl("rms_norm", &rms_norm);
    m.impl("fused_add_rms_norm", &fused_add_rms_norm);
}

RMSNORM_LIBRARY_IMPL(RMSNORM_OPS_NAMESPACE, CPU, m) {
    m.impl("rms_norm", &rms_norm);
    m.impl("fused_add_rms_norm", &fused_add_rms_norm);
}

RMSNORM_LIBRARY_IMPL(RMSNORM_OPS_NAMESPACE, Meta, m) {
    m.impl("rms_norm", &rms_norm_meta);
    m.impl("fused_add_rms_norm", &fused_meta);
}

#ifdef RMSNORM_PYINIT
// An empty module, so that `from . import <id>` works too (the abi3 convention of torch variants).
#define Py_LIMITED_API 0x03090000
#include <Python.h>
#define RMSNORM_CAT_(a, b) a##b
#define RMSNORM_CAT(a, b) RMSNORM_CAT_(a, b)
#define RMSNORM_STR_(a) #a
#define RMSNORM_STR(a) RMSNORM_STR_(a)
extern "C" __attribute__((visibility("default"))) PyObject *RMSNORM_CAT(PyInit_, RMSNORM_OPS_NAMESPACE)(void) {
    static PyModuleDef def = {PyModuleDef_HEAD_INIT, RMSNORM_STR(RMSNORM_OPS_NAMESPACE), nullptr, 0,
                              nullptr, nullptr, nullptr, nullptr, nullptr};
    return PyModule_Create(&def);
}
#endif
