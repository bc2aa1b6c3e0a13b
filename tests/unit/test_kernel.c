/* Loader: a real tvm-ffi kernel (tests/data/kernel/tvmffi_fixture.cc built against the
 * apache-tvm-ffi wheel) loaded through libtvm_ffi found at run time, then called with every
 * argument kind; errors raised in the kernel; the registry (one load per process, across
 * threads; two versions side by side); metadata; non-tvm-ffi kinds. */
#include "support.h"

#include "hubkern/env.h"
#include "hubkern.h"
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_fixture; /* the built variant directory */

static char *copy_variant(const char *name) {
    /* a second copy of the fixture = "another version" in another directory */
    char *dst = hk__asprintf("%s/%s", hk_test_tmpdir(), name);
    hk__mkdirs(dst, 0777);
    char *cmd = hk__asprintf("cp '%s'/* '%s'/", g_fixture, dst);
    CHECK(system(cmd) == 0);
    free(cmd);
    return dst;
}

static void test_load_and_list(void) {
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_local_kernel(&k, g_fixture, NULL), HK_OK);
    if (!k) return;
    CHECK(hk_kernel_get_kind(k) == HK_KERNEL_TVM_FFI);
    CHECK_STR(hk_kernel_variant(k), "tvm-ffi01-cpu-x86_64-linux");
    CHECK_STR(hk_kernel_repo_id(k), "");
    const hk_kernel_metadata *md = hk_kernel_get_metadata(k);
    CHECK(md && hk_kernel_metadata_get(k) == md); /* the earlier name, kept for old programs */
    CHECK_STR(md->name, "hkfixture");
    CHECK_STR(md->id, "_hkfixture_cpu_0000001");
    CHECK(md->version == 1);
    CHECK_STR(md->license, "Apache-2.0");
    CHECK_STR(md->backend, "cpu");
    CHECK(md->num_archs == 0);
    CHECK(hk__str_ends_with(hk_kernel_library_path(k), "/_hkfixture_cpu_0000001.so"));
    /* exported functions, sorted, from the __tvm_ffi_ dynamic symbols */
    static const char *const want[] = {"add_one", "current_stream", "fail", "greet", "inspect", "is_none", "mix", "scale"};
    CHECK(hk_kernel_num_functions(k) == HK_ARRAY_LEN(want));
    for (size_t i = 0; i < HK_ARRAY_LEN(want); i++) CHECK_STR(hk_kernel_function_name(k, i), want[i]);
    CHECK(hk_kernel_function_name(k, 99) == NULL);
    int ma = -1, mi = -1, pa = -1;
    CHECK_RC(hk_tvm_ffi_version(&ma, &mi, &pa), HK_OK);
    CHECK(ma == 0 && mi == 1);
    hk_kernel_unref(k);
}

