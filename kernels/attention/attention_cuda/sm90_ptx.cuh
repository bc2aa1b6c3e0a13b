// Hopper (sm_90a) building blocks of the Hopper paths (the prefill in prefill_sm90.cu, the TMA
// path of the decode in decode_kernel.cu): mbarriers, the tensor memory accelerator (TMA) bulk
// tensor copy, and warpgroup MMA (wgmma) with shared-memory matrix descriptors. Thin PTX
// wrappers only; the kernels decide how they combine.
// Everything here compiles to nothing outside the sm_90a pass (__CUDA_ARCH_FEAT_SM90_ALL).
#ifndef HK_ATTN_SM90_PTX_CUH
#define HK_ATTN_SM90_PTX_CUH

#include <stdint.h>

namespace hk_sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// --- mbarrier ---------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (the TMA unit) before first use.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The producer's arrival that also announces how many bytes the TMA copies will deliver.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Blocks until the phase with this parity has completed. A fresh barrier is in phase 0, so a
// wait on parity 1 returns at once (how a producer passes its first round of "empty" waits).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// --- TMA --------------------------------------------------------------------------------------
// One box of a rank-3 tensor map ({inner, middle, outer} element coordinates) into shared memory;
// completion is counted in bytes on `bar`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *tmap, uint32_t bar, int c0,
                                            int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}
__device__ __forceinline__ void tma_load_5d(uint32_t dst, const void *tmap, uint32_t bar, int c0,
                                            int c1, int c2, int c3, int c4) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
        : "memory");
}
__device__ __forceinline__ void tma_prefetch_desc(const void *tmap) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

// --- named barriers (ids 1..15; 0 is __syncthreads) -------------------------------------------
// `threads` counts every thread that syncs or arrives on the barrier per completion.
template <int THREADS>
__device__ __forceinline__ void named_bar_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}
template <int THREADS>
__device__ __forceinline__ void named_bar_arrive(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(THREADS) : "memory");
}

// --- register reallocation between warpgroups --------------------------------------------------
template <int N>
__device__ __forceinline__ void regs_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// --- shared-memory staging ---------------------------------------------------------------------
// Four 8x8 matrices of 16-bit elements from the mma/wgmma accumulator layout (each thread's 32-bit
// register k holds two elements of row lane/4 of matrix k) to shared memory, lane l giving the
// address of row l % 8 of matrix l / 8: the epilogue's way from fragments to whole rows.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}
// Orders this thread's generic-proxy accesses to shared memory before later async-proxy ones (a TMA
// load that will overwrite what it wrote or read).
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// --- wgmma ------------------------------------------------------------------------------------
// Shared-memory matrix descriptor for a tile stored in the 128-byte swizzle layout the TMA
// writes with CU_TENSOR_MAP_SWIZZLE_128B: rows of 64 16-bit elements (128 B), 8-row atoms of
// 1024 B that must start 1024-aligned. K-major operands: sbo = 1024 (next 8 rows), lbo unused;
// a k16 step inside the atom advances the start address by 32 B. MN-major operands (transposed
// B): sbo = 1024 (next 8 rows along K), lbo = distance between 64-element column blocks.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
           (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
           (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// After wgmma_wait: tells the compiler the accumulators changed here, so that no read of them is
// scheduled before the wait (the asynchronous MMA writes them behind the compiler's back).
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define HK_WG_D64                                                                             \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                 \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "        \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "        \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define HK_WG_D32                                                                             \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                 \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define HK_F8(d, i)                                                                           \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define HK_ACC32(d) HK_F8(d, 0), HK_F8(d, 8), HK_F8(d, 16), HK_F8(d, 24)
#define HK_ACC64(d) HK_ACC32(d), HK_F8(d, 32), HK_F8(d, 40), HK_F8(d, 48), HK_F8(d, 56)

// D[64x128] (+)= A[64x16] * B[16x128], A and B from shared memory, both K-major.
// `accumulate` 0 overwrites D (the first k step of a product).
#define HK_WGMMA_SS_N128(TY)                                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " HK_WG_D64       \
                 ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                             \
                 : HK_ACC64(d)                                                                 \
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate))
template <bool BF16>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                              int accumulate) {
    if constexpr (BF16) HK_WGMMA_SS_N128("bf16");
    else HK_WGMMA_SS_N128("f16");
}

// D[64xN] (+)= A[64x16] * B[16xN], A from registers (the m16n8k16 A fragment layout, per warp
// 16 rows), B from shared memory MN-major (transposed: N contiguous, as a [keys][D] V tile is).
#define HK_WGMMA_RS_N128(TY)                                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " HK_WG_D64       \
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                               \
                 : HK_ACC64(d)                                                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))
#define HK_WGMMA_RS_N64(TY)                                                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " HK_WG_D32        \
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                               \
                 : HK_ACC32(d)                                                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))
template <bool BF16>
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const uint32_t (&a)[4],
                                              uint64_t desc_b, int accumulate) {
    if constexpr (BF16) HK_WGMMA_RS_N128("bf16");
    else HK_WGMMA_RS_N128("f16");
}
template <bool BF16>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4],
                                             uint64_t desc_b, int accumulate) {
    if constexpr (BF16) HK_WGMMA_RS_N64("bf16");
    else HK_WGMMA_RS_N64("f16");
}

#undef HK_WGMMA_SS_N128
#undef HK_WGMMA_RS_N128
#undef HK_WGMMA_RS_N64
#undef HK_ACC64
#undef HK_ACC32
#undef HK_F8
#undef HK_WG_D32
#undef HK_WG_D64

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace hk_sm90

#endif
