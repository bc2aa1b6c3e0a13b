// RMSNorm CUDA kernels (sm_80+, tuned for sm_90), C ABI in rmsnorm_cuda.h.
//
// Design (memory-bound: the floor is one read of x (and residual), one write, the weight once):
//  * 16-byte vectors: each thread moves whole uint4s of the row (8 bf16/fp16 or 4 fp32 elements).
//  * The row stays in registers between the sum of squares and the scaling, so x is read once.
//  * Rows of up to 128 vectors (H <= 1024 bf16) are handled by a group of TPR <= 32 lanes (4, 16
//    or 32), many rows per block, reduced with warp shuffles only; wider rows by a whole block
//    (64..1024 threads, 4 vectors per thread) with one __syncthreads per batch of rows.
//  * One batch of rows per block (grid = batches): blocks at different phases overlap, and each
//    thread keeps RPI rows x VPT vectors of loads in flight (plus the weight's, via L1).
//    (A persistent grid that kept the weight in registers reached only ~3.3 TB/s: 128 registers,
//    25% occupancy, load phases of few resident blocks not overlapping; see README.)
//  * fp32 accumulation, 64-bit row offsets, the caller's stream.
// Tensors that are not 16-byte aligned (or whose hidden size is not a multiple of the vector) and
// rows wider than 4096 vectors take a two-pass fallback (scalar or vectorised) that re-reads x.
// One file (about 620 lines): the kernels are templates that only the launch table below
// instantiates, so device code and dispatch are one unit; moving the device helpers into a header
// would compile to the same kernels and is left to a GPU round that can compare their SASS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "rmsnorm_cuda.h"

// Launch shapes (NOTES.md, results/README.md): chosen on the H200 by the sweeps of runs 3-6; the
// candidates that lost are recorded there, not kept here as switches.
// Rows per SM under which 128-wide rows take the few-row launch (16: up to 2111 rows on 132 SMs).
constexpr int kFewQRowsPerSm = 16;
// Launch bound of the whole-block kernel for 16-bit rows with an fp32 weight over 1024 vectors.
constexpr int kWideWeightBound = 768;
constexpr int kWideWeightMaxVecs = 1792;  // H 14336 of bf16

namespace {

template <typename T> struct Cvt;
template <> struct Cvt<float> {
    static __device__ __forceinline__ float to_f(float v) { return v; }
    static __device__ __forceinline__ float from_f(float v) { return v; }
};
template <> struct Cvt<__half> {
    static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
};
template <> struct Cvt<__nv_bfloat16> {
    static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
};

// One 16-byte vector viewed as elements of T.
template <typename T> union Pack {
    static constexpr int N = 16 / sizeof(T);
    uint4 u;
    T e[N];
};

// Plain 16-byte loads for x/residual, the read-only (non-coherent, L1-cached) path for the weight.
__device__ __forceinline__ uint4 load_plain(const void *p) {
    return *reinterpret_cast<const uint4 *>(p);
}
__device__ __forceinline__ uint4 load_ro(const void *p) {
    return __ldg(reinterpret_cast<const uint4 *>(p));
}
__device__ __forceinline__ void store_vec(void *p, uint4 v) { *reinterpret_cast<uint4 *>(p) = v; }

// One 16-byte store spelled out in PTX, and the vector packed as four 32-bit words: used by the
// 1024-bound row-sized kernel only (rows over 1024 vectors), where it measured faster (8192x16384
// 137.7 -> 132.9 us, NOTES v7); in the fixed-width kernels it changed ptxas's schedule for the
// worse (weight loads sunk below the reduction, NOTES v8), so they keep the plain assignment.
__device__ __forceinline__ void store_vec_asm(void *p, uint4 v) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

// 16 bytes of T from floats (rounded to nearest), as four 32-bit words.
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
    return (uint32_t)__half_as_ushort(__float2half_rn(a)) | ((uint32_t)__half_as_ushort(__float2half_rn(b)) << 16);
}
template <typename T> __device__ __forceinline__ uint4 pack_vec(const float *f) {
    if constexpr (sizeof(T) == 4)
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
    else
        return make_uint4(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]), pack2<T>(f[4], f[5]), pack2<T>(f[6], f[7]));
}