static void test_calls(void) {
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_local_kernel(&k, g_fixture, NULL), HK_OK);
    if (!k) return;
    hk_value r;
    hk_value a1[] = {hk_value_int(41)};
    CHECK_RC(hk_kernel_call(&r, k, "add_one", a1, 1), HK_OK);
    CHECK(r.kind == HK_VALUE_INT && r.v.i == 42);

    hk_value a2[] = {hk_value_int(3), hk_value_float(0.5), hk_value_bool(true)};
    CHECK_RC(hk_kernel_call(&r, k, "mix", a2, 3), HK_OK);
    CHECK(r.kind == HK_VALUE_FLOAT && r.v.f == 1.5);
    a2[2] = hk_value_bool(false);
    CHECK_RC(hk_kernel_call(&r, k, "mix", a2, 3), HK_OK);
    CHECK(r.kind == HK_VALUE_FLOAT && r.v.f == -1.0);

    /* tensors: DLTensor pointers */
    float x[5] = {1, 2, 3, 4, 5}, out[5] = {0};
    int64_t shape[1] = {5};
    hk_dltensor tx = {x, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_dltensor to = {out, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_value a3[] = {hk_value_tensor(&to), hk_value_tensor(&tx), hk_value_float(2.5)};
    CHECK_RC(hk_kernel_call(&r, k, "scale", a3, 3), HK_OK);
    CHECK(r.kind == HK_VALUE_NONE);
    for (int i = 0; i < 5; i++) CHECK(out[i] == x[i] * 2.5f);

    /* strings in and out (a heap Str object for long results) */
    hk_value a4[] = {hk_value_string("hubkern, calling from C")};
    CHECK_RC(hk_kernel_call(&r, k, "greet", a4, 1), HK_OK);
    CHECK(r.kind == HK_VALUE_STRING);
    if (r.kind == HK_VALUE_STRING) CHECK_STR(r.v.str, "hello, hubkern, calling from C!");
    hk_value_clear(&r);
    CHECK(r.kind == HK_VALUE_NONE);
    hk_value a4b[] = {hk_value_string("x")}; /* "hello, x!" fits no small string: still a string */
    CHECK_RC(hk_kernel_call(&r, k, "greet", a4b, 1), HK_OK);
    if (r.kind == HK_VALUE_STRING) CHECK_STR(r.v.str, "hello, x!");
    hk_value_clear(&r);

    /* none */
    hk_value a5[] = {hk_value_none()};
    CHECK_RC(hk_kernel_call(&r, k, "is_none", a5, 1), HK_OK);
    CHECK(r.kind == HK_VALUE_BOOL && r.v.b);
    a5[0] = hk_value_int(3);
    CHECK_RC(hk_kernel_call(&r, k, "is_none", a5, 1), HK_OK);
    CHECK(r.kind == HK_VALUE_BOOL && !r.v.b);

    /* result may be NULL */
    CHECK_RC(hk_kernel_call(NULL, k, "add_one", a1, 1), HK_OK);

    /* streams: what the kernel reads with TVMFFIEnvGetStream is what we set */
    void *prev = (void *)1;
    CHECK_RC(hk_set_stream(&prev, HK_DEVICE_CUDA, 0, (void *)0x1234), HK_OK);
    CHECK(prev == NULL);
    hk_value a6[] = {hk_value_int(HK_DEVICE_CUDA)};
    CHECK_RC(hk_kernel_call(&r, k, "current_stream", a6, 1), HK_OK);
    CHECK(r.kind == HK_VALUE_INT && r.v.i == 0x1234);
    CHECK_RC(hk_set_stream(&prev, HK_DEVICE_CUDA, 0, NULL), HK_OK);
    CHECK(prev == (void *)0x1234);

    /* a function handle */
    const hk_function *f = NULL;
    CHECK_RC(hk_kernel_function(&f, k, "add_one"), HK_OK);
    CHECK_RC(hk_function_call(&r, f, a1, 1), HK_OK);
    CHECK(r.v.i == 42);
    hk_kernel_unref(k);
}

/* A kernel that reads every DLTensor field through TensorView (size, stride, dtype, device,
 * byte_offset), as third-party kernels do: strides == NULL reach it as compact row-major strides
 * (tvm-ffi's stride(i) dereferences them: it crashed before), given strides and byte_offset as
 * they are; the caller's tensor is left as it was. */
static void test_tensor_fields(void) {
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_local_kernel(&k, g_fixture, NULL), HK_OK);
    if (!k) return;
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)(i + 1);
    int64_t shape[2] = {2, 3};
    hk_dltensor t = {m, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shape, NULL, 0};
    hk_value a[] = {hk_value_tensor(&t)};
    hk_value r;
    /* sum of m[k] * (k + 1) over the 6 compact elements 1..6: 1+4+9+16+25+36 */
    CHECK_RC(hk_kernel_call(&r, k, "inspect", a, 1), HK_OK);
    if (r.kind == HK_VALUE_STRING)
        CHECK_STR(r.v.str, "shape=2x3 strides=3,1 dtype=2:32:1 device=1:0 offset=0 contiguous=1 sum=91");
    hk_value_clear(&r);
    CHECK(t.strides == NULL); /* the copy had them, not the caller's tensor */

    /* non-compact: every other column of a 2x6 buffer, i.e. m[0,2,4] and m[6,8,10] */
    int64_t strides[2] = {6, 2};
    t.strides = strides;
    CHECK_RC(hk_kernel_call(&r, k, "inspect", a, 1), HK_OK);
    /* 1*1 + 3*2 + 5*3 + 7*4 + 9*5 + 11*6 = 161 */
    if (r.kind == HK_VALUE_STRING)
        CHECK_STR(r.v.str, "shape=2x3 strides=6,2 dtype=2:32:1 device=1:0 offset=0 contiguous=0 sum=161");
    hk_value_clear(&r);

    /* byte_offset with NULL strides: compact from m[2] (elements 3..8) */
    t.strides = NULL;
    t.byte_offset = 2 * sizeof(float);
    CHECK_RC(hk_kernel_call(&r, k, "inspect", a, 1), HK_OK);
    /* 3*1 + 4*2 + 5*3 + 6*4 + 7*5 + 8*6 = 133 */
    if (r.kind == HK_VALUE_STRING)
        CHECK_STR(r.v.str, "shape=2x3 strides=3,1 dtype=2:32:1 device=1:0 offset=8 contiguous=1 sum=133");
    hk_value_clear(&r);

    /* more dimensions than the call's stack buffer holds: 63 leading 1s, then 2x3 */
    int64_t big[65];
    for (int i = 0; i < 63; i++) big[i] = 1;
    big[63] = 2;
    big[64] = 3;
    hk_dltensor tb = {m, {HK_DEVICE_CPU, 0}, 65, {HK_DTYPE_FLOAT, 32, 1}, big, NULL, 0};
    hk_value ab[] = {hk_value_tensor(&tb)};
    CHECK_RC(hk_kernel_call(&r, k, "inspect", ab, 1), HK_OK);
    if (r.kind == HK_VALUE_STRING) CHECK(hk__str_ends_with(r.v.str, ",6,3,1 dtype=2:32:1 device=1:0 offset=0 contiguous=1 sum=91"));
    hk_value_clear(&r);
    hk_kernel_unref(k);
}

