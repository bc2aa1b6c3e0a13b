/* Variant resolution: filter and rank build variants for a machine, with the full decision trace
 * (kernel-hub-format.md §4-§5; kernels 0.17 variants.py `_check_variants` / `_sort_variants`). */
#include "env/env_internal.h"
#include "variant/variant_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct decision {
    char *name;
    hk_variant v;
    bool parsed;
    bool accepted;
    char *reason;
    /* sort key (lower is better), §5.2 hubkern tie-break */
    int key[8];
} decision;

struct hk_resolution {
    decision *d;
    size_t n;
    char *backend_variant; /* "cu130", or NULL */
    hk_env *env;           /* snapshot of the system the decision used */
};

/* The system as the rules see it. */
typedef struct sysdesc {
    const char *os, *cpu;
    bool has_torch;
    uint32_t t_major, t_minor;
    int cxx11; /* -1 unknown */
    bool has_tvm;
    uint32_t f_major, f_minor;
    const char *macos;
    bool macos_ok; /* >= 26.0 */
    bool ft_unsupported;
    bool has_python;
    hk_backend_kind backend;
    bool backend_has_version;
    uint32_t b_major, b_minor;
    char backend_variant[48]; /* "cu130", or the kind name when its version is unknown */
    const char *backend_name; /* "cuda" */
} sysdesc;

static const char *py_bool(int tri) { return tri < 0 ? "None" : tri ? "True" : "False"; }
static const char *or_none(const char *s) { return s ? s : "None"; }

static hk_backend_kind kind_from_name(const char *name) {
    static const char *const names[] = {"none", "cuda", "rocm", "xpu", "cann",
                                        "cpu", "metal", "neuron", "tpu"};
    for (size_t i = 1; i < HK_ARRAY_LEN(names); i++)
        if (name && strcmp(name, names[i]) == 0) return (hk_backend_kind)i;
    return HK_BACKEND_CPU;
}

static bool is_versioned(hk_backend_kind k) {
    return k == HK_BACKEND_CUDA || k == HK_BACKEND_ROCM || k == HK_BACKEND_XPU || k == HK_BACKEND_CANN;
}

static void variant_backend_str(char *out, size_t cap, hk_backend_kind k, bool has_ver,
                                uint32_t major, uint32_t minor) {
    static const char *const prefix[] = {"", "cu", "rocm", "xpu", "cann"};
    if (is_versioned(k) && has_ver)
        snprintf(out, cap, "%s%u%u", prefix[k], major, minor);
    else
        snprintf(out, cap, "%s", hk_backend_kind_name(k));
}

static int describe_system(sysdesc *s, const hk_env *env, const char *override) {
    memset(s, 0, sizeof *s);
    s->os = hk_env_os(env);
    s->cpu = hk_env_cpu(env);
    s->has_torch = hk__env_ver2(hk_env_torch_version(env), &s->t_major, &s->t_minor);
    s->cxx11 = hk_env_torch_cxx11_abi(env);
    s->has_tvm = hk__env_ver2(hk_env_tvm_ffi_version(env), &s->f_major, &s->f_minor);
    s->macos = hk_env_macos_version(env);
    uint32_t mmaj = 0, mmin = 0;
    s->macos_ok = hk__env_ver2(s->macos, &mmaj, &mmin) && mmaj >= 26;
    const char *pyv = hk_env_python_version(env);
    s->has_python = pyv != NULL;
    uint32_t pmaj = 0, pmin = 0;
    s->ft_unsupported = hk_env_python_free_threaded(env) == 1 && hk__env_ver2(pyv, &pmaj, &pmin) &&
                        (pmaj < 3 || (pmaj == 3 && pmin < 15));

    const char *detected = hk_env_backend(env);
    if (override && strcmp(override, "cpu") != 0 && strcmp(override, detected) != 0) {
        /* kernels: "Invalid backend 'x', system supported backends: <sorted {cpu, detected}>" */
        if (strcmp(detected, "cpu") == 0)
            return hk__fail(HK_ERR_INVALID_ARG,
                           "Invalid backend '%s', system supported backends: cpu", override);
        bool cpu_first = strcmp("cpu", detected) < 0;
        return hk__fail(HK_ERR_INVALID_ARG, "Invalid backend '%s', system supported backends: %s, %s",
                       override, cpu_first ? "cpu" : detected, cpu_first ? detected : "cpu");
    }
    if (override && strcmp(override, "cpu") == 0) {
        s->backend = HK_BACKEND_CPU;
    } else {
        s->backend = kind_from_name(detected);
        s->backend_has_version = hk__env_ver2(hk_env_backend_version(env), &s->b_major, &s->b_minor);
    }
    s->backend_name = hk_backend_kind_name(s->backend);
    variant_backend_str(s->backend_variant, sizeof s->backend_variant, s->backend,
                        s->backend_has_version, s->b_major, s->b_minor);
    return HK_OK;
}