// Programmatic dependent launch (sm_90+): wait until the grid this one depends on has finished and
// its writes are visible (a no-op when the launch was not programmatic), then let the next grid
// start its launch while this one runs. Before sm_90 both are left out.
__device__ __forceinline__ void pdl_wait_then_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Weight elements [j*VEC, (j+1)*VEC) as floats (VEC = elements of T in 16 bytes).
template <typename T, typename W>
__device__ __forceinline__ void load_weight(float *wf, const W *w, int j) {
    constexpr int VEC = 16 / sizeof(T);
    constexpr int WPER = 16 / sizeof(W);  // W elements per uint4
    const W *base = w + (int64_t)j * VEC;
#pragma unroll
    for (int q = 0; q < VEC / WPER; q++) {
        Pack<W> p;
        p.u = load_ro(base + q * WPER);
#pragma unroll
        for (int i = 0; i < WPER; i++) wf[q * WPER + i] = Cvt<W>::to_f(p.e[i]);
    }
}

template <int WIDTH> __device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// This thread's 16-byte vectors of the RPI rows its lane group handles from `base` on; zero where
// the row or the vector is out of range.
template <typename T, int VPT, int RPI, int GROUPS>
__device__ __forceinline__ void load_rows(Pack<T> (&v)[RPI][VPT], const T *p, int64_t base, int group,
                                          int lane, int tpr, int64_t rows, int nvec) {
    constexpr int VEC = 16 / sizeof(T);
    const int64_t hidden = (int64_t)nvec * VEC;
#pragma unroll
    for (int r = 0; r < RPI; r++) {
        const int64_t row = base + (int64_t)r * GROUPS + group;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int j = lane + k * tpr;
            if (row < rows && j < nvec)
                v[r][k].u = load_plain(p + row * hidden + (int64_t)j * VEC);
            else
                v[r][k].u = make_uint4(0, 0, 0, 0);
        }
    }
}

