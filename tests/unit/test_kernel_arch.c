/* GPU fitness: metadata arch rules (kernel-hub-format §6.3) and the code objects of real nvcc
 * 13.0 fat binaries (tests/data/kernel/cubin_*.so, see the README there). */
#include "support.h"

#include "hubkern.h"
#include "internal.h"

#include <stdlib.h>

static void test_entry_rules(void) {
    int parsed;
    /* X.Y: same major, minor >= Y */
    CHECK(hk_cuda_arch_entry_matches("8.0", 8, 0, &parsed) && parsed);
    CHECK(hk_cuda_arch_entry_matches("8.0", 8, 6, NULL));
    CHECK(!hk_cuda_arch_entry_matches("8.0", 9, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("8.6", 8, 0, NULL));
    /* X.Ya: exactly */
    CHECK(hk_cuda_arch_entry_matches("9.0a", 9, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("9.0a", 9, 1, NULL));
    CHECK(!hk_cuda_arch_entry_matches("9.0a", 10, 0, NULL));
    /* X.Yf: same major, minor >= Y */
    CHECK(hk_cuda_arch_entry_matches("10.0f", 10, 3, NULL));
    CHECK(!hk_cuda_arch_entry_matches("10.3f", 10, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("10.0f", 12, 0, NULL));
    /* +PTX: (M, m) >= (X, Y) */
    CHECK(hk_cuda_arch_entry_matches("12.1+PTX", 12, 1, NULL));
    CHECK(hk_cuda_arch_entry_matches("8.0+PTX", 12, 0, NULL));
    CHECK(hk_cuda_arch_entry_matches("8.6+PTX", 9, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("12.1+PTX", 12, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("9.0+PTX", 8, 9, NULL));
    /* a suffix with +PTX: kernels 0.17.2 applies the suffix rule, not the PTX one */
    CHECK(hk_cuda_arch_entry_matches("9.0a+PTX", 9, 0, NULL));
    CHECK(!hk_cuda_arch_entry_matches("9.0a+PTX", 10, 0, NULL));
    CHECK(hk_cuda_arch_entry_matches("10.0f+PTX", 10, 3, NULL));
    CHECK(!hk_cuda_arch_entry_matches("10.0f+PTX", 12, 0, NULL));
    /* not CUDA archs */
    CHECK(!hk_cuda_arch_entry_matches("gfx942", 9, 0, &parsed) && !parsed);
    CHECK(!hk_cuda_arch_entry_matches("9", 9, 0, &parsed) && !parsed);
    CHECK(!hk_cuda_arch_entry_matches("9.0b", 9, 0, &parsed) && !parsed);
    CHECK(!hk_cuda_arch_entry_matches("9.0+ptx", 9, 0, &parsed) && !parsed);
    CHECK(!hk_cuda_arch_entry_matches(NULL, 9, 0, &parsed) && !parsed);
}

static void test_metadata_check(void) {
    const char *archs[] = {"7.5", "8.0", "9.0a", "12.1+PTX"};
    hk_kernel_metadata md = {"k", "_k_cuda_1", 1, "MIT", "cuda", archs, 4, NULL, NULL};
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 9, 0), HK_OK);
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 8, 9), HK_OK);
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 12, 1), HK_OK);
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 13, 0), HK_OK);
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 10, 0), HK_ERR_ARCH);
    CHECK(strstr(hk_last_error(), "10.0") && strstr(hk_last_error(), "12.1+PTX"));
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 12, 0), HK_ERR_ARCH);
    /* every entry unparseable: supported */
    const char *junk[] = {"sm_90", "hopper"};
    hk_kernel_metadata md2 = {"k", "_k_cuda_1", 1, "MIT", "cuda", junk, 2, NULL, NULL};
    CHECK_RC(hk_kernel_check_arch(&md2, NULL, 5, 0), HK_OK);
    /* no archs: supported; non-CUDA backends are not checked against a CUDA capability */
    hk_kernel_metadata md3 = {"k", "_k_cuda_1", 1, "MIT", "cuda", NULL, 0, NULL, NULL};
    CHECK_RC(hk_kernel_check_arch(&md3, NULL, 5, 0), HK_OK);
    hk_kernel_metadata md4 = {"k", "_k_rocm_1", 1, "MIT", "rocm", junk, 2, NULL, NULL};
    CHECK_RC(hk_kernel_check_arch(&md4, NULL, 5, 0), HK_OK);
}

static char *fixture(const char *name) {
    return hk__asprintf("%s/kernel/%s", getenv("HK_TEST_DATA"), name);
}

