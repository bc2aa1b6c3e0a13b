/* RMSNorm CUDA launchers with a C ABI (shared by the tvm-ffi and torch bindings).
 * Pointers are device pointers of contiguous [rows, hidden] tensors (weight: [hidden]); `device`
 * is the CUDA ordinal the tensors live on; `stream` is a cudaStream_t (NULL = legacy default).
 * Returns 0 or a cudaError_t value. Semantics as in rmsnorm_cpu.h. */
#ifndef RMSNORM_CUDA_H
#define RMSNORM_CUDA_H

#include <stdint.h>

#include "../rmsnorm_cpu/rmsnorm_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

int rmsnorm_cuda_rms_norm(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                          rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden, float eps,
                          int device, void *stream);
int rmsnorm_cuda_fused_add_rms_norm(void *x, void *residual, const void *weight, rmsnorm_dtype dt,
                                    rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden,
                                    float eps, int device, void *stream);
/* The same with a flags word. RMSNORM_CUDA_PDL: programmatic dependent launch on sm_90+ (the
 * launch may overlap the previous kernel's tail in the stream; the kernel waits for that kernel's
 * completion before it reads memory); ignored on older devices. */
#define RMSNORM_CUDA_PDL 1u
int rmsnorm_cuda_rms_norm_ex(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                             rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden, float eps,
                             int device, void *stream, unsigned flags);
int rmsnorm_cuda_fused_add_rms_norm_ex(void *x, void *residual, const void *weight,
                                       rmsnorm_dtype dt, rmsnorm_dtype weight_dt, int64_t rows,
                                       int64_t hidden, float eps, int device, void *stream,
                                       unsigned flags);
const char *rmsnorm_cuda_error_string(int err);

#ifdef __cplusplus
}
#endif

#endif
