/* RMSNorm reference kernels for the CPU, in portable C11.
 *
 *   rms_norm:            out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w
 *   fused_add_rms_norm:  residual[r, :] += x[r, :];  x[r, :] = rms_norm(residual[r, :]) * w
 *
 * Tensors are row-major and contiguous: `rows` rows of `hidden` elements. Element types are
 * float32, float16 or bfloat16; the weight is of the input's type or float32. Arithmetic is float32
 * (sums too); float16/bfloat16 results are rounded to nearest, ties to even. Pointers need only the
 * alignment of their element type. The *_rows functions do rows [row_begin, row_end) and are safe
 * to call from several threads on disjoint row ranges; the plain functions split the rows over
 * OpenMP threads when built with OpenMP and the tensor is large enough. */
#ifndef RMSNORM_CPU_H
#define RMSNORM_CPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rmsnorm_dtype { RMSNORM_F32 = 0, RMSNORM_F16 = 1, RMSNORM_BF16 = 2 } rmsnorm_dtype;

/* Size in bytes of one element of `dt` (0 for an unknown value). */
int rmsnorm_dtype_size(rmsnorm_dtype dt);

void rmsnorm_cpu_rms_norm_rows(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                               rmsnorm_dtype weight_dt, int64_t hidden, int64_t row_begin,
                               int64_t row_end, float eps);
void rmsnorm_cpu_fused_add_rms_norm_rows(void *x, void *residual, const void *weight,
                                         rmsnorm_dtype dt, rmsnorm_dtype weight_dt, int64_t hidden,
                                         int64_t row_begin, int64_t row_end, float eps);

void rmsnorm_cpu_rms_norm(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                          rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden, float eps);
void rmsnorm_cpu_fused_add_rms_norm(void *x, void *residual, const void *weight, rmsnorm_dtype dt,
                                    rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden,
                                    float eps);

/* Scalar conversions (round to nearest even; NaN stays NaN, overflow gives infinity). */
float rmsnorm_bf16_to_f32(uint16_t h);
uint16_t rmsnorm_f32_to_bf16(float f);
float rmsnorm_f16_to_f32(uint16_t h);
uint16_t rmsnorm_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif

#endif