/* The reason of a rejection whose text could not be allocated: never freed, never shown; the
 * caller fails with HK_ERR_NOMEM (a NULL reason would read as "accepted"). */
static char k_reason_oom[] = "out of memory";
static char *rejected(char *reason) { return reason ? reason : k_reason_oom; }

/* Returns NULL when accepted, else a malloc'd reason (kernels' wording), or k_reason_oom. */
static char *check(const sysdesc *s, const hk_variant *v) {
    if (v->family == HK_FAMILY_NOARCH) {
        const char *sys_name = s->backend == HK_BACKEND_CANN ? "npu" : s->backend_name;
        if (strcmp(v->noarch, sys_name) != 0 && strcmp(v->noarch, "universal") != 0)
            return rejected(hk__asprintf("backend (%s) does not match system backend (%s) and is not universal",
                               v->noarch, sys_name));
        if (!s->has_python)
            return rejected(hk__strdup("noarch variant needs Python, and the environment has no Python "
                             "interpreter (set HUBKERN_PYTHON or python_version)"));
        return NULL;
    }

    if (s->ft_unsupported) return rejected(hk__strdup("arch kernel not supported on free-threaded Python <3.15"));
    if (!s->cpu || strcmp(v->cpu, s->cpu) != 0)
        return rejected(hk__asprintf("CPU (%s) does not match system CPU (%s)", v->cpu, or_none(s->cpu)));
    if (!s->os || strcmp(v->os, s->os) != 0)
        return rejected(hk__asprintf("OS (%s) does not match system OS (%s)", v->os, or_none(s->os)));

    char envv[32];
    if (v->family == HK_FAMILY_TORCH) {
        if (s->has_torch) snprintf(envv, sizeof envv, "%u.%u", s->t_major, s->t_minor);
        if (!s->has_torch || v->fw_major != s->t_major || v->fw_minor != s->t_minor)
            return rejected(hk__asprintf("Torch version (%u.%u) does not match environment Torch version (%s)",
                               v->fw_major, v->fw_minor, s->has_torch ? envv : "None"));
        if (v->cxx11 >= 0 && v->cxx11 != s->cxx11)
            return rejected(hk__asprintf("Torch CXX11 ABI (%s) does not match environment Torch CXX11 ABI (%s)",
                               py_bool(v->cxx11), py_bool(s->cxx11)));
    } else if (v->family == HK_FAMILY_TORCH_STABLE_ABI) {
        if (s->has_torch) snprintf(envv, sizeof envv, "%u.%u", s->t_major, s->t_minor);
        if (!s->has_torch || v->fw_major > s->t_major ||
            (v->fw_major == s->t_major && v->fw_minor > s->t_minor))
            return rejected(hk__asprintf("Torch stable ABI version (%u.%u) is too new for environment Torch "
                               "version (%s)",
                               v->fw_major, v->fw_minor, s->has_torch ? envv : "None"));
    } else if (v->family == HK_FAMILY_TVM_FFI) {
        if (s->has_tvm) snprintf(envv, sizeof envv, "%u.%u", s->f_major, s->f_minor);
        if (!s->has_tvm || v->fw_major != s->f_major || v->fw_minor != s->f_minor)
            return rejected(hk__asprintf("tvm-ffi version (%u.%u) does not match environment tvm-ffi version (%s)",
                               v->fw_major, v->fw_minor, s->has_tvm ? envv : "None"));
    }

    char vb[48];
    variant_backend_str(vb, sizeof vb, v->backend, true, v->backend_major, v->backend_minor);
    if (s->backend == HK_BACKEND_CUDA && v->backend == HK_BACKEND_CUDA) {
        char sysv[32] = "None";
        if (s->backend_has_version) snprintf(sysv, sizeof sysv, "%u.%u", s->b_major, s->b_minor);
        if (!s->backend_has_version || v->backend_major != s->b_major || v->backend_minor > s->b_minor)
            return rejected(hk__asprintf("CUDA version (%u.%u) is not compatible with system CUDA version (%s)",
                               v->backend_major, v->backend_minor, sysv));
    } else if (strcmp(vb, s->backend_variant) != 0 ||
               (is_versioned(s->backend) && !s->backend_has_version)) {
        return rejected(hk__asprintf("backend (%s) does not match selected backend (%s)", vb, s->backend_variant));
    } else if (v->backend == HK_BACKEND_METAL && !s->macos_ok) {
        return rejected(hk__asprintf("Metal kernels require macOS 26.0 or later, system macOS version is %s",
                           or_none(s->macos)));
    }
    return NULL;
}

