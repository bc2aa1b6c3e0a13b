/* Driver for bench/get_kernel_warm.py: warm hk_get_kernel latency (cached, offline).
 * usage: get_kernel_warm REPO VERSION CACHE N [BACKEND]
 * Prints one JSON object: the first (cold, in-process) call and the median/p90/min of N warm calls,
 * in microseconds. Built by CMake (bench/CMakeLists.txt) so that it keeps compiling. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under plain -std=c11 */
#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: get_kernel_warm REPO VERSION CACHE N [BACKEND]\n");
        return 2;
    }
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.repo_id = argv[1];
    o.kernel_version = atoi(argv[2]);
    o.hub_options.cache_dir = argv[3];
    o.hub_options.offline = 1;
    o.backend = argc > 5 ? argv[5] : NULL;
    int n = atoi(argv[4]);
    double *t = calloc((size_t)n, sizeof *t);
    hk_kernel *k = NULL;
    double t0 = now_us();
    if (hk_get_kernel(&k, &o) != HK_OK) {
        fprintf(stderr, "hk_get_kernel: %s\n", hk_last_error());
        return 1;
    }
    double cold = now_us() - t0;
    for (int i = 0; i < n; i++) {
        hk_kernel *k2 = NULL;
        double s = now_us();
        if (hk_get_kernel(&k2, &o) != HK_OK || k2 != k) {
            fprintf(stderr, "warm hk_get_kernel: %s\n", hk_last_error());
            return 1;
        }
        t[i] = now_us() - s;
        hk_kernel_unref(k2);
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("{\"cold_us\": %.1f, \"median_us\": %.2f, \"p90_us\": %.2f, \"min_us\": %.2f, \"n\": %d, "
           "\"variant\": \"%s\"}\n", cold, t[n / 2], t[(n * 9) / 10], t[0], n, hk_kernel_variant(k));
    hk_kernel_unref(k);
    free(t);
    return 0;
}