static void test_call_errors(void) {
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_local_kernel(&k, g_fixture, NULL), HK_OK);
    if (!k) return;
    hk_value r;
    /* a kernel-raised error carries its kind and message */
    hk_value a[] = {hk_value_string("boom")};
    CHECK_RC(hk_kernel_call(&r, k, "fail", a, 1), HK_ERR_KERNEL);
    CHECK(strstr(hk_last_error(), "ValueError") != NULL);
    CHECK(strstr(hk_last_error(), "fixture failure: boom") != NULL);
    /* a failed check inside the kernel (TVM_FFI_ICHECK) */
    float x[2] = {0};
    int64_t s2[2] = {1, 2};
    hk_dltensor t2 = {x, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, s2, NULL, 0};
    hk_value bad_rank[] = {hk_value_tensor(&t2), hk_value_tensor(&t2), hk_value_float(1)};
    CHECK_RC(hk_kernel_call(&r, k, "scale", bad_rank, 3), HK_ERR_KERNEL);
    CHECK(strstr(hk_last_error(), "scale expects 1-D tensors") != NULL);
    /* wrong count → the runtime's TypeError → HK_ERR_TYPE */
    hk_value one[] = {hk_value_int(1)};
    CHECK_RC(hk_kernel_call(&r, k, "scale", one, 1), HK_ERR_TYPE);
    CHECK(strstr(hk_last_error(), "TypeError") != NULL);
    CHECK(strstr(hk_last_error(), "Expected 3") != NULL);
    /* wrong types */
    hk_value wrong[] = {hk_value_string("not a number")};
    CHECK_RC(hk_kernel_call(&r, k, "add_one", wrong, 1), HK_ERR_TYPE);
    CHECK(strstr(hk_last_error(), "TypeError") != NULL);
    hk_value wrong2[] = {hk_value_int(1), hk_value_int(2), hk_value_float(1)};
    CHECK_RC(hk_kernel_call(&r, k, "scale", wrong2, 3), HK_ERR_TYPE);
    /* unknown function lists what exists */
    CHECK_RC(hk_kernel_call(&r, k, "nope", one, 1), HK_ERR_SYMBOL);
    CHECK(strstr(hk_last_error(), "add_one") != NULL);
    /* caller mistakes */
    hk_value nt[] = {hk_value_tensor(NULL)};
    CHECK_RC(hk_kernel_call(&r, k, "add_one", nt, 1), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_kernel_call(&r, k, "add_one", NULL, 1), HK_ERR_INVALID_ARG);
    /* the kernel still works after errors */
    CHECK_RC(hk_kernel_call(&r, k, "add_one", one, 1), HK_OK);
    CHECK(r.v.i == 2);
    hk_kernel_unref(k);
}

