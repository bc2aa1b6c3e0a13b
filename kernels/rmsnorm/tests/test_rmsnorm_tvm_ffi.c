/* The staged tvm-ffi CPU variant called the way a C program (hubkern) calls it: dlopen
 * libtvm_ffi with RTLD_GLOBAL, dlopen <variant>/<id>.so, dlsym __tvm_ffi_rms_norm and
 * __tvm_ffi_fused_add_rms_norm, pass DLTensor* arguments (type index kTVMFFIDLTensorPtr) and a
 * float eps. Checks results against a float64 reference (every element, poisoned outputs,
 * misaligned bases through data and byte_offset, 1-D/2-D/3-D shapes) and that every invalid call
 * returns -1 with a raised error whose kind and message say what is wrong.
 *
 * usage: test_rmsnorm_tvm_ffi <path/to/libtvm_ffi.so> <variant dir> */
#include "rmsnorm_check.h"
#include "support.h"

#include <dirent.h>
#include <dlfcn.h>
#include <tvm/ffi/c_api.h>

typedef int (*safe_call_fn)(void *self, const TVMFFIAny *args, int32_t num_args,
                            TVMFFIAny *result);
static void (*p_move_from_raised)(TVMFFIObjectHandle *);
static int (*p_dec_ref)(TVMFFIObjectHandle);
static safe_call_fn f_rms_norm, f_fused;

static char last_kind[64], last_msg[1024];

static DLDataType dl_dtype(rmsnorm_dtype dt) {
    DLDataType t = {kDLFloat, 32, 1};
    if (dt == RMSNORM_F16) t.bits = 16;
    if (dt == RMSNORM_BF16) t.code = kDLBfloat, t.bits = 16;
    return t;
}

static DLTensor tensor(void *data, rmsnorm_dtype dt, int ndim, int64_t *shape) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = ndim;
    t.dtype = dl_dtype(dt);
    t.shape = shape;
    return t;
}

static TVMFFIAny any_tensor(DLTensor *t) {
    TVMFFIAny a;
    memset(&a, 0, sizeof a);
    a.type_index = kTVMFFIDLTensorPtr;
    a.v_ptr = t;
    return a;
}

static TVMFFIAny any_float(double v) {
    TVMFFIAny a;
    memset(&a, 0, sizeof a);
    a.type_index = kTVMFFIFloat;
    a.v_float64 = v;
    return a;
}

/* Call f with n args; on error, copy the raised error's kind and message and free it. */
static int call(safe_call_fn f, const TVMFFIAny *args, int n) {
    TVMFFIAny result;
    memset(&result, 0, sizeof result);
    result.type_index = kTVMFFINone;
    last_kind[0] = last_msg[0] = '\0';
    int rc = f(NULL, args, n, &result);
    if (rc != 0) {
        TVMFFIObjectHandle err = NULL;
        p_move_from_raised(&err);
        if (err) {
            TVMFFIErrorCell *cell = (TVMFFIErrorCell *)((char *)err + sizeof(TVMFFIObject));
            snprintf(last_kind, sizeof last_kind, "%.*s", (int)cell->kind.size, cell->kind.data);
            snprintf(last_msg, sizeof last_msg, "%.*s", (int)cell->message.size,
                     cell->message.data);
            p_dec_ref(err);
        }
    } else {
        CHECK(result.type_index == kTVMFFINone); /* both ops return nothing */
    }
    return rc;
}

static int call4(safe_call_fn f, DLTensor *a, DLTensor *b, DLTensor *w, double eps) {
    TVMFFIAny args[4] = {any_tensor(a), any_tensor(b), any_tensor(w), any_float(eps)};
    return call(f, args, 4);
}

#define CHECK_RAISES(expr, kind, needle)                                                      \
    do {                                                                                      \
        int rc__ = (expr);                                                                    \
        CHECK(rc__ == -1);                                                                    \
        CHECK_STR(last_kind, kind);                                                           \
        if (!strstr(last_msg, needle)) {                                                      \
            fprintf(stderr, "message \"%s\" lacks \"%s\"\n", last_msg, needle);              \
            CHECK(strstr(last_msg, needle) != NULL);                                          \
        }                                                                                     \
    } while (0)

