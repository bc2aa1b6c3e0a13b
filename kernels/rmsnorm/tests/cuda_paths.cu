// Every launch path of rmsnorm_cuda (rms_norm and fused add+norm, bf16/fp16/fp32 x, same-type and
// fp32 weights) on buffers allocated to the exact size (so that compute-sanitizer memcheck sees any
// access past a row or a tensor), outputs poisoned with NaN first, against a float64 reference on
// the host. Built with the kernel source, run on the GPU machine, alone and under
// `compute-sanitizer --tool memcheck` / `--tool racecheck`:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Ikernels/rmsnorm/rmsnorm_cuda \
//        kernels/rmsnorm/tests/cuda_paths.cu kernels/rmsnorm/rmsnorm_cuda/rmsnorm.cu -o cuda_paths
//   ./cuda_paths [--quick]     (exit status 0 = every case right)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "rmsnorm_cuda.h"

namespace {

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(2);                                                                          \
        }                                                                                          \
    } while (0)

size_t esize(rmsnorm_dtype d) { return d == RMSNORM_F32 ? 4 : 2; }

// host bits <-> double
double to_d(const uint8_t *p, rmsnorm_dtype d) {
    if (d == RMSNORM_F32) { float f; std::memcpy(&f, p, 4); return f; }
    uint16_t h; std::memcpy(&h, p, 2);
    if (d == RMSNORM_BF16) { uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
    __half_raw r; r.x = h; return (double)__half2float(__half(r));
}
void from_d(uint8_t *p, double v, rmsnorm_dtype d) {
    if (d == RMSNORM_F32) { float f = (float)v; std::memcpy(p, &f, 4); return; }
    if (d == RMSNORM_BF16) { __nv_bfloat16 b = __float2bfloat16_rn((float)v); std::memcpy(p, &b, 2); return; }
    __half h = __float2half_rn((float)v); std::memcpy(p, &h, 2);
}

bool close(double got, double ref) { return std::fabs(got - ref) <= 1e-4 + 1e-2 * std::fabs(ref); }  // NaN fails

std::mt19937_64 rng(12345);

// One case: returns true when right. misalign: offset of every tensor by one element.
bool run_case(rmsnorm_dtype dt, rmsnorm_dtype wdt, int64_t rows, int64_t h, bool fused, int misalign) {
    const size_t es = esize(dt), ws = esize(wdt), n = (size_t)(rows * h);
    std::normal_distribution<double> nd(0.0, 1.0);
    std::vector<uint8_t> x(n * es), r(n * es), w(h * ws), out(n * es), rout(n * es);
    for (size_t i = 0; i < n; i++) { from_d(&x[i * es], nd(rng), dt); from_d(&r[i * es], nd(rng), dt); }
    for (int64_t i = 0; i < h; i++) from_d(&w[i * ws], 1.0 + 0.1 * nd(rng), wdt);
    // exact-size allocations (plus the misaligning element in front)
    uint8_t *dx, *dr, *dw, *dy;
    const size_t off = misalign ? es : 0, woff = misalign ? ws : 0;
    CK(cudaMalloc(&dx, n * es + off));
    CK(cudaMalloc(&dr, n * es + off));
    CK(cudaMalloc(&dw, h * ws + woff));
    CK(cudaMalloc(&dy, n * es + off));
    CK(cudaMemcpy(dx + off, x.data(), n * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dr + off, r.data(), n * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw + woff, w.data(), h * ws, cudaMemcpyHostToDevice));
    CK(cudaMemset(dy, 0xff, n * es + off));  // NaN in every dtype
    int rc = fused ? rmsnorm_cuda_fused_add_rms_norm(dx + off, dr + off, dw + woff, dt, wdt, rows, h, 1e-6f, 0, nullptr)
                   : rmsnorm_cuda_rms_norm(dy + off, dx + off, dw + woff, dt, wdt, rows, h, 1e-6f, 0, nullptr);
    if (rc) { std::printf("launch error %d (%s)\n", rc, rmsnorm_cuda_error_string(rc)); std::exit(2); }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), (fused ? dx : dy) + off, n * es, cudaMemcpyDeviceToHost));
    if (fused) CK(cudaMemcpy(rout.data(), dr + off, n * es, cudaMemcpyDeviceToHost));
    CK(cudaFree(dx)); CK(cudaFree(dr)); CK(cudaFree(dw)); CK(cudaFree(dy));
    bool ok = true;
    std::vector<double> s(h);
    for (int64_t i = 0; i < rows && ok; i++) {
        double ss = 0;
        for (int64_t j = 0; j < h; j++) {
            const size_t k = (size_t)(i * h + j) * es;
            double v = to_d(&x[k], dt);
            if (fused) {  // the sum rounded to x's dtype, as the kernel stores it
                uint8_t t[4];
                from_d(t, v + to_d(&r[k], dt), dt);
                v = to_d(t, dt);
                if (to_d(&rout[k], dt) != v) ok = false;
            }
            s[j] = v;
            ss += v * v;
        }
        const double inv = 1.0 / std::sqrt(ss / (double)h + 1e-6);
        for (int64_t j = 0; j < h; j++)
            if (!close(to_d(&out[(size_t)(i * h + j) * es], dt), s[j] * inv * to_d(&w[j * ws], wdt))) { ok = false; break; }
    }
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    // (rows, hidden): every dispatch branch: few 128-wide rows, lane groups of 4/16/32, whole-block
    // rows of 96..1024 threads with 1 and 2 rows a block, few rows, the vectorised two-pass kernel,
    // the scalar kernel (odd hidden or misaligned)
    const int64_t shapes[][2] = {{1, 128}, {100, 128}, {2112, 128}, {3000, 128}, {5, 24}, {300, 32}, {700, 256},
                                 {3000, 512}, {3000, 1024}, {1, 1032}, {300, 1032}, {263, 2048}, {264, 2048},
                                 {3, 5120}, {300, 5120}, {301, 6144}, {7, 7168}, {300, 8192}, {263, 10240},
                                 {300, 8200}, {300, 12288}, {5, 16384}, {300, 16384}, {300, 24576}, {300, 24584},
                                 {9, 32768}, {3, 40000}, {7, 4097},
                                 {33, 1000}};
    const rmsnorm_dtype pairs[][2] = {{RMSNORM_BF16, RMSNORM_BF16}, {RMSNORM_BF16, RMSNORM_F32},
                                      {RMSNORM_F16, RMSNORM_F16},   {RMSNORM_F16, RMSNORM_F32},
                                      {RMSNORM_F32, RMSNORM_F32}};
    const char *nm[] = {"f32", "f16", "bf16"};
    int n = 0, fails = 0;
    for (auto &p : pairs) {
        for (auto &sh : shapes) {
            for (int fused = 0; fused < 2; fused++) {
                for (int mis = 0; mis < (quick ? 1 : 2); mis++) {
                    n++;
                    if (!run_case(p[0], p[1], sh[0], sh[1], fused, mis)) {
                        fails++;
                        std::printf("FAIL %s/%s %lldx%lld %s misaligned=%d\n", nm[p[0]], nm[p[1]], (long long)sh[0],
                                    (long long)sh[1], fused ? "fused" : "rms_norm", mis);
                    }
                }
            }
        }
    }
    std::printf("cuda_paths: %d/%d cases right (poisoned outputs, float64 reference, exact-size buffers)\n", n - fails, n);
    return fails ? 1 : 0;
}