typedef struct thread_arg {
    hk_kernel *got;
    int rc;
} thread_arg;

static void *load_thread(void *p) {
    thread_arg *a = p;
    a->rc = hk_get_local_kernel(&a->got, g_fixture, NULL);
    if (a->rc == HK_OK) {
        hk_value r, one[] = {hk_value_int(7)};
        if (hk_kernel_call(&r, a->got, "add_one", one, 1) != HK_OK || r.v.i != 8) a->rc = -1;
    }
    return NULL;
}

static void test_registry(void) {
    enum { N = 8 };
    pthread_t t[N];
    thread_arg args[N];
    memset(args, 0, sizeof args);
    for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, load_thread, &args[i]);
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        CHECK(args[i].rc == HK_OK);
        CHECK(args[i].got == args[0].got); /* one handle for the variant, whatever the thread */
    }
    /* the same path through a different spelling is the same variant */
    char *alt = hk__asprintf("%s/.", g_fixture);
    hk_kernel *k2 = NULL;
    CHECK_RC(hk_get_local_kernel(&k2, alt, NULL), HK_OK);
    CHECK(k2 == args[0].got);
    free(alt);
    hk_kernel_unref(k2);
    CHECK(hk_kernel_ref(args[0].got) == args[0].got);
    hk_kernel_unref(args[0].got);
    for (int i = 0; i < N; i++) hk_kernel_unref(args[i].got);

    /* two versions side by side: different directories, different libraries, both callable */
    char *v2 = copy_variant("v2/tvm-ffi01-cpu-x86_64-linux");
    hk_kernel *a = NULL, *b = NULL;
    CHECK_RC(hk_get_local_kernel(&a, g_fixture, NULL), HK_OK);
    CHECK_RC(hk_get_local_kernel(&b, v2, NULL), HK_OK);
    CHECK(a && b && a != b);
    if (a && b) {
        CHECK(strcmp(hk_kernel_library_path(a), hk_kernel_library_path(b)) != 0);
        const hk_function *fa, *fb;
        CHECK_RC(hk_kernel_function(&fa, a, "add_one"), HK_OK);
        CHECK_RC(hk_kernel_function(&fb, b, "add_one"), HK_OK);
        hk_value r1, r2, one[] = {hk_value_int(1)};
        CHECK_RC(hk_function_call(&r1, fa, one, 1), HK_OK);
        CHECK_RC(hk_function_call(&r2, fb, one, 1), HK_OK);
        CHECK(r1.v.i == 2 && r2.v.i == 2);
    }
    hk_kernel_unref(a);
    hk_kernel_unref(b);
    free(v2);
}

static void write_variant(const char *dir, const char *metadata, const char *lib_name, const char *lib_src) {
    char *p = hk__asprintf("%s/metadata.json", dir);
    hk_test_write(p, metadata);
    free(p);
    if (lib_name) {
        char *cmd = hk__asprintf("mkdir -p '%s' && cp '%s' '%s/%s'", dir, lib_src, dir, lib_name);
        CHECK(system(cmd) == 0);
        free(cmd);
    }
}

