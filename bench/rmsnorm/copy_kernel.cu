// Device-to-device copies on the SMs, for the RMSNorm sweep's per-shape ceiling (`--copy-lib`):
// the same bytes read and written as one RMSNorm call, launched like it (one kernel, the caller's
// stream, inside the same CUDA graph). A bench tool, not part of any kernel: the sweep times every
// configuration below and takes the fastest, so the ceiling is the best plain copy we could write.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared \
//        bench/rmsnorm/copy_kernel.cu -o copy_kernel.so
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace {

// Each thread moves U 16-byte vectors: all U loads are issued before the first store.
template <int U> __global__ void __launch_bounds__(256) copy_blocks(uint4 *dst, const uint4 *src, size_t n) {
    const size_t base = (size_t)blockIdx.x * 256 * U + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; k++)
        if (base + (size_t)k * 256 < n) v[k] = src[base + (size_t)k * 256];
#pragma unroll
    for (int k = 0; k < U; k++)
        if (base + (size_t)k * 256 < n) dst[base + (size_t)k * 256] = v[k];
}

// A grid of a few blocks an SM striding over the buffer, 4 vectors a thread a step.
__global__ void __launch_bounds__(256) copy_stride(uint4 *dst, const uint4 *src, size_t n) {
    const size_t step = (size_t)gridDim.x * 256 * 4;
    for (size_t base = (size_t)blockIdx.x * 256 * 4 + threadIdx.x; base < n; base += step) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (base + (size_t)k * 256 < n) v[k] = src[base + (size_t)k * 256];
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (base + (size_t)k * 256 < n) dst[base + (size_t)k * 256] = v[k];
    }
}

template <int U> cudaError_t launch_blocks(void *dst, const void *src, size_t n, cudaStream_t s) {
    const size_t per = (size_t)256 * U;
    copy_blocks<U><<<(unsigned)((n + per - 1) / per), 256, 0, s>>>((uint4 *)dst, (const uint4 *)src, n);
    return cudaGetLastError();
}

}  // namespace

extern "C" {

// The number of configurations `hk_bench_copy` takes (cfg 0 .. count-1).
int hk_bench_copy_configs(void) { return 6; }

// Copies nbytes (a multiple of 16, both pointers 16-byte aligned) with configuration cfg;
// returns a cudaError_t (0 on success).
int hk_bench_copy(void *dst, const void *src, size_t nbytes, int cfg, void *stream) {
    const size_t n = nbytes / 16;
    cudaStream_t s = (cudaStream_t)stream;
    if (n == 0) return 0;
    switch (cfg) {
    case 0: return launch_blocks<1>(dst, src, n, s);
    case 1: return launch_blocks<2>(dst, src, n, s);
    case 2: return launch_blocks<4>(dst, src, n, s);
    case 3: return launch_blocks<8>(dst, src, n, s);
    case 4:
    case 5: {
        int dev = 0, sms = 132;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        copy_stride<<<sms * (cfg == 4 ? 4 : 8), 256, 0, s>>>((uint4 *)dst, (const uint4 *)src, n);
        return cudaGetLastError();
    }
    default: return (int)cudaErrorInvalidValue;
    }
}
}
