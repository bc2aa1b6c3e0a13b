/* hubkern/call.h — calling the functions of a loaded tvm-ffi kernel from C: DLPack tensors, the
 * value type, hk_kernel_call / hk_function_call, the stream, and the tvm-ffi runtime itself. The
 * handle comes from hubkern/kernel.h (hk_get_kernel). */
#ifndef HUBKERN_CALL_H
#define HUBKERN_CALL_H

#include "hubkern/common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hk_kernel hk_kernel;
typedef struct hk_function hk_function;

#ifdef __cplusplus
extern "C" {
#endif

/* ---- calling (tvm-ffi variants) ------------------------------------------------------------ */

/* A DLPack DLTensor, laid out identically (DLPack v1: the layout tvm-ffi 0.1 uses). */
typedef enum hk_device_type {
    HK_DEVICE_CPU = 1,
    HK_DEVICE_CUDA = 2,
    HK_DEVICE_CUDA_HOST = 3,
    HK_DEVICE_METAL = 8,
    HK_DEVICE_ROCM = 10
} hk_device_type;

typedef enum hk_dtype_code {
    HK_DTYPE_INT = 0,
    HK_DTYPE_UINT = 1,
    HK_DTYPE_FLOAT = 2,
    HK_DTYPE_BFLOAT = 4
} hk_dtype_code;

typedef struct hk_device {
    int32_t device_type; /* hk_device_type */
    int32_t device_id;
} hk_device;

typedef struct hk_dtype {
    uint8_t code;  /* hk_dtype_code */
    uint8_t bits;  /* 16, 32, ... */
    uint16_t lanes; /* 1 */
} hk_dtype;

typedef struct hk_dltensor {
    void *data;
    hk_device device;
    int32_t ndim;
    hk_dtype dtype;
    int64_t *shape;
    int64_t *strides;     /* NULL: compact row-major (a call hands the kernel those strides) */
    uint64_t byte_offset;
} hk_dltensor;

typedef enum hk_value_kind {
    HK_VALUE_NONE = 0,
    HK_VALUE_INT = 1,
    HK_VALUE_FLOAT = 2,
    HK_VALUE_BOOL = 3,
    HK_VALUE_TENSOR = 4,  /* argument: a caller-owned DLTensor; result: one owned by the value */
    HK_VALUE_STRING = 5,  /* argument: caller-owned C string; result: owned by the value */
    HK_VALUE_FUNCTION = 6 /* argument only: a tvm-ffi function (e.g. a dependency's, see
                             hk_kernel_dependency), passed as a tvm-ffi Function object */
} hk_value_kind;

typedef struct hk_value {
    hk_value_kind kind;
    union {
        int64_t i;
        double f;
        int b; /* 0 / 1 */
        hk_dltensor *tensor;
        const char *str;
        const struct hk_function *fn;
    } v;
    void *owner_; /* internal: set on results that own runtime objects; release with hk_value_clear */
} hk_value;

static inline hk_value hk_value_none(void) { hk_value x = {HK_VALUE_NONE, {0}, 0}; return x; }
static inline hk_value hk_value_int(int64_t i) { hk_value x = {HK_VALUE_INT, {0}, 0}; x.v.i = i; return x; }
static inline hk_value hk_value_float(double f) { hk_value x = {HK_VALUE_FLOAT, {0}, 0}; x.v.f = f; return x; }
static inline hk_value hk_value_bool(int b) { hk_value x = {HK_VALUE_BOOL, {0}, 0}; x.v.b = b != 0; return x; }
static inline hk_value hk_value_tensor(hk_dltensor *t) { hk_value x = {HK_VALUE_TENSOR, {0}, 0}; x.v.tensor = t; return x; }
static inline hk_value hk_value_string(const char *s) { hk_value x = {HK_VALUE_STRING, {0}, 0}; x.v.str = s; return x; }
/* A function of a loaded tvm-ffi kernel as an argument: how a caller hands a dependent kernel its
 * dependency's code, as the dependent's Python wrapper does with get_kernel_dep (docs/loading.md). */
static inline hk_value hk_value_function(const struct hk_function *f) { hk_value x = {HK_VALUE_FUNCTION, {0}, 0}; x.v.fn = f; return x; }

/* Release what a call result owns (a returned tensor or string) and reset it to none. Safe on
 * argument values and on none. */
HK_API void hk_value_clear(hk_value *value);

/* Look a function up by name (without the `__tvm_ffi_` prefix). The pointer lives as long as the
 * kernel handle. HK_ERR_SYMBOL lists the exported names; HK_ERR_UNSUPPORTED for non-tvm-ffi kinds. */
HK_API int hk_kernel_function(const hk_function **out, const hk_kernel *k, const char *name);

/* Call with `num_args` arguments. `out_result` may be NULL (a returned value is then released).
 * Errors raised inside the kernel: HK_ERR_TYPE for the runtime's TypeError (wrong argument count
 * or types), HK_ERR_KERNEL otherwise; hk_last_error() carries "<Kind>: <kernel's message>". */
HK_API int hk_function_call(hk_value *out_result, const hk_function *fn, const hk_value *args,
                            size_t num_args);
/* hk_kernel_function + hk_function_call. */
HK_API int hk_kernel_call(hk_value *out_result, const hk_kernel *k, const char *name,
                          const hk_value *args, size_t num_args);

/* Set the current stream that tvm-ffi kernels see for a device on the calling thread
 * (TVMFFIEnvSetStream; kernels read it with TVMFFIEnvGetStream). `previous` may be NULL.
 * Needs the tvm-ffi runtime (loaded by the first tvm-ffi kernel, or hk_tvm_ffi_load). */
HK_API int hk_set_stream(void **previous, int32_t device_type, int32_t device_id, void *stream);

/* Load libtvm_ffi now (explicit path or NULL for the search described above). Idempotent; the
 * first runtime loaded stays. *out_path (may be NULL) gets where it came from (static string). */
HK_API int hk_tvm_ffi_load(const char **out_path, const char *explicit_path);
/* Version of the loaded runtime (TVMFFIGetVersion). HK_ERR_RUNTIME_MISSING before loading. */
HK_API int hk_tvm_ffi_version(int *major, int *minor, int *patch);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_CALL_H */