static void test_kinds_and_bad_variants(void) {
    const char *tmp = hk_test_tmpdir();
    const char *data = getenv("HK_TEST_DATA");
    char *cubin = hk__asprintf("%s/kernel/cubin_sm90a.so", data);
    hk_kernel *k = NULL;

    /* noarch: path, no native code */
    char *noarch = hk__asprintf("%s/torch-cpu", tmp);
    write_variant(noarch, "{\"name\":\"py-only\",\"id\":\"_py_only_cpu_1\",\"version\":2,\"license\":\"MIT\","
                  "\"python-depends\":[],\"backend\":{\"type\":\"cpu\"}}", NULL, NULL);
    CHECK_RC(hk_get_local_kernel(&k, noarch, NULL), HK_OK);
    if (k) {
        CHECK(hk_kernel_get_kind(k) == HK_KERNEL_NOARCH);
        CHECK(hk_kernel_library_path(k) == NULL);
        CHECK(hk_kernel_num_functions(k) == 0);
        hk_value one[] = {hk_value_int(1)};
        CHECK_RC(hk_kernel_call(NULL, k, "f", one, 1), HK_ERR_UNSUPPORTED);
        CHECK(strstr(hk_last_error(), "holds no native code") != NULL);
        hk_kernel_unref(k);
    }

    /* torch variant without libtorch in the process */
    char *torch = hk__asprintf("%s/torch213-cxx11-cpu-x86_64-linux", tmp);
    write_variant(torch, "{\"name\":\"tk\",\"id\":\"_t_cpu_1\",\"version\":1,\"license\":\"MIT\","
                  "\"python-depends\":[],\"backend\":{\"type\":\"cpu\"}}", "_t_cpu_1.abi3.so", cubin);
    CHECK_RC(hk_get_local_kernel(&k, torch, NULL), HK_ERR_RUNTIME_MISSING);
    CHECK(strstr(hk_last_error(), "libtorch") != NULL);

    /* CUDA tvm-ffi variant whose metadata and code objects cover sm_90a only */
    char *cuda = hk__asprintf("%s/tvm-ffi01-cu130-x86_64-linux", tmp);
    write_variant(cuda, "{\"name\":\"ck\",\"id\":\"_c_cuda_1\",\"version\":1,\"license\":\"MIT\","
                  "\"python-depends\":[],\"backend\":{\"type\":\"cuda\",\"archs\":[\"9.0a\"]}}",
                  "_c_cuda_1.so", cubin);
    /* describe the machine: one GPU of compute capability 8.0 */
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    CHECK_RC(hk_env_set(env, "gpus", "8.0"), HK_OK);
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.env = env;
    CHECK_RC(hk_get_local_kernel(&k, cuda, &o), HK_ERR_ARCH);
    CHECK(strstr(hk_last_error(), "8.0") != NULL && strstr(hk_last_error(), "9.0a") != NULL);
    /* metadata says any 9.x/10.x... but the library embeds only sm_90a: code objects refuse 10.0 */
    char *cuda2 = hk__asprintf("%s/x2/tvm-ffi01-cu130-x86_64-linux", tmp);
    write_variant(cuda2, "{\"name\":\"ck\",\"id\":\"_c_cuda_2\",\"version\":1,\"license\":\"MIT\","
                  "\"python-depends\":[],\"backend\":{\"type\":\"cuda\",\"archs\":[\"9.0+PTX\"]}}",
                  "_c_cuda_2.so", cubin);
    CHECK_RC(hk_env_set(env, "gpus", "10.0"), HK_OK);
    CHECK_RC(hk_get_local_kernel(&k, cuda2, &o), HK_ERR_ARCH);
    CHECK(strstr(hk_last_error(), "sm_90a") != NULL);
    /* the check can be skipped: loading then proceeds to dlopen (which fails here: the fixture
     * library needs the CUDA runtime, which it does not link) */
    o.skip_arch_check = true;
    CHECK_RC(hk_get_local_kernel(&k, cuda2, &o), HK_ERR_LOAD);
    hk_env_free(env);

    /* metadata problems */
    char *bad = hk__asprintf("%s/tvm-ffi01-cpu-aarch64-linux", tmp);
    write_variant(bad, "{\"python-depends\":[]}", NULL, NULL);
    CHECK_RC(hk_get_local_kernel(&k, bad, NULL), HK_ERR_PARSE);
    CHECK(strstr(hk_last_error(), "'name'") != NULL);
    write_variant(bad, "{not json", NULL, NULL);
    CHECK_RC(hk_get_local_kernel(&k, bad, NULL), HK_ERR_PARSE);
    /* library missing */
    write_variant(bad, "{\"name\":\"bk\",\"id\":\"_b_cpu_1\",\"version\":1,\"license\":\"MIT\","
                  "\"python-depends\":[],\"backend\":{\"type\":\"cpu\"}}", NULL, NULL);
    CHECK_RC(hk_get_local_kernel(&k, bad, NULL), HK_ERR_LOAD);
    CHECK(strstr(hk_last_error(), "_b_cpu_1.so") != NULL);
    /* a library that is not ELF */
    char *junk = hk__asprintf("%s/_b_cpu_1.so", bad);
    hk_test_write(junk, "this is not a shared library, it is a corrupted download");
    CHECK_RC(hk_get_local_kernel(&k, bad, NULL), HK_ERR_LOAD);
    /* L1: an id that is not one file name never names a library outside the variant, even where
     * one exists there (a planted tmp/planted.so beside the variant directory) */
    char *planted = hk__asprintf("%s/planted.so", tmp);
    char *cp = hk__asprintf("cp '%s' '%s'", cubin, planted);
    CHECK(system(cp) == 0);
    static const char *const bad_ids[] = {"../planted", "a/b", "", ".hidden", "/abs/x", "..", "x;y", "sp ace"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        char *md = hk__asprintf("{\"name\":\"bk\",\"id\":\"%s\",\"version\":1,\"license\":\"MIT\","
                                "\"python-depends\":[],\"backend\":{\"type\":\"cpu\"}}", bad_ids[i]);
        write_variant(bad, md, NULL, NULL);
        CHECK_RC(hk_get_local_kernel(&k, bad, NULL), HK_ERR_PARSE);
        CHECK(strstr(hk_last_error(), "is not a kernel id") != NULL);
        CHECK(k == NULL);
        free(md);
    }
    free(cp);
    free(planted);
    /* a directory that is no variant */
    char *missing = hk__asprintf("%s/does-not-exist", tmp);
    CHECK_RC(hk_get_local_kernel(&k, missing, NULL), HK_ERR_NOT_FOUND);
    CHECK(k == NULL);
    free(noarch); free(torch); free(cuda); free(cuda2); free(bad); free(junk); free(missing); free(cubin);
}

int main(void) {
    const char *b = getenv("HK_BUILD_DIR");
    g_fixture = hk__asprintf("%s/tests/kernel-fixtures/tvm-ffi01-cpu-x86_64-linux", b ? b : ".");
    char *lib = hk__asprintf("%s/_hkfixture_cpu_0000001.so", g_fixture);
    if (!hk__path_exists(lib)) {
        fprintf(stderr, "the tvm-ffi fixture %s was not built (needs a C++ compiler and "
                "apache-tvm-ffi: run scripts/setup.sh and re-configure)\n", lib);
        return 1;
    }
    free(lib);
    test_load_and_list();
    test_calls();
    test_tensor_fields();
    test_call_errors();
    test_registry();
    test_kinds_and_bad_variants();
    free(g_fixture);
    return hk_test_finish();
}