// Row-in-registers body.
//   MAXB: the block's most threads (its launch bound); TPR: threads per row (<= 32: a lane group of
//   a MAXB-thread block; MAXB: the whole block; 0: the whole block, whose width is blockDim.x, sized
//   at launch to the row)
//   VPT: 16-byte vectors per thread per row; RPI: rows per lane group (or per block)
//   FUSED: dst = x, src = x, res = residual; else dst = out, src = x, res unused
// Every load of x (and residual) is issued first, then the weight's (kept packed), so one memory
// latency covers them all (but see LATE_W); the weight is re-read per row through the read-only
// path (L1 hits).
template <typename T, typename W, int MAXB, int TPR, int VPT, int RPI, bool FUSED>
__device__ __forceinline__ void rms_reg_body(T *dst, const T *src, T *res, const W *__restrict__ w,
                                             int64_t rows, int nvec, float inv_hidden, float eps) {
    constexpr int VEC = 16 / sizeof(T);
    constexpr int WQ = VEC * sizeof(W) / 16;  // uint4s of weight per vector of T
    constexpr int GROUPS = TPR ? MAXB / TPR : 1;  // rows handled side by side in a block
    constexpr int MAXWARPS = MAXB / 32;
    const int tpr = TPR ? TPR : (int)blockDim.x;  // a multiple of 32 when the block is the row
    const int lane = TPR ? threadIdx.x % TPR : threadIdx.x;
    const int group = TPR ? threadIdx.x / TPR : 0;
    const int64_t hidden = (int64_t)nvec * VEC;
    const int64_t rows_per_iter = (int64_t)GROUPS * RPI;

    constexpr bool WHOLE = TPR == 0 || TPR > 32;
    // A wider weight in the widest blocks (<= 64 registers): its 32 registers per 4 vectors of a
    // 16-bit row would spill, so it is loaded after the reduction (L1 / L2 hits) instead (NOTES v7).
    constexpr bool LATE_W = TPR == 0 && MAXB == 1024 && sizeof(W) > sizeof(T);
    constexpr bool PACKED = TPR == 0 && (MAXB == 1024 || MAXB == kWideWeightBound);  // see store_vec_asm
    __shared__ float red[WHOLE ? 2 : 1][WHOLE ? RPI : 1][WHOLE ? MAXWARPS : 1];
    int parity = 0;
    pdl_wait_then_release();

    for (int64_t base = (int64_t)blockIdx.x * rows_per_iter; base < rows;
         base += (int64_t)gridDim.x * rows_per_iter) {
        Pack<T> xv[RPI][VPT];
        load_rows<T, VPT, RPI, GROUPS>(xv, src, base, group, lane, tpr, rows, nvec);
        Pack<T> rv[FUSED ? RPI : 1][FUSED ? VPT : 1];
        if constexpr (FUSED) load_rows<T, VPT, RPI, GROUPS>(rv, res, base, group, lane, tpr, rows, nvec);
        Pack<W> wv[VPT][WQ];
        auto load_w = [&]() {
#pragma unroll
            for (int k = 0; k < VPT; k++) {
                const int j = lane + k * tpr;
#pragma unroll
                for (int q = 0; q < WQ; q++)
                    wv[k][q].u = j < nvec ? load_ro(w + (int64_t)j * VEC + q * (16 / sizeof(W)))
                                          : make_uint4(0, 0, 0, 0);
            }
        };
        if constexpr (!LATE_W) load_w();
        if constexpr (FUSED) {
#pragma unroll
            for (int r = 0; r < RPI; r++) {
                const int64_t row = base + (int64_t)r * GROUPS + group;
#pragma unroll
                for (int k = 0; k < VPT; k++) {
                    const int j = lane + k * tpr;
                    if constexpr (PACKED) {
                        float f[VEC];
#pragma unroll
                        for (int i = 0; i < VEC; i++) f[i] = Cvt<T>::to_f(xv[r][k].e[i]) + Cvt<T>::to_f(rv[r][k].e[i]);
                        xv[r][k].u = pack_vec<T>(f);
                        if (row < rows && j < nvec) store_vec_asm(res + row * hidden + (int64_t)j * VEC, xv[r][k].u);
                    } else {
#pragma unroll
                        for (int i = 0; i < VEC; i++)
                            xv[r][k].e[i] = Cvt<T>::from_f(Cvt<T>::to_f(xv[r][k].e[i]) +
                                                           Cvt<T>::to_f(rv[r][k].e[i]));
                        if (row < rows && j < nvec)
                            store_vec(res + row * hidden + (int64_t)j * VEC, xv[r][k].u);
                    }
                }
            }
        }
        float ss[RPI];
#pragma unroll
        for (int r = 0; r < RPI; r++) {
            float s = 0.f;
#pragma unroll
            for (int k = 0; k < VPT; k++)
#pragma unroll
                for (int i = 0; i < VEC; i++) {
                    const float f = Cvt<T>::to_f(xv[r][k].e[i]);
                    s = fmaf(f, f, s);
                }
            ss[r] = s;
        }
        if constexpr (!WHOLE) {
#pragma unroll
            for (int r = 0; r < RPI; r++) ss[r] = group_sum<(TPR > 0 && TPR <= 32 ? TPR : 32)>(ss[r]);
        } else {
            const int nwarps = TPR ? TPR / 32 : tpr / 32;  // a constant for fixed-width blocks
            const int warp = threadIdx.x / 32;
#pragma unroll
            for (int r = 0; r < RPI; r++) {
                float s = group_sum<32>(ss[r]);
                if ((threadIdx.x & 31) == 0) red[parity][r][warp] = s;
            }
            __syncthreads();
#pragma unroll
            for (int r = 0; r < RPI; r++) {
                float s = 0.f;
                if constexpr (TPR > 32) {
#pragma unroll
                    for (int q = 0; q < TPR / 32; q++) s += red[parity][r][q];
                } else {
#pragma unroll 4
                    for (int q = 0; q < nwarps; q++) s += red[parity][r][q];
                }
                ss[r] = s;
            }
            parity ^= 1;
        }
        if constexpr (LATE_W) load_w();
#pragma unroll
        for (int r = 0; r < RPI; r++) {
            const int64_t row = base + (int64_t)r * GROUPS + group;
            const float inv = rsqrtf(ss[r] * inv_hidden + eps);
#pragma unroll
            for (int k = 0; k < VPT; k++) {
                const int j = lane + k * tpr;
                if (row < rows && j < nvec) {
                    constexpr int WPER = 16 / sizeof(W);
                    if constexpr (PACKED) {
                        float f[VEC];
#pragma unroll
                        for (int i = 0; i < VEC; i++)
                            f[i] = Cvt<T>::to_f(xv[r][k].e[i]) * inv * Cvt<W>::to_f(wv[k][i / WPER].e[i % WPER]);
                        store_vec_asm(dst + row * hidden + (int64_t)j * VEC, pack_vec<T>(f));
                    } else {
                        Pack<T> o;
#pragma unroll
                        for (int i = 0; i < VEC; i++) {
                            const float wi = Cvt<W>::to_f(wv[k][i / WPER].e[i % WPER]);
                            o.e[i] = Cvt<T>::from_f(Cvt<T>::to_f(xv[r][k].e[i]) * inv * wi);
                        }
                        store_vec(dst + row * hidden + (int64_t)j * VEC, o.u);
                    }
                }
            }
        }
    }
}

