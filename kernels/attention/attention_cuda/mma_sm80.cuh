// Device building blocks of the portable (sm_80+) kernels, the prefill of prefill_sm80.cu and the
// split-KV decode of decode_kernel.cu: cp.async 16-byte copies, ldmatrix, the XOR swizzle of their
// shared-memory tiles, and the online-softmax step over an mma.sync S tile.
#ifndef HK_ATTN_MMA_SM80_CUH
#define HK_ATTN_MMA_SM80_CUH

#include <math.h>
#include <stdint.h>

#include "attn_device.cuh"

namespace hk_attn_dev {

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool pred) {
    int n = pred ? 16 : 0;  // 0: zero-fill, nothing read
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Byte offset of 16-byte chunk c of row r in a [rows][D] 16-bit tile, XOR-swizzled so that the
// 8 rows an ldmatrix phase reads hit 8 different bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
    return static_cast<uint32_t>(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// The online-softmax state before the first key: running max -inf, row sums and O zero.
template <int MT, int DT>
__device__ __forceinline__ void softmax_init(float (&m)[MT][2], float (&l)[MT][2], float (&o)[MT][DT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    }
}

// Online-softmax step for one warp's S tile (MT m-tiles x NT n-tiles, raw dot products, masked
// entries -inf): updates the running max m (raw units) and the thread-partial row sum l,
// rescales O, and leaves exp2((s - m) * scale_log2) in s.
template <int MT, int NT, int DT>
__device__ __forceinline__ void softmax_step(float (&s)[MT][NT][4], float (&m)[MT][2],
                                             float (&l)[MT][2], float (&o)[MT][DT][4],
                                             float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float mx = m[mt][hr];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
            mx = quad_max(mx);
            const float base = (mx == -INFINITY) ? 0.f : mx * scale_log2;
            const float alpha = fast_exp2(m[mt][hr] * scale_log2 - base);  // 0 when m was -inf
            m[mt][hr] = mx;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = fast_exp2(fmaf(s[mt][nt][2 * hr + e], scale_log2, -base));
                    s[mt][nt][2 * hr + e] = p;
                    sum += p;
                }
            l[mt][hr] = l[mt][hr] * alpha + sum;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                o[mt][dt][2 * hr] *= alpha;
                o[mt][dt][2 * hr + 1] *= alpha;
            }
        }
}

}  // namespace hk_attn_dev

#endif
