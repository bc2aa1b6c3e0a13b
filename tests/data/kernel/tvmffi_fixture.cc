// A tiny tvm-ffi kernel for the loader tests: every argument kind, a raised error, a returned
// string and a returned tensor. Built against the apache-tvm-ffi wheel's headers.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdint>

namespace ffi = tvm::ffi;

static int64_t add_one(int64_t x) { return x + 1; }

static double mix(int64_t i, double f, bool b) { return b ? static_cast<double>(i) * f : -1.0; }

// out[k] = x[k] * s for float32 1-D tensors on the CPU
static void scale(ffi::TensorView out, ffi::TensorView x, double s) {
  TVM_FFI_ICHECK(x.ndim() == 1 && out.ndim() == 1) << "scale expects 1-D tensors";
  TVM_FFI_ICHECK(x.size(0) == out.size(0)) << "scale: shape mismatch " << x.size(0) << " vs " << out.size(0);
  TVM_FFI_ICHECK(x.dtype().code == kDLFloat && x.dtype().bits == 32) << "scale expects float32";
  const float* src = static_cast<const float*>(x.data_ptr());
  float* dst = static_cast<float*>(out.data_ptr());
  for (int64_t k = 0; k < x.size(0); ++k) dst[k] = src[k] * static_cast<float>(s);
}

static void fail(ffi::String why) { TVM_FFI_THROW(ValueError) << "fixture failure: " << why; }

static ffi::String greet(ffi::String who) { return ffi::String(std::string("hello, ") + who.c_str() + "!"); }

static bool is_none(ffi::Optional<int64_t> v) { return !v.has_value(); }

// the stream the caller set with TVMFFIEnvSetStream for (device_type, 0), as an integer
static int64_t current_stream(int64_t device_type) {
  return reinterpret_cast<int64_t>(TVMFFIEnvGetStream(static_cast<int32_t>(device_type), 0));
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, add_one);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(mix, mix);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(fail, fail);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(greet, greet);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(is_none, is_none);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(current_stream, current_stream);