// Register caps. Lane-group kernels (unfused): same-type weight and <= 4 vectors a thread ask for
// >= half occupancy (<= 64 registers), which fits without spilling; the others of <= 512 threads
// >= 16 warps a SM (<= 128 registers): without it the f16-x/f32-weight 256-thread kernel took 133
// and ran one block a SM at 65 % of copy (NOTES v4). Fused variants keep the default.
template <typename T, typename W, int BLOCK, bool FUSED, int VPT, int RPI> constexpr int min_blocks() {
    if (FUSED) return 1;
    if (sizeof(W) == sizeof(T) && VPT * RPI <= 4) return 1024 / BLOCK;
    return BLOCK <= 512 ? 512 / BLOCK : 1;
}

// Rows handled by lane groups of TPR <= 32 lanes, BLOCK / TPR rows side by side, or (TPR ==
// BLOCK) by the whole block of a fixed width.
template <typename T, typename W, int BLOCK, int TPR, int VPT, int RPI, bool FUSED>
__global__ void __launch_bounds__(BLOCK, (min_blocks<T, W, BLOCK, FUSED, VPT, RPI>()))
rms_reg_kernel(T *dst, const T *src, T *res, const W *__restrict__ w, int64_t rows, int nvec,
               float inv_hidden, float eps) {
    static_assert((TPR > 0 && TPR <= 32) || TPR == BLOCK, "lane groups or the whole block");
    rms_reg_body<T, W, BLOCK, TPR, VPT, RPI, FUSED>(dst, src, res, w, rows, nvec, inv_hidden, eps);
}

// Whole-block rows: the block is as wide as the row needs (blockDim.x = 32 * ceil(vectors / (32 *
// VPT)) <= MAXB), so no lane idles at hidden sizes that are not a power of two (H 5120 on 256
// threads left 37.5 % of them idle, and the blocks a SM holds, bounded by registers, carried
// 40 KB of loads instead of 60: NOTES v6). REGS caps the registers, which sets the blocks a SM holds.
template <typename T, typename W, int MAXB, int VPT, int RPI, bool FUSED, int REGS>
__global__ void __launch_bounds__(MAXB) __maxnreg__(REGS)
rms_row_kernel(T *dst, const T *src, T *res, const W *__restrict__ w, int64_t rows, int nvec,
               float inv_hidden, float eps) {
    rms_reg_body<T, W, MAXB, 0, VPT, RPI, FUSED>(dst, src, res, w, rows, nvec, inv_hidden, eps);
}

