/* The tvm-ffi runtime, bound at run time with dlopen (libhubkern never links libtvm_ffi), and the
 * call API. ABI facts checked against the apache-tvm-ffi 0.1.15.post2 wheel headers
 * (include/tvm/ffi/c_api.h, include/tvm/ffi/extra/c_env_api.h); see docs/loading.md. */
#define _GNU_SOURCE 1 /* dladdr */
#include "kernel/kernel_internal.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TVMFFIAny: int32 type index, 4 bytes (zero padding / small-string length), 8-byte payload. */
typedef struct tvm_any {
    int32_t type_index;
    uint32_t small_len;
    union {
        int64_t i;
        double f;
        void *p;
        const char *s;
        char bytes[8];
    } v;
} tvm_any;
_Static_assert(sizeof(tvm_any) == 16, "TVMFFIAny is 16 bytes");
_Static_assert(sizeof(hk_dltensor) == 48, "hk_dltensor mirrors DLTensor (48 bytes)");

/* TVMFFIObject header: u64 combined ref count, i32 type index, u32 padding, 8-byte deleter. The
 * payload of Str/Bytes (TVMFFIByteArray), Error (TVMFFIErrorCell) and Tensor (DLTensor) objects
 * starts right after it. */
#define TVM_OBJECT_HEADER 24
typedef struct tvm_bytes {
    const char *data;
    size_t size;
} tvm_bytes;
typedef struct tvm_error_cell {
    tvm_bytes kind;
    tvm_bytes message;
    tvm_bytes backtrace;
} tvm_error_cell;

enum {
    TVM_NONE = 0, TVM_INT = 1, TVM_BOOL = 2, TVM_FLOAT = 3, TVM_OPAQUE_PTR = 4,
    TVM_DLTENSOR_PTR = 7, TVM_RAW_STR = 8, TVM_SMALL_STR = 11, TVM_SMALL_BYTES = 12,
    TVM_STATIC_OBJECT_BEGIN = 64, TVM_STR = 65, TVM_BYTES = 66, TVM_ERROR = 67, TVM_FUNCTION = 68, TVM_TENSOR = 70
};

typedef struct tvm_version {
    uint32_t major, minor, patch;
} tvm_version;

typedef struct tvm_runtime {
    void *handle;
    char path[PATH_MAX];
    void (*error_move_from_raised)(void **out);
    int (*object_dec_ref)(void *obj);
    int (*env_set_stream)(int32_t, int32_t, void *, void **);
    void (*get_version)(tvm_version *);
    /* TVMFFIFunctionCreate(self, safe_call, deleter, out): wraps a function passed as an argument */
    int (*function_create)(void *, void *, void (*)(void *), void **);
    tvm_version version;
} tvm_runtime;

static pthread_mutex_t g_rt_lock = PTHREAD_MUTEX_INITIALIZER;
static tvm_runtime g_rt;
static volatile int g_rt_ready; /* set under the lock once every pointer is filled */

static int bind_runtime(void *h, const char *path) {
    tvm_runtime rt;
    memset(&rt, 0, sizeof rt);
    rt.handle = h;
    snprintf(rt.path, sizeof rt.path, "%s", path);
    *(void **)&rt.error_move_from_raised = dlsym(h, "TVMFFIErrorMoveFromRaised");
    *(void **)&rt.object_dec_ref = dlsym(h, "TVMFFIObjectDecRef");
    *(void **)&rt.env_set_stream = dlsym(h, "TVMFFIEnvSetStream");
    *(void **)&rt.get_version = dlsym(h, "TVMFFIGetVersion");
    *(void **)&rt.function_create = dlsym(h, "TVMFFIFunctionCreate"); /* only HK_VALUE_FUNCTION needs it */
    if (!rt.error_move_from_raised || !rt.object_dec_ref || !rt.env_set_stream)
        return hk__fail(HK_ERR_RUNTIME_MISSING,
                       "%s does not export the tvm-ffi C API (TVMFFIErrorMoveFromRaised, "
                       "TVMFFIObjectDecRef, TVMFFIEnvSetStream): it is not libtvm_ffi",
                       path);
    if (rt.get_version) rt.get_version(&rt.version);
    g_rt = rt;
    __atomic_store_n(&g_rt_ready, 1, __ATOMIC_RELEASE);
    hk__log(HK_LOG_INFO, "tvm-ffi runtime %u.%u.%u from %s", rt.version.major, rt.version.minor,
           rt.version.patch, path);
    return HK_OK;
}