static void fill_key(decision *d) {
    memset(d->key, 0, sizeof d->key);
    d->key[0] = d->accepted ? 0 : 1;
    if (!d->parsed) {
        d->key[1] = 3;
        return;
    }
    const hk_variant *v = &d->v;
    int bo = is_versioned(v->backend) ? -(int)(v->backend_minor > 1000000 ? 1000000 : v->backend_minor) : 0;
    switch (v->family) {
    case HK_FAMILY_TORCH_STABLE_ABI:
        d->key[1] = 0;
        d->key[2] = -(int)(v->fw_major > 1000000 ? 1000000 : v->fw_major);
        d->key[3] = -(int)(v->fw_minor > 1000000 ? 1000000 : v->fw_minor);
        d->key[6] = bo;
        break;
    case HK_FAMILY_TORCH:
        d->key[1] = 1;
        d->key[4] = v->cxx11 >= 0 ? 1 : 0;
        d->key[6] = bo;
        break;
    case HK_FAMILY_TVM_FFI:
        d->key[1] = 2;
        d->key[6] = bo;
        break;
    default: /* noarch */
        d->key[1] = 2;
        d->key[5] = 1;
        d->key[7] = strcmp(v->noarch, "universal") == 0 ? 1 : 0;
        break;
    }
}

static int cmp_decision(const void *a, const void *b) {
    const decision *x = a, *y = b;
    for (size_t i = 0; i < HK_ARRAY_LEN(x->key); i++)
        if (x->key[i] != y->key[i]) return x->key[i] < y->key[i] ? -1 : 1;
    return strcmp(x->name, y->name);
}

void hk_resolution_free(hk_resolution *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->d[i].name);
        free(r->d[i].reason);
    }
    free(r->d);
    free(r->backend_variant);
    hk_env_free(r->env);
    free(r);
}

int hk_resolve_variants(hk_resolution **out, const hk_env *env, const char *const *names,
                        size_t count, const char *backend_override) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_resolve_variants: out is NULL");
    *out = NULL;
    if (!env) return hk__fail(HK_ERR_INVALID_ARG, "hk_resolve_variants: env is NULL (use hk_env_detect)");
    if (count && !names) return hk__fail(HK_ERR_INVALID_ARG, "hk_resolve_variants: names is NULL");
    if (backend_override && !*backend_override) backend_override = NULL;

    sysdesc s;
    int rc = describe_system(&s, env, backend_override);
    if (rc) return rc;

    hk_resolution *r = calloc(1, sizeof *r);
    if (!r) return hk__fail(HK_ERR_NOMEM, "out of memory");
    r->d = calloc(count ? count : 1, sizeof *r->d);
    bool want_bv = !(is_versioned(s.backend) && !s.backend_has_version);
    r->backend_variant = want_bv ? hk__strdup(s.backend_variant) : NULL;
    rc = hk_env_clone(&r->env, env);
    if (!r->d || rc || (want_bv && !r->backend_variant)) {
        hk_resolution_free(r);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    /* Resolve against the backend actually used (an explicit cpu override included). */
    if (backend_override && strcmp(backend_override, "cpu") == 0 &&
        (hk_env_set(r->env, "backend", "cpu") || hk_env_set(r->env, "backend_version", NULL))) {
        hk_resolution_free(r);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }

    for (size_t i = 0; i < count; i++) {
        decision *d = &r->d[r->n];
        const char *name = names[i] ? names[i] : "";
        d->name = hk__strdup(name);
        if (!d->name) goto oom;
        r->n++;
        if (hk__variant_parse_into(&d->v, name) == HK_OK) {
            d->parsed = true;
            d->reason = check(&s, &d->v);
            if (d->reason == k_reason_oom) {
                d->reason = NULL;
                goto oom;
            }
            d->accepted = d->reason == NULL;
            if (d->accepted) d->reason = hk__strdup("compatible");
        } else {
            d->reason = hk__asprintf("cannot parse variant name: %s", hk_last_error());
        }
        if (!d->reason) goto oom;
        fill_key(d);
    }
    hk_clear_error();
    qsort(r->d, r->n, sizeof *r->d, cmp_decision);
    /* Identical names sort next to each other (same key): keep one, like upstream's set. */
    size_t w = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (w > 0 && strcmp(r->d[w - 1].name, r->d[i].name) == 0) {
            free(r->d[i].name);
            free(r->d[i].reason);
            continue;
        }
        r->d[w++] = r->d[i];
    }
    r->n = w;
    if (r->n > 0 && r->d[0].accepted) {
        char *p = hk__strdup("compatible, preferred");
        if (!p) goto oom;
        free(r->d[0].reason);
        r->d[0].reason = p;
    }
    *out = r;
    return HK_OK;