// Two-pass fallback: one block per row (grid-stride), any alignment (VECT=false: element by
// element) or aligned rows too wide for registers (VECT=true). Pass 2 re-reads the row (from L2).
template <typename T, typename W, int BLOCK, bool FUSED, bool VECT>
__global__ void __launch_bounds__(BLOCK)
rms_loop_kernel(T *dst, const T *src, T *res, const W *__restrict__ w, int64_t rows,
                int64_t hidden, float inv_hidden, float eps) {
    constexpr int VEC = VECT ? 16 / sizeof(T) : 1;
    constexpr int NWARPS = BLOCK / 32;
    __shared__ float red[2][NWARPS];
    int parity = 0;
    pdl_wait_then_release();
    const int64_t nvec = hidden / VEC;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xs = src + row * hidden;
        T *rs = FUSED ? res + row * hidden : nullptr;
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < nvec; j += BLOCK) {
            T e[VEC];
            if (VECT) {
                Pack<T> p;
                p.u = load_plain(xs + j * VEC);
#pragma unroll
                for (int i = 0; i < VEC; i++) e[i] = p.e[i];
            } else {
                e[0] = xs[j];
            }
            if (FUSED) {
                T q[VEC];
                if (VECT) {
                    Pack<T> p;
                    p.u = load_plain(rs + j * VEC);
#pragma unroll
                    for (int i = 0; i < VEC; i++) q[i] = p.e[i];
                } else {
                    q[0] = rs[j];
                }
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    e[i] = Cvt<T>::from_f(Cvt<T>::to_f(e[i]) + Cvt<T>::to_f(q[i]));
                if (VECT) {
                    Pack<T> p;
#pragma unroll
                    for (int i = 0; i < VEC; i++) p.e[i] = e[i];
                    store_vec(rs + j * VEC, p.u);
                } else {
                    rs[j] = e[0];
                }
            }
#pragma unroll
            for (int i = 0; i < VEC; i++) {
                const float f = Cvt<T>::to_f(e[i]);
                s = fmaf(f, f, s);
            }
        }
        s = group_sum<32>(s);
        if ((threadIdx.x & 31) == 0) red[parity][threadIdx.x / 32] = s;
        __syncthreads();
        s = 0.f;
#pragma unroll
        for (int q = 0; q < NWARPS; q++) s += red[parity][q];
        parity ^= 1;
        const float inv = rsqrtf(s * inv_hidden + eps);
        const T *again = FUSED ? rs : xs;  // the residual as stored, or x
        T *ds = dst + row * hidden;
        for (int64_t j = threadIdx.x; j < nvec; j += BLOCK) {
            if (VECT) {
                Pack<T> p, o;
                p.u = load_plain(again + j * VEC);
                float wl[VEC];
                load_weight<T, W>(wl, w, (int)j);
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    o.e[i] = Cvt<T>::from_f(Cvt<T>::to_f(p.e[i]) * inv * wl[i]);
                store_vec(ds + j * VEC, o.u);
            } else {
                ds[j] = Cvt<T>::from_f(Cvt<T>::to_f(again[j]) * inv * Cvt<W>::to_f(w[j]));
            }
        }
    }
}

constexpr int kMaxDevices = 64;

// The device's multiprocessor count, queried once per device. A failed query means no usable
// device (the launch that follows fails too): 1 then only sizes the grids small, never wrong.
int sm_count(int device) {
    static int cache[kMaxDevices];  // 0 = unknown; races only store the same value
    if (device >= 0 && device < kMaxDevices && cache[device] > 0) return cache[device];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0)
        return 1;
    if (device >= 0 && device < kMaxDevices) cache[device] = n;
    return n;
}

// Resident blocks per SM of a kernel (cached per instantiation; same on every device we target).
template <typename K> int blocks_per_sm(K kernel, int block) {
    static int cached = 0;
    if (cached > 0) return cached;
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, block, 0) != cudaSuccess || n <= 0)
        n = 1;
    cached = n;
    return n;
}

struct Args {
    void *dst;
    const void *src;
    void *res;
    const void *w;
    int64_t rows;
    int64_t hidden;
    float eps;
    int device;
    cudaStream_t stream;
    unsigned flags;  // RMSNORM_CUDA_PDL
};

// Compute capability major of a device, cached (0 = unknown: treated as no PDL).
int cc_major(int device) {
    static int cache[kMaxDevices];
    if (device >= 0 && device < kMaxDevices && cache[device] > 0) return cache[device];
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || n <= 0)
        return 0;
    if (device >= 0 && device < kMaxDevices) cache[device] = n;
    return n;
}

