/* Get the RMSNorm kernel from a Kernel Hub (or a mirror) with hubkern and call it from C.
 *
 * This is the program to copy into a C serving binary: no Python in the process.
 *
 *   cc -std=c11 rmsnorm_example.c $(pkg-config --cflags --libs hubkern) -lm \
 *      -Wl,-rpath,$(pkg-config --variable=libdir hubkern) -o rmsnorm_example
 *   (the rpath lets it find libhubkern.so.0 outside the paths ldconfig knows)
 *   ./rmsnorm_example --repo kernels-community/rmsnorm --version 1 [--device cuda]
 *
 * What it does:
 *   1. hk_get_kernel: resolve the version (branch vN) to a commit, choose the build variant for this
 *      machine, download it into the huggingface_hub cache verifying every byte (or find it there),
 *      check the GPU against the build's archs, load libtvm_ffi and the kernel library;
 *   2. fill x [rows, hidden] and weight [hidden] with random numbers (float32);
 *   3. call rms_norm(out, x, weight, eps) through hk_kernel_call with DLTensor arguments
 *      (on the GPU with --device cuda: buffers from cudaMalloc, the kernel on our own stream);
 *   4. check every output against a float64 reference and print what happened.
 * Exit status: 0 all checked, 1 a mismatch or an error (the message says why).
 *
 * The CUDA runtime is opened with dlopen only when --device cuda is given, so this builds and runs
 * on machines without CUDA. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under plain -std=c11 */
#include <hubkern.h>

#include <stdbool.h>

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the handful of CUDA runtime calls we need, looked up at run time ------------------------ */
typedef struct cuda_rt {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int);
    int (*stream_create)(void **);
    int (*stream_sync)(void *);
    int (*stream_destroy)(void *);
    const char *(*error_string)(int);
} cuda_rt;
enum { H2D = 1, D2H = 2 };

static int cuda_open(cuda_rt *rt) {
    const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                           "/usr/local/cuda/lib64/libcudart.so", "/usr/local/cuda/lib64/libcudart.so.13"};
    void *h = NULL;
    char path[4096];
    const char *home = getenv("CUDA_HOME");
    if (home) {
        snprintf(path, sizeof path, "%s/lib64/libcudart.so", home);
        h = dlopen(path, RTLD_NOW);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) h = dlopen(names[i], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "--device cuda: cannot load the CUDA runtime (libcudart.so): %s\n", dlerror());
        return -1;
    }
    *(void **)&rt->malloc_ = dlsym(h, "cudaMalloc");
    *(void **)&rt->free_ = dlsym(h, "cudaFree");
    *(void **)&rt->memcpy_ = dlsym(h, "cudaMemcpy");
    *(void **)&rt->stream_create = dlsym(h, "cudaStreamCreate");
    *(void **)&rt->stream_sync = dlsym(h, "cudaStreamSynchronize");
    *(void **)&rt->stream_destroy = dlsym(h, "cudaStreamDestroy");
    *(void **)&rt->error_string = dlsym(h, "cudaGetErrorString");
    if (!rt->malloc_ || !rt->free_ || !rt->memcpy_ || !rt->stream_create || !rt->stream_sync ||
        !rt->stream_destroy || !rt->error_string) {
        fprintf(stderr, "--device cuda: libcudart lacks the functions this example uses\n");
        return -1;
    }
    return 0;
}

/* ---- data and reference --------------------------------------------------------------------- */
static uint64_t rng_state;
static float uniform(void) { /* xorshift64*, [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void rms_norm_reference(double *out, const float *x, const float *w, long rows, long hidden,
                               double eps) {
    for (long r = 0; r < rows; r++) {
        double ss = 0;
        for (long i = 0; i < hidden; i++) ss += (double)x[r * hidden + i] * x[r * hidden + i];
        double inv = 1.0 / sqrt(ss / (double)hidden + eps);
        for (long i = 0; i < hidden; i++) out[r * hidden + i] = (double)x[r * hidden + i] * inv * w[i];
    }
}

static int progress(void *ud, const hk_progress *p) {
    (void)ud;
    if (p->total_bytes && p->done_bytes == p->total_bytes)
        fprintf(stderr, "  %s: %llu bytes, %u/%u files\n", p->stage, (unsigned long long)p->done_bytes,
                p->done_files, p->total_files);
    return 0; /* non-zero would cancel */
}