static int try_open(const char *path, hk_strbuf *tried) {
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *e = dlerror();
        hk__sb_printf(tried, "\n  %s: %s", path, e ? e : "cannot load");
        return HK_ERR_RUNTIME_MISSING;
    }
    int rc = bind_runtime(h, path);
    if (rc) hk__sb_printf(tried, "\n  %s: %s", path, hk_last_error());
    return rc;
}

/* Python environments to look into for tvm_ffi/lib/libtvm_ffi.so. */
static int try_python_packages(hk_strbuf *tried) {
    hk_strbuf prefixes;
    hk__sb_init(&prefixes);
    const char *venv = hk__getenv("VIRTUAL_ENV");
    const char *conda = hk__getenv("CONDA_PREFIX");
    if (venv) hk__sb_printf(&prefixes, "%s\n", venv);
    if (conda) hk__sb_printf(&prefixes, "%s\n", conda);
    const char *path = hk__getenv("PATH");
    if (path) {
        char *copy = hk__strdup(path), *save = NULL;
        for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
            if (hk__str_ends_with(d, "/bin") && strlen(d) > 4)
                hk__sb_printf(&prefixes, "%.*s\n", (int)(strlen(d) - 4), d);
        free(copy);
    }
    const char *pyenv = hk__getenv("PYENV_ROOT");
    const char *home = hk__getenv("HOME");
    if (pyenv) hk__sb_printf(&prefixes, "%s/versions/*\n", pyenv);
    if (home) hk__sb_printf(&prefixes, "%s/.pyenv/versions/*\n%s/.local\n", home, home);
    hk__sb_append(&prefixes, "/usr/local\n/usr\n");
    if (prefixes.oom) {
        hk__sb_free(&prefixes);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    int rc = HK_ERR_RUNTIME_MISSING;
    char *save = NULL;
    for (char *p = strtok_r(prefixes.data, "\n", &save); p && rc; p = strtok_r(NULL, "\n", &save)) {
        static const char *const pats[] = {"/lib/python3*/site-packages/tvm_ffi/lib/libtvm_ffi.so",
                                           "/lib/python3*/dist-packages/tvm_ffi/lib/libtvm_ffi.so"};
        for (size_t k = 0; k < HK_ARRAY_LEN(pats) && rc; k++) {
            char pattern[PATH_MAX];
            snprintf(pattern, sizeof pattern, "%s%s", p, pats[k]);
            glob_t g;
            if (glob(pattern, 0, NULL, &g) == 0) {
                for (size_t i = g.gl_pathc; i-- > 0 && rc;) /* newest Python first */
                    rc = try_open(g.gl_pathv[i], tried);
            }
            globfree(&g);
        }
    }
    hk__sb_free(&prefixes);
    return rc;
}

int hk__tvm_ffi_ensure(const char *explicit_path, const char *hint) {
    if (__atomic_load_n(&g_rt_ready, __ATOMIC_ACQUIRE)) {
        if (explicit_path && strcmp(explicit_path, g_rt.path) != 0)
            hk__log(HK_LOG_WARN, "tvm-ffi runtime already loaded from %s; ignoring %s", g_rt.path,
                   explicit_path);
        return HK_OK;
    }
    pthread_mutex_lock(&g_rt_lock);
    int rc = HK_OK;
    if (g_rt_ready) goto out;
    hk_strbuf tried;
    hk__sb_init(&tried);
    const char *env1 = hk__getenv("HUBKERN_TVM_FFI_LIB");
    const char *env2 = hk__getenv("TVM_FFI_LIB");
    const char *chosen = explicit_path ? explicit_path : env1 ? env1 : env2;
    if (chosen) {
        rc = try_open(chosen, &tried);
        if (rc)
            rc = hk__fail(HK_ERR_RUNTIME_MISSING, "cannot load the tvm-ffi runtime named by %s:%s",
                         explicit_path ? "the caller" : env1 ? "HUBKERN_TVM_FFI_LIB" : "TVM_FFI_LIB",
                         tried.data ? tried.data : "");
        hk__sb_free(&tried);
        goto out;
    }
    /* already in the process (a host that linked it, or Python's tvm_ffi) */
    void *sym = dlsym(RTLD_DEFAULT, "TVMFFIErrorMoveFromRaised");
    Dl_info info;
    if (sym && dladdr(sym, &info) && info.dli_fname) {
        rc = try_open(info.dli_fname, &tried);
        if (rc == HK_OK) goto done;
    }
    if (hint) {
        rc = try_open(hint, &tried);
        if (rc == HK_OK) goto done;
    }
    rc = try_python_packages(&tried);
    if (rc == HK_OK) goto done;
    rc = try_open("libtvm_ffi.so", &tried);
    if (rc == HK_OK) goto done;
    rc = hk__fail(HK_ERR_RUNTIME_MISSING,
                 "libtvm_ffi (the tvm-ffi runtime) was not found; install it (pip install "
                 "apache-tvm-ffi==0.1.*) or point HUBKERN_TVM_FFI_LIB at libtvm_ffi.so. Tried:%s",
                 tried.data ? tried.data : " nothing");
done:
    hk__sb_free(&tried);
out:
    pthread_mutex_unlock(&g_rt_lock);
    return rc;
}

HK_API int hk_tvm_ffi_load(const char **out_path, const char *explicit_path) {
    int rc = hk__tvm_ffi_ensure(explicit_path, NULL);
    if (out_path) *out_path = rc == HK_OK ? g_rt.path : NULL;
    return rc;
}

HK_API int hk_tvm_ffi_version(int *major, int *minor, int *patch) {
    if (!__atomic_load_n(&g_rt_ready, __ATOMIC_ACQUIRE))
        return hk__fail(HK_ERR_RUNTIME_MISSING, "the tvm-ffi runtime is not loaded yet");
    if (major) *major = (int)g_rt.version.major;
    if (minor) *minor = (int)g_rt.version.minor;
    if (patch) *patch = (int)g_rt.version.patch;
    return HK_OK;
}

HK_API int hk_set_stream(void **previous, int32_t device_type, int32_t device_id, void *stream) {
    if (!__atomic_load_n(&g_rt_ready, __ATOMIC_ACQUIRE))
        return hk__fail(HK_ERR_RUNTIME_MISSING,
                       "the tvm-ffi runtime is not loaded: load a tvm-ffi kernel (or call "
                       "hk_tvm_ffi_load) before setting a stream");
    void *old = NULL;
    if (g_rt.env_set_stream(device_type, device_id, stream, &old) != 0) {
        void *err = NULL;
        g_rt.error_move_from_raised(&err);
        if (err) g_rt.object_dec_ref(err);
        return hk__fail(HK_ERR_KERNEL, "TVMFFIEnvSetStream(%d, %d) failed", device_type, device_id);
    }
    if (previous) *previous = old;
    return HK_OK;
}

/* ---- calls ---------------------------------------------------------------------------------- */

struct hk_function {
    const hk_kernel *kernel;
    const char *name;
    hk_tvm_safe_call fn;
};

int hk__function_make(hk_function **out, const hk_kernel *k, const char *name, void *sym) {
    hk_function *f = calloc(1, sizeof *f);
    if (!f) return hk__fail(HK_ERR_NOMEM, "out of memory");
    f->kernel = k;
    f->name = name;
    *(void **)&f->fn = sym;
    *out = f;
    return HK_OK;
}

static int raised_error(const char *fname, int call_rc) {
    void *err = NULL;
    g_rt.error_move_from_raised(&err);
    if (!err)
        return hk__fail(HK_ERR_KERNEL, "%s failed (return code %d) without raising an error", fname,
                       call_rc);
    int32_t tindex;
    memcpy(&tindex, (char *)err + 8, sizeof tindex);
    int rc;
    if (tindex == TVM_ERROR) {
        const tvm_error_cell *cell = (const tvm_error_cell *)((char *)err + TVM_OBJECT_HEADER);
        int kl = (int)(cell->kind.size > 200 ? 200 : cell->kind.size);
        int ml = (int)(cell->message.size > 3500 ? 3500 : cell->message.size);
        bool type_error = cell->kind.size == 9 && memcmp(cell->kind.data, "TypeError", 9) == 0;
        rc = hk__fail(type_error ? HK_ERR_TYPE : HK_ERR_KERNEL, "%s raised %.*s: %.*s", fname, kl,
                     cell->kind.data ? cell->kind.data : "", ml,
                     cell->message.data ? cell->message.data : "");
    } else {
        rc = hk__fail(HK_ERR_KERNEL, "%s failed and raised an object of type index %d", fname,
                     (int)tindex);
    }
    g_rt.object_dec_ref(err);
    return rc;
}

HK_API void hk_value_clear(hk_value *value) {
    if (!value) return;
    if (value->owner_) {
        if (value->kind == HK_VALUE_STRING) free(value->owner_);
        else if (g_rt_ready) g_rt.object_dec_ref(value->owner_);
    }
    *value = hk_value_none();
}

static int convert_result(hk_value *out, tvm_any *r, const char *fname) {
    hk_value v = hk_value_none();
    switch (r->type_index) {
    case TVM_NONE: break;
    case TVM_INT: v = hk_value_int(r->v.i); break;
    case TVM_BOOL: v = hk_value_bool(r->v.i != 0); break;
    case TVM_FLOAT: v = hk_value_float(r->v.f); break;
    case TVM_DLTENSOR_PTR: v = hk_value_tensor((hk_dltensor *)r->v.p); break;
    case TVM_SMALL_STR:
    case TVM_SMALL_BYTES: {
        char *s = hk__strndup(r->v.bytes, r->small_len > 8 ? 8 : r->small_len);
        if (!s) return hk__fail(HK_ERR_NOMEM, "out of memory");
        v = hk_value_string(s);
        v.owner_ = s;
        break;
    }
    case TVM_STR:
    case TVM_BYTES: {
        const tvm_bytes *b = (const tvm_bytes *)((char *)r->v.p + TVM_OBJECT_HEADER);
        char *s = hk__strndup(b->data, b->size);
        g_rt.object_dec_ref(r->v.p);
        if (!s) return hk__fail(HK_ERR_NOMEM, "out of memory");
        v = hk_value_string(s);
        v.owner_ = s;
        break;
    }
    case TVM_TENSOR:
        v = hk_value_tensor((hk_dltensor *)((char *)r->v.p + TVM_OBJECT_HEADER));
        v.owner_ = r->v.p;
        break;
    default:
        if (r->type_index >= TVM_STATIC_OBJECT_BEGIN) g_rt.object_dec_ref(r->v.p);
        return hk__fail(HK_ERR_UNSUPPORTED,
                       "%s returned a value of tvm-ffi type index %d, which hubkern cannot "
                       "represent (it handles none, int, float, bool, string and tensor)",
                       fname, (int)r->type_index);
    }
    if (out) *out = v;
    else hk_value_clear(&v);
    return HK_OK;
}

/* Compact strides for the tensors passed without them. hubkern documents strides == NULL as
 * "compact row-major" (DLPack's meaning), but tvm-ffi's TensorView::stride(i) reads strides[i]
 * unchecked, so a third-party kernel segfaults on such a tensor (issue 24): the callee gets a copy
 * of the DLTensor whose strides point into *buf, which lives until the call returns. */
typedef struct compact_args {
    hk_dltensor tensors[8];
    int64_t strides[64];
    hk_dltensor *heap_tensors;
    int64_t *heap_strides;
} compact_args;

static int compact_strides(compact_args *buf, tvm_any *a, const hk_value *args, size_t num_args, const char *fname) {
    size_t nt = 0, ns = 0;
    for (size_t i = 0; i < num_args; i++) {
        const hk_dltensor *t = args[i].kind == HK_VALUE_TENSOR ? args[i].v.tensor : NULL;
        if (!t || t->strides || t->ndim == 0) continue;
        if (t->ndim < 0 || !t->shape)
            return hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu: a tensor of ndim %d needs a shape", fname, i,
                            (int)t->ndim);
        nt++;
        ns += (size_t)t->ndim;
    }
    if (nt == 0) return HK_OK;
    hk_dltensor *tv = buf->tensors;
    int64_t *sv = buf->strides;
    if (nt > 8 || ns > 64) {
        if (!(tv = buf->heap_tensors = calloc(nt, sizeof *tv)) || !(sv = buf->heap_strides = calloc(ns, sizeof *sv)))
            return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < num_args; i++) {
        const hk_dltensor *t = args[i].kind == HK_VALUE_TENSOR ? args[i].v.tensor : NULL;
        if (!t || t->strides || t->ndim == 0) continue;
        *tv = *t;
        tv->strides = sv;
        int64_t step = 1;
        for (int32_t d = t->ndim - 1; d >= 0; d--) {
            sv[d] = step;
            /* as torch's contiguous strides: sizes 0 and 1 do not scale the outer strides */
            if (t->shape[d] > 1 && __builtin_mul_overflow(step, t->shape[d], &step))
                return hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu: the tensor's shape overflows 64 bits", fname, i);
        }
        a[i].v.p = tv++;
        sv += t->ndim;
    }
    return HK_OK;
}