// One launch; programmatic stream serialization when asked for and the device has it (sm_90+),
// so that this grid's launch overlaps the previous kernel's tail (the kernels wait for it).
template <typename... P, typename... A>
cudaError_t launch(void (*kernel)(P...), int grid, int block, const Args &a, A... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)block);
    cfg.stream = a.stream;
    cudaLaunchAttribute attr[1];
    if ((a.flags & RMSNORM_CUDA_PDL) && cc_major(a.device) >= 9) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args...);
    return err != cudaSuccess ? err : cudaGetLastError();
}

template <typename T, typename W, int BLOCK, int TPR, int VPT, int RPI, bool FUSED>
cudaError_t launch_reg(const Args &a) {
    auto kernel = rms_reg_kernel<T, W, BLOCK, TPR, VPT, RPI, FUSED>;
    const int64_t per_iter = (int64_t)(BLOCK / TPR) * RPI;
    const int64_t needed = (a.rows + per_iter - 1) / per_iter;
    const int grid = (int)(needed < 0x7fffffff ? needed : 0x7fffffff);
    const int nvec = (int)(a.hidden / (16 / sizeof(T)));
    return launch(kernel, grid, BLOCK, a, static_cast<T *>(a.dst), static_cast<const T *>(a.src),
                  static_cast<T *>(a.res), static_cast<const W *>(a.w), a.rows, nvec,
                  1.0f / (float)a.hidden, a.eps);
}

// Register cap of a whole-block kernel: unfused ones with 1024-thread blocks at 56 (64 with a wider
// weight), so that a 384-thread block (H 12288 bf16) fits 3 times a SM, not 2; the others as the
// lane-group kernels' min_blocks gave (NOTES v6). Fused kernels: what the launch bound allows
// (__maxnreg__ overrides the bound, so 1024-thread blocks must stay at 64).
template <typename T, typename W, int MAXB, int VPT, int RPI, bool FUSED> constexpr int row_regs() {
    if (MAXB == kWideWeightBound) return 80;
    if (FUSED) return MAXB == 1024 ? 64 : 255;
    if (MAXB == 1024) return sizeof(W) == sizeof(T) ? 56 : 64;
    return sizeof(W) == sizeof(T) && VPT * RPI <= 4 ? 64 : 128;
}

template <typename T, typename W, int MAXB, int VPT, int RPI, bool FUSED>
cudaError_t launch_row(const Args &a, int nvec) {
    auto kernel = rms_row_kernel<T, W, MAXB, VPT, RPI, FUSED, row_regs<T, W, MAXB, VPT, RPI, FUSED>()>;
    const int threads = 32 * ((nvec + 32 * VPT - 1) / (32 * VPT));  // <= MAXB by the dispatch
    const int64_t needed = (a.rows + RPI - 1) / RPI;
    const int grid = (int)(needed < 0x7fffffff ? needed : 0x7fffffff);
    return launch(kernel, grid, threads, a, static_cast<T *>(a.dst), static_cast<const T *>(a.src),
                  static_cast<T *>(a.res), static_cast<const W *>(a.w), a.rows, nvec,
                  1.0f / (float)a.hidden, a.eps);
}

