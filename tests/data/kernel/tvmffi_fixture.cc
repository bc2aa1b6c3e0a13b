// A tiny tvm-ffi kernel for the loader tests: every argument kind, a raised error, a returned
// string and a returned tensor, and a tensor read as third-party kernels (FlashInfer's norm) read
// theirs. Built against the apache-tvm-ffi wheel's headers.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <sstream>

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

// Every DLTensor field, read through TensorView as third-party kernels do: size(i) and stride(i)
// (which reads strides[i] unchecked), dtype, device, byte_offset, IsContiguous; the elements
// (float32, any rank) are addressed through the strides and summed weighted by their row-major
// index, so a wrong stride or offset shows in the result.
static ffi::String inspect(ffi::TensorView x) {
  TVM_FFI_ICHECK(x.dtype().code == kDLFloat && x.dtype().bits == 32) << "inspect expects float32";
  TVM_FFI_ICHECK(x.device().device_type == kDLCPU) << "inspect expects a CPU tensor";
  std::ostringstream os;
  os << "shape=";
  for (int d = 0; d < x.ndim(); ++d) os << (d ? "x" : "") << x.size(d);
  os << " strides=";
  for (int d = 0; d < x.ndim(); ++d) os << (d ? "," : "") << x.stride(d);
  os << " dtype=" << int(x.dtype().code) << ":" << int(x.dtype().bits) << ":" << x.dtype().lanes
     << " device=" << x.device().device_type << ":" << x.device().device_id << " offset=" << x.byte_offset()
     << " contiguous=" << x.IsContiguous();
  const char* base = static_cast<const char*>(x.data_ptr()) + x.byte_offset();
  double sum = 0;
  for (int64_t k = 0; k < x.numel(); ++k) {
    int64_t rest = k, off = 0;
    for (int d = x.ndim() - 1; d >= 0; --d) {
      off += (rest % x.size(d)) * x.stride(d);
      rest /= x.size(d);
    }
    sum += static_cast<double>(reinterpret_cast<const float*>(base)[off]) * static_cast<double>(k + 1);
  }
  os << " sum=" << sum;
  return ffi::String(os.str());
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, add_one);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(mix, mix);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(fail, fail);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(greet, greet);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(is_none, is_none);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(current_stream, current_stream);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(inspect, inspect);