static void run_valid(int ndim, const int64_t *dims, rmsnorm_dtype dt, rmsnorm_dtype wdt,
                      int mis_data, int mis_offset, double *max_rel) {
    int64_t shape[3], rows = 1, hidden = dims[ndim - 1];
    for (int i = 0; i < ndim; i++) shape[i] = dims[i], rows *= i < ndim - 1 ? dims[i] : 1;
    int64_t wshape[1] = {hidden};
    size_t es = (size_t)rmsnorm_dtype_size(dt), n = (size_t)(rows * hidden);
    size_t pad = 64;
    char *xb = malloc(n * es + pad), *ob = malloc(n * es + pad), *rb = malloc(n * es + pad);
    char *x0 = malloc(n * es), *wb = malloc((size_t)hidden * 4 + pad);
    if (!xb || !ob || !rb || !x0 || !wb) exit(1);
    size_t off = (size_t)(mis_data + mis_offset) * es; /* bytes past the (aligned) malloc base */
    char *x = xb + off, *out = ob + off, *res = rb + off;
    char *w = wb + (size_t)mis_data * (size_t)rmsnorm_dtype_size(wdt);
    rc_fill_normal(x, dt, (int64_t)n, 1.0, 0.0);
    rc_fill_normal(w, wdt, hidden, 0.5, 1.0);
    memset(out, 0xff, n * es);
    /* misalign through `data` or through `byte_offset` (DLPack allows both) */
    DLTensor tx = tensor(xb + (size_t)mis_data * es, dt, ndim, shape);
    DLTensor to = tensor(ob + (size_t)mis_data * es, dt, ndim, shape);
    DLTensor tr = tensor(rb + (size_t)mis_data * es, dt, ndim, shape);
    tx.byte_offset = to.byte_offset = tr.byte_offset = (uint64_t)mis_offset * es;
    DLTensor tw = tensor(w, wdt, 1, wshape);
    char what[128];
    snprintf(what, sizeof what, "tvm-ffi rms_norm ndim %d hidden %lld %s/%s", ndim,
             (long long)hidden, rc_dtype_name(dt), rc_dtype_name(wdt));
    CHECK(call4(f_rms_norm, &to, &tx, &tw, 1e-5) == 0);
    CHECK(rc_check_norm(what, out, x, w, dt, wdt, rows, hidden, 1e-5, max_rel) == 0);
    /* fused: residual += x; x = norm(residual) * w */
    rc_fill_normal(res, dt, (int64_t)n, 1.0, 0.5);
    memcpy(x0, x, n * es);
    memcpy(out, res, n * es); /* out keeps the old residual */
    CHECK(call4(f_fused, &tx, &tr, &tw, 1e-5) == 0);
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = rc_get(x0, dt, (int64_t)i) + rc_get(out, dt, (int64_t)i);
        double got = rc_get(res, dt, (int64_t)i);
        if (!(fabs(got - want) <= 1e-4 + rc_rtol(dt) * fabs(want))) bad++;
    }
    CHECK(bad == 0);
    snprintf(what, sizeof what, "tvm-ffi fused ndim %d hidden %lld %s/%s", ndim,
             (long long)hidden, rc_dtype_name(dt), rc_dtype_name(wdt));
    CHECK(rc_check_norm(what, x, res, w, dt, wdt, rows, hidden, 1e-5, max_rel) == 0);
    free(xb), free(ob), free(rb), free(x0), free(wb);
}

static void test_valid(void) {
    static const int64_t d1[] = {4097}, d2a[] = {3, 128}, d2b[] = {65536, 8}, d3[] = {2, 5, 1000},
                         d2c[] = {1, 1}, d2d[] = {7, 4096};
    const int64_t *dims[] = {d1, d2a, d2b, d3, d2c, d2d};
    const int ndims[] = {1, 2, 2, 3, 2, 2};
    const rmsnorm_dtype pairs[][2] = {{RMSNORM_BF16, RMSNORM_BF16}, {RMSNORM_BF16, RMSNORM_F32},
                                      {RMSNORM_F16, RMSNORM_F16},   {RMSNORM_F32, RMSNORM_F32}};
    for (size_t p = 0; p < 4; p++) {
        double max_rel = 0.0;
        for (size_t s = 0; s < 6; s++)
            for (int m = 0; m < 3; m++)
                run_valid(ndims[s], dims[s], pairs[p][0], pairs[p][1], m == 1, m == 2, &max_rel);
        printf("tvm-ffi %-8s weight %-8s max relative error %.3g\n", rc_dtype_name(pairs[p][0]),
               rc_dtype_name(pairs[p][1]), max_rel);
        CHECK(max_rel < rc_rtol(pairs[p][0]));
    }
}