static void test_fatbins(void) {
    hk_code_objects *o = NULL;
    size_t n = 0;
    char *p = fixture("cubin_sm80_ptx80.so");
    CHECK_RC(hk_library_code_objects(&o, p), HK_OK);
    n = hk_code_objects_count(o);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(hk_code_object_is_ptx(o, 0) && hk_code_object_sm(o, 0) == 80 && !hk_code_object_arch_specific(o, 0) && !hk_code_object_family(o, 0));
        CHECK(!hk_code_object_is_ptx(o, 1) && hk_code_object_sm(o, 1) == 80 && !hk_code_object_arch_specific(o, 1));
    }
    CHECK(hk_code_objects_fit(o, 8, 0));
    CHECK(hk_code_objects_fit(o, 8, 6));  /* cubin: same major */
    CHECK(hk_code_objects_fit(o, 9, 0));  /* PTX JIT */
    CHECK(hk_code_objects_fit(o, 12, 0));
    CHECK(!hk_code_objects_fit(o, 7, 5));
    CHECK(!hk_code_object_fits(o, 1, 9, 0)); /* the cubin alone does not run on Hopper */
    CHECK_RC(hk_kernel_check_arch(NULL, p, 9, 0), HK_OK);
    CHECK_RC(hk_kernel_check_arch(NULL, p, 7, 0), HK_ERR_ARCH);
    hk_code_objects_free(o);
    free(p);

    p = fixture("cubin_sm90a.so");
    CHECK_RC(hk_library_code_objects(&o, p), HK_OK);
    n = hk_code_objects_count(o);
    CHECK(n == 1 && !hk_code_object_is_ptx(o, 0) && hk_code_object_sm(o, 0) == 90 && hk_code_object_arch_specific(o, 0));
    CHECK(hk_code_objects_fit(o, 9, 0));
    CHECK(!hk_code_objects_fit(o, 10, 0));
    CHECK(!hk_code_objects_fit(o, 8, 0));
    CHECK_RC(hk_kernel_check_arch(NULL, p, 10, 0), HK_ERR_ARCH);
    CHECK(strstr(hk_last_error(), "sm_90a") && strstr(hk_last_error(), "sm_100"));
    hk_code_objects_free(o);
    free(p);

    p = fixture("cubin_sm90_sm100f_sm100a_ptx90a.so");
    CHECK_RC(hk_library_code_objects(&o, p), HK_OK);
    n = hk_code_objects_count(o);
    CHECK(n == 4);
    if (n == 4) {
        CHECK(!hk_code_object_is_ptx(o, 0) && hk_code_object_sm(o, 0) == 90 && !hk_code_object_arch_specific(o, 0) && !hk_code_object_family(o, 0));
        CHECK(!hk_code_object_is_ptx(o, 1) && hk_code_object_sm(o, 1) == 100 && hk_code_object_family(o, 1) && !hk_code_object_arch_specific(o, 1));
        CHECK(!hk_code_object_is_ptx(o, 2) && hk_code_object_sm(o, 2) == 100 && hk_code_object_arch_specific(o, 2));
        CHECK(hk_code_object_is_ptx(o, 3) && hk_code_object_sm(o, 3) == 90 && hk_code_object_arch_specific(o, 3));
        CHECK(hk_code_objects_fit(o, 10, 3)); /* sm_100f runs on 10.3 */
        CHECK(!hk_code_objects_fit(o, 12, 0)); /* the 90a PTX is not JIT-portable */
        CHECK(hk_code_object_fits(o, 1, 10, 3) && !hk_code_object_fits(o, 2, 10, 3));
    }
    hk_code_objects_free(o);
    free(p);

    p = fixture("cubin_sm80_ptx80_compressed.so");
    CHECK_RC(hk_library_code_objects(&o, p), HK_OK);
    n = hk_code_objects_count(o);
    CHECK(n == 2 && hk_code_object_compressed(o, 1) && hk_code_object_sm(o, 1) == 80 && !hk_code_object_is_ptx(o, 1));
    hk_code_objects_free(o);
    free(p);

    /* a library without CUDA code, a non-ELF, a missing file */
    char *self = hk__asprintf("%s/tests/kernel-fixtures/tvm-ffi01-cpu-x86_64-linux/_hkfixture_cpu_0000001.so",
                             getenv("HK_BUILD_DIR"));
    CHECK_RC(hk_library_code_objects(&o, self), HK_OK);
    n = hk_code_objects_count(o);
    CHECK(n == 0 && o == NULL);
    CHECK_RC(hk_kernel_check_arch(NULL, self, 5, 0), HK_OK); /* nothing embedded: nothing to refuse */
    free(self);
    p = fixture("README.md");
    CHECK_RC(hk_library_code_objects(&o, p), HK_ERR_LOAD);
    free(p);
    CHECK_RC(hk_library_code_objects(&o, "/nonexistent/x.so"), HK_ERR_NOT_FOUND);

    /* a truncated / corrupted fat binary: an error, never a crash */
    p = fixture("cubin_sm80_ptx80.so");
    char *data = NULL;
    size_t len = 0;
    CHECK_RC(hk__read_file(&data, &len, p, 1 << 20), HK_OK);
    char *q = hk__asprintf("%s/corrupt.so", hk_test_tmpdir());
    for (size_t i = 0; data && i + 4 <= len; i++)
        if ((unsigned char)data[i] == 0x50 && (unsigned char)data[i + 1] == 0xed &&
            (unsigned char)data[i + 2] == 0x55 && (unsigned char)data[i + 3] == 0xba) {
            data[i + 8] = (char)0xff; /* entries size far past the section */
            data[i + 9] = (char)0xff;
            break;
        }
    CHECK_RC(hk__write_file_atomic(q, data, len), HK_OK);
    CHECK_RC(hk_library_code_objects(&o, q), HK_ERR_LOAD);
    CHECK(strstr(hk_last_error(), "fat binary") != NULL);
    free(data);
    free(q);
    free(p);
}

int main(void) {
    test_entry_rules();
    test_metadata_check();
    test_fatbins();
    return hk_test_finish();
}