oom:
    hk_resolution_free(r);
    return hk__fail(HK_ERR_NOMEM, "out of memory");
}

size_t hk_resolution_count(const hk_resolution *r) { return r ? r->n : 0; }

const char *hk_resolution_name(const hk_resolution *r, size_t i) {
    return r && i < r->n ? r->d[i].name : NULL;
}

int hk_resolution_accepted(const hk_resolution *r, size_t i) {
    return r && i < r->n && r->d[i].accepted;
}

const char *hk_resolution_reason(const hk_resolution *r, size_t i) {
    return r && i < r->n ? r->d[i].reason : NULL;
}

hk_variant_family hk_resolution_family(const hk_resolution *r, size_t i) {
    return r && i < r->n && r->d[i].parsed ? r->d[i].v.family : HK_FAMILY_INVALID;
}

const hk_variant *hk_resolution_variant(const hk_resolution *r, size_t i) {
    return r && i < r->n && r->d[i].parsed ? &r->d[i].v : NULL;
}

const char *hk_resolution_best(const hk_resolution *r) {
    return r && r->n > 0 && r->d[0].accepted ? r->d[0].name : NULL;
}

const char *hk_resolution_best_of(const hk_resolution *r, unsigned family_mask) {
    if (!r) return NULL;
    for (size_t i = 0; i < r->n && r->d[i].accepted; i++)
        if (family_mask & HK_FAMILY_BIT(r->d[i].v.family)) return r->d[i].name;
    return NULL;
}

const char *hk_resolution_backend(const hk_resolution *r) { return r ? r->backend_variant : NULL; }

char *hk_resolution_to_json(const hk_resolution *r) {
    if (!r) return NULL;
    cJSON *root = cJSON_CreateObject();
    char *env_json = hk_env_to_json(r->env);
    cJSON *sys = env_json ? cJSON_Parse(env_json) : NULL;
    free(env_json);
    if (!root || !sys) {
        cJSON_Delete(root);
        cJSON_Delete(sys);
        return NULL;
    }
    cJSON_AddItemToObject(root, "system", sys);
    if (r->backend_variant)
        cJSON_AddStringToObject(root, "backend", r->backend_variant);
    else
        cJSON_AddNullToObject(root, "backend");
    const char *best = hk_resolution_best(r);
    if (best)
        cJSON_AddStringToObject(root, "best", best);
    else
        cJSON_AddNullToObject(root, "best");
    cJSON *arr = cJSON_AddArrayToObject(root, "candidates");
    for (size_t i = 0; arr && i < r->n; i++) {
        cJSON *c = cJSON_CreateObject();
        if (!c) break;
        cJSON_AddItemToArray(arr, c);
        cJSON_AddStringToObject(c, "name", r->d[i].name);
        cJSON_AddBoolToObject(c, "accepted", r->d[i].accepted);
        cJSON_AddBoolToObject(c, "preferred", i == 0 && r->d[i].accepted);
        cJSON_AddStringToObject(c, "family",
                                hk_variant_family_name(r->d[i].parsed ? r->d[i].v.family
                                                                      : HK_FAMILY_INVALID));
        cJSON_AddStringToObject(c, "reason", r->d[i].reason);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char *res = text ? hk__strdup(text) : NULL;
    cJSON_free(text);
    return res;
}

char *hk_resolution_to_text(const hk_resolution *r) {
    if (!r) return NULL;
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < r->n; i++) {
        if (r->d[i].accepted)
            hk__sb_printf(&sb, "%s %s \xe2\x9c\x85\n", r->d[i].name, r->d[i].reason);
        else
            hk__sb_printf(&sb, "%s: %s\n", r->d[i].name, r->d[i].reason);
    }
    return hk__sb_steal(&sb);
}
