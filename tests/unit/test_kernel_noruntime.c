/* Loader without a usable tvm-ffi runtime: each way of naming a bad libtvm_ffi is a specific
 * HK_ERR_RUNTIME_MISSING that says what to do; the search then still finds the real one. (Its own
 * process: the first runtime loaded stays for the life of a process.) */
#include "support.h"

#include "hubkern.h"
#include "internal.h"

#include <stdlib.h>

int main(void) {
    char *fixture = hk__asprintf("%s/tests/kernel-fixtures/tvm-ffi01-cpu-x86_64-linux", getenv("HK_BUILD_DIR"));
    hk_kernel *k = NULL;
    hk_value r;
    CHECK_RC(hk_tvm_ffi_version(NULL, NULL, NULL), HK_ERR_RUNTIME_MISSING);
    CHECK_RC(hk_set_stream(NULL, 2, 0, NULL), HK_ERR_RUNTIME_MISSING);
    CHECK_RC(hk_function_call(&r, NULL, NULL, 0), HK_ERR_INVALID_ARG);

    setenv("HUBKERN_TVM_FFI_LIB", "/nonexistent/libtvm_ffi.so", 1);
    CHECK_RC(hk_get_local_kernel(&k, fixture, NULL), HK_ERR_RUNTIME_MISSING);
    CHECK(strstr(hk_last_error(), "HUBKERN_TVM_FFI_LIB") != NULL);
    CHECK(strstr(hk_last_error(), "/nonexistent/libtvm_ffi.so") != NULL);
    CHECK(k == NULL);
    unsetenv("HUBKERN_TVM_FFI_LIB");

    setenv("TVM_FFI_LIB", "/nonexistent/other.so", 1);
    CHECK_RC(hk_get_local_kernel(&k, fixture, NULL), HK_ERR_RUNTIME_MISSING);
    CHECK(strstr(hk_last_error(), "TVM_FFI_LIB") != NULL);
    unsetenv("TVM_FFI_LIB");

    /* a real library that is not libtvm_ffi */
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.tvm_ffi_library = "libz.so.1";
    CHECK_RC(hk_get_local_kernel(&k, fixture, &o), HK_ERR_RUNTIME_MISSING);
    CHECK(strstr(hk_last_error(), "not libtvm_ffi") != NULL);
    CHECK(strstr(hk_last_error(), "the caller") != NULL);

    /* nothing named: found by the search (the Python package's copy on a test machine) */
    const char *where = NULL;
    CHECK_RC(hk_tvm_ffi_load(&where, NULL), HK_OK);
    CHECK(where && strstr(where, "libtvm_ffi") != NULL);
    CHECK_RC(hk_get_local_kernel(&k, fixture, NULL), HK_OK);
    hk_value one[] = {hk_value_int(1)};
    CHECK_RC(hk_kernel_call(&r, k, "add_one", one, 1), HK_OK);
    CHECK(r.v.i == 2);
    hk_kernel_unref(k);
    free(fixture);
    return hk_test_finish();
}