static void usage(void) {
    fprintf(stderr,
            "usage: rmsnorm_example [--repo ORG/NAME] [--version N | --revision REV] [--device cpu|cuda]\n"
            "                       [--rows R] [--hidden H] [--endpoint URL] [--cache DIR] [--offline]\n"
            "                       [--backend cpu|cuda] [--trust-remote-code] [--seed S] [--dump DIR]\n");
}

int main(int argc, char **argv) {
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.repo_id = "kernels-community/rmsnorm";
    o.kernel_version = 1;
    o.hub_options.progress = progress;
    const char *device = "cpu", *dump = NULL;
    long rows = 64, hidden = 4096;
    uint64_t seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--offline") == 0) o.hub_options.offline = 1;
        else if (strcmp(a, "--trust-remote-code") == 0) o.trust_remote_code = true;
        else if (!v) { usage(); return 2; }
        else if (strcmp(a, "--repo") == 0) { o.repo_id = v; i++; }
        else if (strcmp(a, "--version") == 0) { o.kernel_version = atoi(v); o.revision = NULL; i++; }
        else if (strcmp(a, "--revision") == 0) { o.revision = v; o.kernel_version = HK_VERSION_UNSET; i++; }
        else if (strcmp(a, "--device") == 0) { device = v; i++; }
        else if (strcmp(a, "--rows") == 0) { rows = atol(v); i++; }
        else if (strcmp(a, "--hidden") == 0) { hidden = atol(v); i++; }
        else if (strcmp(a, "--endpoint") == 0) { o.hub_options.endpoint = v; i++; }
        else if (strcmp(a, "--cache") == 0) { o.hub_options.cache_dir = v; i++; }
        else if (strcmp(a, "--backend") == 0) { o.backend = v; i++; }
        else if (strcmp(a, "--seed") == 0) { seed = strtoull(v, NULL, 10); i++; }
        else if (strcmp(a, "--dump") == 0) { dump = v; i++; }
        else { usage(); return 2; }
    }
    bool on_gpu = strcmp(device, "cuda") == 0;
    if ((!on_gpu && strcmp(device, "cpu") != 0) || rows <= 0 || hidden <= 0) { usage(); return 2; }
    rng_state = seed * 0x9E3779B97F4A7C15ULL | 1;

    /* 1. get the kernel */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hk_kernel *k = NULL;
    if (hk_get_kernel(&k, &o) != HK_OK) {
        fprintf(stderr, "hk_get_kernel failed [%s]: %s\n", hk_error_name(hk_last_error_code()), hk_last_error());
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const hk_kernel_metadata *md = hk_kernel_get_metadata(k);
    if (o.revision) printf("kernel    %s revision %s -> commit %s\n", hk_kernel_repo_id(k), o.revision, hk_kernel_commit(k));
    else printf("kernel    %s version %d -> commit %s\n", hk_kernel_repo_id(k), o.kernel_version, hk_kernel_commit(k));
    printf("variant   %s  [%s, %s backend, license %s]  in %.1f ms\n", hk_kernel_variant(k), md->id,
           md->backend, md->license, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    printf("library   %s\n", hk_kernel_library_path(k) ? hk_kernel_library_path(k) : "(none)");
    printf("exports  ");
    for (size_t i = 0; i < hk_kernel_num_functions(k); i++) printf(" %s", hk_kernel_function_name(k, i));
    printf("\n");

    /* 2. data */
    size_t n = (size_t)rows * (size_t)hidden;
    float *x = malloc(n * sizeof *x), *out = malloc(n * sizeof *out), *w = malloc((size_t)hidden * sizeof *w);
    double *ref = malloc(n * sizeof *ref);
    if (!x || !out || !w || !ref) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) { x[i] = 3.0f * uniform(); out[i] = NAN; }
    for (long i = 0; i < hidden; i++) w[i] = 1.0f + 0.5f * uniform();
    const double eps = 1e-6;

    /* 3. call: DLTensors describing our buffers (host or device) */
    cuda_rt cu;
    memset(&cu, 0, sizeof cu);
    void *dx = x, *dout = out, *dw = w, *stream = NULL;
    int status = 1;
    if (on_gpu) {
        if (cuda_open(&cu) != 0) goto done;
        int e = cu.malloc_(&dx, n * 4);
        if (!e) e = cu.malloc_(&dout, n * 4);
        if (!e) e = cu.malloc_(&dw, (size_t)hidden * 4);
        if (!e) e = cu.memcpy_(dx, x, n * 4, H2D);
        if (!e) e = cu.memcpy_(dout, out, n * 4, H2D);
        if (!e) e = cu.memcpy_(dw, w, (size_t)hidden * 4, H2D);
        if (!e) e = cu.stream_create(&stream);
        if (e) { fprintf(stderr, "CUDA: %s\n", cu.error_string(e)); goto done; }
        /* tvm-ffi kernels launch on the stream set for their device (TVMFFIEnvSetStream) */
        if (hk_set_stream(NULL, HK_DEVICE_CUDA, 0, stream) != HK_OK) {
            fprintf(stderr, "hk_set_stream: %s\n", hk_last_error());
            goto done;
        }
    }
    hk_device dev = {on_gpu ? HK_DEVICE_CUDA : HK_DEVICE_CPU, 0};
    hk_dtype f32 = {HK_DTYPE_FLOAT, 32, 1};
    int64_t shape[2] = {rows, hidden}, wshape[1] = {hidden};
    hk_dltensor tx = {dx, dev, 2, f32, shape, NULL, 0};
    hk_dltensor tout = {dout, dev, 2, f32, shape, NULL, 0};
    hk_dltensor tw = {dw, dev, 1, f32, wshape, NULL, 0};
    hk_value args[4] = {hk_value_tensor(&tout), hk_value_tensor(&tx), hk_value_tensor(&tw), hk_value_float(eps)};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (hk_kernel_call(NULL, k, "rms_norm", args, 4) != HK_OK) {
        fprintf(stderr, "rms_norm failed [%s]: %s\n", hk_error_name(hk_last_error_code()), hk_last_error());
        goto done;
    }
    if (on_gpu) {
        int e = cu.stream_sync(stream);
        if (!e) e = cu.memcpy_(out, dout, n * 4, D2H);
        if (e) { fprintf(stderr, "CUDA: %s\n", cu.error_string(e)); goto done; }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* 4. check */
    rms_norm_reference(ref, x, w, rows, hidden, eps);
    double max_err = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)out[i] - ref[i]);
        if (!(err <= 1e-5 + 1e-5 * fabs(ref[i]))) bad++;
        if (!(err <= max_err)) max_err = err;
    }
    printf("call      rms_norm(out, x, weight, %g) on %ldx%ld float32 %s tensors in %.3f ms\n", eps, rows,
           hidden, on_gpu ? "CUDA" : "CPU", (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    printf("check     %zu values vs float64 reference: max |error| %.3g, %zu outside 1e-5: %s\n", n, max_err, bad,
           bad ? "FAILED" : "ok");
    status = bad ? 1 : 0;
    if (dump) { /* raw float32 x, weight and out, for comparing with another client */
        const char *names[3] = {"x.f32", "weight.f32", "out.f32"};
        const float *bufs[3] = {x, w, out};
        size_t counts[3] = {n, (size_t)hidden, n};
        for (int b = 0; b < 3; b++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dump, names[b]);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(bufs[b], sizeof(float), counts[b], f) != counts[b]) status = 1;
            if (f) fclose(f);
        }
    }
done:
    if (on_gpu && dx != x) {
        if (stream) {
            hk_set_stream(NULL, HK_DEVICE_CUDA, 0, NULL);
            cu.stream_destroy(stream);
        }
        cu.free_(dx);
        if (dout != out) cu.free_(dout);
        if (dw != w) cu.free_(dw);
    }
    free(x);
    free(out);
    free(w);
    free(ref);
    hk_kernel_unref(k);
    return status;
}