template <typename T, typename W, bool FUSED, bool VECT> cudaError_t launch_loop(const Args &a) {
    constexpr int BLOCK = 512;
    auto kernel = rms_loop_kernel<T, W, BLOCK, FUSED, VECT>;
    const int64_t resident = (int64_t)blocks_per_sm(kernel, BLOCK) * sm_count(a.device);
    const int grid = (int)(a.rows < resident ? a.rows : resident);
    return launch(kernel, grid, BLOCK, a, static_cast<T *>(a.dst), static_cast<const T *>(a.src),
                  static_cast<T *>(a.res), static_cast<const W *>(a.w), a.rows, a.hidden,
                  1.0f / (float)a.hidden, a.eps);
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T, typename W, bool FUSED> cudaError_t dispatch(const Args &a) {
    constexpr int VEC = 16 / sizeof(T);
    const bool vec_ok = a.hidden % VEC == 0 && aligned16(a.dst) && aligned16(a.src) &&
                        (!FUSED || aligned16(a.res)) && aligned16(a.w);
    if (!vec_ok) return launch_loop<T, W, FUSED, false>(a);
    const int64_t nvec = a.hidden / VEC;
    // Few rows (the launches below would give the grid about one block per SM or less): fewer rows
    // per block, so that the rows spread over more SMs (NOTES.md, v2/v3).
    const int64_t sms = sm_count(a.device);
    const int nv = (int)(nvec < 0x7fffffff ? nvec : 0x7fffffff);
    if (nvec > 4 && nvec <= 128 && a.rows < (nvec <= 16 ? kFewQRowsPerSm : 16) * sms) {
        if (nvec <= 16) return launch_reg<T, W, 128, 16, 1, 1, FUSED>(a);
        if (nvec <= 32) return launch_reg<T, W, 128, 32, 1, 1, FUSED>(a);
        if (nvec <= 64) return launch_reg<T, W, 128, 32, 2, 1, FUSED>(a);
        return launch_reg<T, W, 128, 32, 4, 1, FUSED>(a);
    }
    if (nvec <= 4) return launch_reg<T, W, 256, 4, 1, 4, FUSED>(a);
    // 128-wide bf16/fp16 rows (q/k-norm): 16 lanes x 2 rows per lane group (run 3's sweep)
    if (nvec <= 16) return launch_reg<T, W, 256, 16, 1, 2, FUSED>(a);
    if (nvec <= 32) return launch_reg<T, W, 256, 32, 1, 4, FUSED>(a);
    if (nvec <= 64) return launch_reg<T, W, 256, 32, 2, 2, FUSED>(a);
    if (nvec <= 128) return launch_reg<T, W, 256, 32, 4, 1, FUSED>(a);
    // whole-block rows of up to 1024 vectors (H 1032..8192 bf16): fixed-width blocks (2 vectors a
    // thread up to 256 vectors, else 4; 2 rows a block, run 3's sweep; 1 when rows are few, < 2 a
    // SM, NOTES v3), unless they would leave more than a quarter of their lanes idle: then a block
    // as wide as the row (H 5120: 160 threads instead of 256, 3 blocks a SM instead of 2, 88 -> 99 %
    // of copy; at 6144 / 7168 / 4096 and few rows the fixed blocks stayed faster, NOTES v6-v8)
    const bool few = a.rows < 2 * sms;
    if (nvec <= 1024) {
        const int cap = nvec <= 256 ? 256 : nvec <= 512 ? 512 : 1024;  // vectors a fixed block holds
        // row-sized blocks only from enough rows: at 1024 rows they lost (1024x5120 7.12 -> 8.06 us,
        // the grid's last wave), and 2560-wide rows gained only from 32768 rows (results/sweep_v8)
        const int64_t min_rows = (nvec <= 256 ? 32 : nvec <= 512 ? 128 : 16) * sms;
        const bool fit = !few && 4 * nvec < 3 * cap && a.rows >= min_rows;
        if (nvec <= 256)
            return few  ? launch_reg<T, W, 128, 128, 2, 1, FUSED>(a)
                   : fit ? launch_row<T, W, 128, 2, 2, FUSED>(a, nv)
                         : launch_reg<T, W, 128, 128, 2, 2, FUSED>(a);
        if (nvec <= 512)
            return few  ? launch_reg<T, W, 128, 128, 4, 1, FUSED>(a)
                   : fit ? launch_row<T, W, 256, 4, 2, FUSED>(a, nv)
                         : launch_reg<T, W, 128, 128, 4, 2, FUSED>(a);
        return few  ? launch_reg<T, W, 256, 256, 4, 1, FUSED>(a)
               : fit ? launch_row<T, W, 256, 4, 2, FUSED>(a, nv)
                     : launch_reg<T, W, 256, 256, 4, 2, FUSED>(a);
    }
    // wider rows (H 8200..32768 bf16): a block as wide as the row (10240 / 12288 / 16384: 80-94 ->
    // 98-102 % of copy), except few rows, which keep the fixed 512/1024-thread blocks (with an fp32
    // weight the row-sized kernel, which loads it late, lost 0.4-0.5 us there: NOTES v7/v8)
    if (few && !FUSED && nvec <= 2048) return launch_reg<T, W, 512, 512, 4, 1, FUSED>(a);
    if (few && !FUSED && nvec <= 4096) return launch_reg<T, W, 1024, 1024, 4, 1, FUSED>(a);
    // fused rows up to 512 threads keep a 512-thread bound (up to 128 registers, no spills; at
    // 1024 the fp32-weight instantiations spill 112-124 bytes)
    if (FUSED && nvec <= 2048) return launch_row<T, W, 512, 4, 1, FUSED>(a, nv);
    // bf16 rows with an fp32 weight of 1025-1792 vectors (H 8200-14336): a 768-thread bound, so
    // that the weight fits in registers beside the row (<= 80) and is loaded with it, not after
    // the reduction as in the 1024-bound kernel. Wider rows and fp16 rows lost this way on the
    // H100 screen (NOTES v11), so they keep the 1024-bound kernel.
    if constexpr (!FUSED && sizeof(W) > sizeof(T) && std::is_same<T, __nv_bfloat16>::value)
        if (nvec <= kWideWeightMaxVecs) return launch_row<T, W, kWideWeightBound, 4, 1, FUSED>(a, nv);
    if (nvec <= 4096) return launch_row<T, W, 1024, 4, 1, FUSED>(a, nv);
    return launch_loop<T, W, FUSED, true>(a);
}

template <bool FUSED> int run(const Args &a, rmsnorm_dtype dt, rmsnorm_dtype wdt) {
    if (a.rows <= 0 || a.hidden <= 0) return 0;
    int prev = -1;
    cudaError_t err = cudaGetDevice(&prev);
    if (err != cudaSuccess) return (int)err;
    if (prev != a.device && (err = cudaSetDevice(a.device)) != cudaSuccess) return (int)err;
    switch (dt) {
    case RMSNORM_BF16:
        err = wdt == RMSNORM_F32 ? dispatch<__nv_bfloat16, float, FUSED>(a)
                                 : dispatch<__nv_bfloat16, __nv_bfloat16, FUSED>(a);
        break;
    case RMSNORM_F16:
        err = wdt == RMSNORM_F32 ? dispatch<__half, float, FUSED>(a)
                                 : dispatch<__half, __half, FUSED>(a);
        break;
    case RMSNORM_F32: err = dispatch<float, float, FUSED>(a); break;
    default: err = cudaErrorInvalidValue; break;
    }
    if (prev != a.device) cudaSetDevice(prev);
    return (int)err;
}

}  // namespace