HK_API int hk_function_call(hk_value *out_result, const hk_function *fn, const hk_value *args,
                            size_t num_args) {
    if (out_result) *out_result = hk_value_none();
    if (!fn) return hk__fail(HK_ERR_INVALID_ARG, "hk_function_call: NULL function");
    if (num_args && !args) return hk__fail(HK_ERR_INVALID_ARG, "hk_function_call: NULL args");
    if (num_args > 1024) return hk__fail(HK_ERR_INVALID_ARG, "too many arguments (%zu)", num_args);
    if (!g_rt_ready) return hk__fail(HK_ERR_RUNTIME_MISSING, "the tvm-ffi runtime is not loaded");
    tvm_any stack[16];
    tvm_any *a = num_args <= 16 ? stack : calloc(num_args, sizeof *a);
    if (!a) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (size_t i = 0; i < num_args && rc == HK_OK; i++) {
        memset(&a[i], 0, sizeof a[i]);
        switch (args[i].kind) {
        case HK_VALUE_NONE: a[i].type_index = TVM_NONE; break;
        case HK_VALUE_INT: a[i].type_index = TVM_INT; a[i].v.i = args[i].v.i; break;
        case HK_VALUE_BOOL: a[i].type_index = TVM_BOOL; a[i].v.i = args[i].v.b ? 1 : 0; break;
        case HK_VALUE_FLOAT: a[i].type_index = TVM_FLOAT; a[i].v.f = args[i].v.f; break;
        case HK_VALUE_TENSOR:
            if (!args[i].v.tensor) {
                rc = hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu is a NULL tensor", fn->name, i);
                break;
            }
            a[i].type_index = TVM_DLTENSOR_PTR;
            a[i].v.p = args[i].v.tensor;
            break;
        case HK_VALUE_STRING:
            if (!args[i].v.str) {
                rc = hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu is a NULL string", fn->name, i);
                break;
            }
            a[i].type_index = TVM_RAW_STR;
            a[i].v.s = args[i].v.str;
            break;
        case HK_VALUE_FUNCTION:
            /* a Function object around the other kernel's exported safe call (no self, nothing to
             * free but the object): the callee may keep it, so it is reference counted */
            if (!args[i].v.fn) {
                rc = hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu is a NULL function", fn->name, i);
            } else if (!g_rt.function_create) {
                rc = hk__fail(HK_ERR_UNSUPPORTED, "%s: this tvm-ffi runtime has no TVMFFIFunctionCreate", fn->name);
            } else {
                void *safe_call;
                memcpy(&safe_call, &args[i].v.fn->fn, sizeof safe_call);
                if (g_rt.function_create(NULL, safe_call, NULL, &a[i].v.p) != 0 || !a[i].v.p) {
                    a[i].v.p = NULL;
                    rc = raised_error("TVMFFIFunctionCreate", -1);
                } else {
                    a[i].type_index = TVM_FUNCTION;
                }
            }
            break;
        default:
            rc = hk__fail(HK_ERR_INVALID_ARG, "%s: argument %zu has unknown kind %d", fn->name, i,
                         (int)args[i].kind);
        }
    }
    compact_args compact;
    compact.heap_tensors = NULL;
    compact.heap_strides = NULL;
    if (rc == HK_OK) rc = compact_strides(&compact, a, args, num_args, fn->name);
    if (rc == HK_OK) {
        tvm_any result;
        memset(&result, 0, sizeof result);
        result.type_index = TVM_NONE; /* required by the safe-call convention */
        int crc = fn->fn(NULL, a, (int32_t)num_args, &result);
        /* a kernel returning an argument as a DLTensor* returns our copy: hand back the caller's */
        for (size_t i = 0; crc == 0 && result.type_index == TVM_DLTENSOR_PTR && i < num_args; i++)
            if (args[i].kind == HK_VALUE_TENSOR && result.v.p == a[i].v.p) result.v.p = args[i].v.tensor;
        if (crc != 0) rc = raised_error(fn->name, crc);
        else rc = convert_result(out_result, &result, fn->name);
    }
    free(compact.heap_tensors);
    free(compact.heap_strides);
    for (size_t i = 0; i < num_args; i++) /* the Function objects made for the call */
        if (a[i].type_index == TVM_FUNCTION && a[i].v.p) g_rt.object_dec_ref(a[i].v.p);
    if (a != stack) free(a);
    return rc;
}