static void test_invalid(void) {
    uint16_t xb[64], ob[64], wb[8];
    float xf[64], wf32[8];
    int32_t wi[8];
    memset(xb, 0, sizeof xb), memset(ob, 0, sizeof ob), memset(wb, 0, sizeof wb);
    memset(xf, 0, sizeof xf), memset(wf32, 0, sizeof wf32), memset(wi, 0, sizeof wi);
    int64_t s2[2] = {8, 8}, s2b[2] = {4, 16}, s1[1] = {8}, s1b[1] = {7}, strides[2] = {1, 8};
    DLTensor x = tensor(xb, RMSNORM_BF16, 2, s2), out = tensor(ob, RMSNORM_BF16, 2, s2);
    DLTensor w = tensor(wb, RMSNORM_BF16, 1, s1);

    DLTensor of16 = tensor(ob, RMSNORM_F16, 2, s2);
    CHECK_RAISES(call4(f_rms_norm, &of16, &x, &w, 1e-6), "TypeError", "dtype mismatch");
    DLTensor xf32 = tensor(xf, RMSNORM_F32, 2, s2), wf16 = tensor(wb, RMSNORM_F16, 1, s1);
    CHECK_RAISES(call4(f_rms_norm, &xf32, &xf32, &wf16, 1e-6), "TypeError", "float32");
    DLTensor wint = tensor(wi, RMSNORM_F32, 1, s1);
    wint.dtype.code = kDLInt;
    CHECK_RAISES(call4(f_rms_norm, &out, &x, &wint, 1e-6), "TypeError", "int32");
    DLTensor xint = x;
    xint.dtype.code = kDLInt;
    CHECK_RAISES(call4(f_rms_norm, &xint, &xint, &w, 1e-6), "TypeError", "supported: float32");
    DLTensor wshort = tensor(wb, RMSNORM_BF16, 1, s1b);
    CHECK_RAISES(call4(f_rms_norm, &out, &x, &wshort, 1e-6), "ValueError", "expected [8]");
    DLTensor oshape = tensor(ob, RMSNORM_BF16, 2, s2b);
    CHECK_RAISES(call4(f_rms_norm, &oshape, &x, &w, 1e-6), "ValueError", "shape mismatch");
    DLTensor xt = x;
    xt.strides = strides; /* a transposed view */
    CHECK_RAISES(call4(f_rms_norm, &out, &xt, &w, 1e-6), "ValueError", "not contiguous");
    DLTensor xcuda = x;
    xcuda.device.device_type = kDLCUDA;
    CHECK_RAISES(call4(f_rms_norm, &out, &xcuda, &w, 1e-6), "ValueError", "cuda:0");
    DLTensor wdev = w;
    wdev.device.device_id = 1;
    CHECK_RAISES(call4(f_rms_norm, &out, &x, &wdev, 1e-6), "ValueError", "different devices");
    CHECK_RAISES(call4(f_rms_norm, &out, &x, &w, -1.0), "ValueError", "eps");
    CHECK_RAISES(call4(f_fused, &x, &x, &w, 1e-6), "ValueError", "same memory");
    DLTensor x0d = tensor(xb, RMSNORM_BF16, 0, NULL);
    CHECK_RAISES(call4(f_rms_norm, &x0d, &x0d, &w, 1e-6), "ValueError", "0-d");
    DLTensor xnull = x;
    xnull.data = NULL;
    CHECK_RAISES(call4(f_rms_norm, &out, &xnull, &w, 1e-6), "ValueError", "NULL");
    /* wrong argument count and type are caught by tvm-ffi's typed-function unpacking */
    TVMFFIAny three[3] = {any_tensor(&out), any_tensor(&x), any_tensor(&w)};
    CHECK(call(f_rms_norm, three, 3) == -1);
    CHECK(strstr(last_msg, "4") != NULL);
    TVMFFIAny bad[4] = {any_tensor(&out), any_float(1.0), any_tensor(&w), any_float(1e-6)};
    CHECK(call(f_rms_norm, bad, 4) == -1);
    CHECK(last_msg[0] != '\0');
    /* after all that, a valid call still works: out = x normalised (x all zero -> 0) */
    memset(ob, 0xff, sizeof ob);
    CHECK(call4(f_rms_norm, &out, &x, &w, 1e-6) == 0);
    for (int i = 0; i < 64; i++) CHECK(ob[i] == 0);
    /* an empty tensor is a no-op */
    int64_t s0[2] = {0, 8};
    DLTensor xe = tensor(xb, RMSNORM_BF16, 2, s0);
    CHECK(call4(f_rms_norm, &xe, &xe, &w, 1e-6) == 0);
}

static char *find_library(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    struct dirent *e;
    char *found = NULL;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '_' && len > 3 && strcmp(e->d_name + len - 3, ".so") == 0) {
            found = malloc(strlen(dir) + len + 2);
            if (found) sprintf(found, "%s/%s", dir, e->d_name);
            break;
        }
    }
    closedir(d);
    return found;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s <libtvm_ffi.so> <variant dir>\n", argv[0]);
        return 2;
    }
    void *rt = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!rt) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    char *lib = find_library(argv[2]);
    CHECK(lib != NULL);
    if (!lib) return hk_test_finish();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
    CHECK(h != NULL);
    free(lib);
    if (!h) return hk_test_finish();
    *(void **)&p_move_from_raised = dlsym(rt, "TVMFFIErrorMoveFromRaised");
    *(void **)&p_dec_ref = dlsym(rt, "TVMFFIObjectDecRef");
    *(void **)&f_rms_norm = dlsym(h, "__tvm_ffi_rms_norm");
    *(void **)&f_fused = dlsym(h, "__tvm_ffi_fused_add_rms_norm");
    CHECK(p_move_from_raised && p_dec_ref && f_rms_norm && f_fused);
    if (!(p_move_from_raised && p_dec_ref && f_rms_norm && f_fused)) return hk_test_finish();
    rc_seed(0x7f7f0000u ^ (uint64_t)(uintptr_t)&argc);
    test_valid();
    test_invalid();
    return hk_test_finish();
}