extern "C" int rmsnorm_cuda_rms_norm_ex(void *out, const void *x, const void *weight,
                                        rmsnorm_dtype dt, rmsnorm_dtype weight_dt, int64_t rows,
                                        int64_t hidden, float eps, int device, void *stream,
                                        unsigned flags) {
    Args a{out, x, nullptr, weight, rows, hidden, eps, device, static_cast<cudaStream_t>(stream), flags};
    return run<false>(a, dt, weight_dt);
}

extern "C" int rmsnorm_cuda_fused_add_rms_norm_ex(void *x, void *residual, const void *weight,
                                                  rmsnorm_dtype dt, rmsnorm_dtype weight_dt,
                                                  int64_t rows, int64_t hidden, float eps,
                                                  int device, void *stream, unsigned flags) {
    Args a{x, x, residual, weight, rows, hidden, eps, device, static_cast<cudaStream_t>(stream), flags};
    return run<true>(a, dt, weight_dt);
}

extern "C" int rmsnorm_cuda_rms_norm(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                                     rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden,
                                     float eps, int device, void *stream) {
    return rmsnorm_cuda_rms_norm_ex(out, x, weight, dt, weight_dt, rows, hidden, eps, device, stream, 0);
}

extern "C" int rmsnorm_cuda_fused_add_rms_norm(void *x, void *residual, const void *weight,
                                               rmsnorm_dtype dt, rmsnorm_dtype weight_dt,
                                               int64_t rows, int64_t hidden, float eps, int device,
                                               void *stream) {
    return rmsnorm_cuda_fused_add_rms_norm_ex(x, residual, weight, dt, weight_dt, rows, hidden, eps,
                                              device, stream, 0);
}

extern "C" const char *rmsnorm_cuda_error_string(int err) {
    return cudaGetErrorString(static_cast<cudaError_t>(err));
}
