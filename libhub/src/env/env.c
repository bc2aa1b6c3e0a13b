/* hk_env: the machine description: its lifetime and validated setters (hk_env_set). The keys and
 * the value grammars are in env_keys.c, the derived backend and the getters in env_get.c, the
 * JSON form in env_json.c. */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const k_backends[] = {"cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu", "cpu"};

/* ---- lifetime ------------------------------------------------------------------------------- */

static void free_site(hk_env *env) {
    for (size_t i = 0; i < env->nsite; i++) free(env->site[i]);
    free(env->site);
    env->site = NULL;
    env->nsite = 0;
}

static void free_gpus(hk_env *env) {
    for (int i = 0; i < env->ngpus; i++) free(env->gpus[i].name);
    free(env->gpus);
    env->gpus = NULL;
    env->ngpus = 0;
}

void hk_env_free(hk_env *env) {
    if (!env) return;
    for (int i = 0; i < HK_K_COUNT; i++) free(env->f[i]);
    free_site(env);
    free_gpus(env);
    free(env->backend);
    free(env->backend_version);
    free(env->backend_variant);
    free(env->gpus_str);
    free(env);
}

int hk_env_new(hk_env **out) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_env_new: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (hk__env_derive(*out)) {
        hk_env_free(*out);
        *out = NULL;
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return HK_OK;
}

int hk_env_clone(hk_env **out, const hk_env *env) {
    if (!out || !env) return hk__fail(HK_ERR_INVALID_ARG, "hk_env_clone: NULL argument");
    hk_env *c = calloc(1, sizeof *c);
    if (!c) return hk__fail(HK_ERR_NOMEM, "out of memory");
    bool oom = false;
    for (int i = 0; i < HK_K_COUNT; i++)
        if (env->f[i] && !(c->f[i] = hk__strdup(env->f[i]))) oom = true;
    if (env->nsite) {
        c->site = calloc(env->nsite, sizeof *c->site);
        if (!c->site) oom = true;
        for (size_t i = 0; c->site && i < env->nsite; i++) {
            c->site[i] = hk__strdup(env->site[i]);
            c->nsite++;
            if (!c->site[i]) oom = true;
        }
    }
    if (env->ngpus) {
        c->gpus = calloc((size_t)env->ngpus, sizeof *c->gpus);
        if (!c->gpus) oom = true;
        for (int i = 0; c->gpus && i < env->ngpus; i++) {
            c->gpus[i] = env->gpus[i];
            c->gpus[i].name = hk__strdup(env->gpus[i].name);
            c->ngpus++;
            if (env->gpus[i].name && !c->gpus[i].name) oom = true;
        }
    }
    c->torch_installed = env->torch_installed;
    c->has_torch_tpu = env->has_torch_tpu;
    c->has_torch_neuronx = env->has_torch_neuronx;
    c->has_torch_npu = env->has_torch_npu;
    if (oom || hk__env_derive(c)) {
        hk_env_free(c);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return HK_OK;
}

/* ---- storing values ------------------------------------------------------------------------- */

static int set_site(hk_env *env, const char *value) {
    free_site(env);
    if (!value) return HK_OK;
    size_t n = 1;
    for (const char *p = value; *p; p++) n += *p == ':';
    env->site = calloc(n, sizeof *env->site);
    if (!env->site) return HK_ERR_NOMEM;
    const char *start = value;
    for (;;) {
        const char *end = strchr(start, ':');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        if (len > 0) {
            char *dir = hk__strndup(start, len);
            if (!dir) return HK_ERR_NOMEM;
            env->site[env->nsite++] = dir;
        }
        if (!end) break;
        start = end + 1;
    }
    return HK_OK;
}

/* gpus "9.0,8.6" (validated by the caller). */
static int set_gpus(hk_env *env, const char *value) {
    free_gpus(env);
    if (!value) return HK_OK;
    size_t n = 1;
    for (const char *p = value; *p; p++) n += *p == ',';
    env->gpus = calloc(n, sizeof *env->gpus);
    if (!env->gpus) return HK_ERR_NOMEM;
    const char *p = value;
    while (*p) {
        uint32_t ma = 0, mi = 0;
        if (hk__env_ver2(p, &ma, &mi)) {
            hk_gpu *g = &env->gpus[env->ngpus];
            g->major = (int)ma;
            g->minor = (int)mi;
            g->name = hk__asprintf("GPU %d", env->ngpus);
            if (!g->name) return HK_ERR_NOMEM;
            env->ngpus++;
        }
        const char *comma = strchr(p, ',');
        if (!comma) break;
        p = comma + 1;
    }
    return HK_OK;
}

static int env_put(hk_env *env, hk_env_key k, const char *value) {
    char *copy = NULL;
    if (value && *value && !(copy = hk__strdup(value))) return HK_ERR_NOMEM;
    free(env->f[k]);
    env->f[k] = copy;
    int rc = HK_OK;
    if (k == HK_K_SITE_PACKAGES) rc = set_site(env, copy);
    if (k == HK_K_GPUS) rc = set_gpus(env, copy);
    return rc;
}

int hk__env_put(hk_env *env, hk_env_key k, const char *value) {
    int rc = env_put(env, k, value);
    if (rc == HK_ERR_NOMEM) env->oom = true;
    return rc;
}

static bool parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return (*out = 1), true;
        if (strcasecmp(v, no[i]) == 0) return (*out = 0), true;
    }
    return false;
}

/* A token for os/cpu: non-empty, [A-Za-z0-9_.], lower-cased into buf. */
static bool token_lower(char *buf, size_t cap, const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (i < n && !(isalnum(c) || c == '_' || c == '.')) return false;
        buf[i] = (char)tolower(c);
    }
    return true;
}

static const char *normalise_cpu(const char *lower) {
    if (strcmp(lower, "amd64") == 0 || strcmp(lower, "x64") == 0 || strcmp(lower, "x86_64") == 0)
        return "x86_64";
    if (strcmp(lower, "arm64") == 0 || strcmp(lower, "aarch64") == 0 || strcmp(lower, "armv8") == 0)
        return "aarch64";
    return lower;
}

/* Validate and normalise `value` for key k into a malloc'd string (*norm NULL = clear). */
/* One piece: one case per environment key, each a few lines of that key's grammar; a function per
 * key would only add a dispatch table. */
static int normalise(hk_env_key k, const char *value, char **norm) {
    *norm = NULL;
    if (!value || !*value) return HK_OK;
    char buf[64];
    uint32_t ma = 0, mi = 0;
    int b = 0;
    switch (k) {
    case HK_K_OS:
        if (!token_lower(buf, sizeof buf, value)) goto bad;
        *norm = hk__strdup(buf);
        break;
    case HK_K_CPU:
        if (!token_lower(buf, sizeof buf, value)) goto bad;
        *norm = hk__strdup(normalise_cpu(buf));
        break;
    case HK_K_PYTHON:
        if (strcmp(value, "none") == 0) return HK_OK;
        *norm = hk__strdup(value);
        break;
    case HK_K_PYTHON_FREE_THREADED:
    case HK_K_TORCH_CXX11_ABI:
        if (!parse_bool(value, &b)) goto bad;
        *norm = hk__strdup(b ? "1" : "0");
        break;
    case HK_K_MACOS_VERSION:
    case HK_K_PYTHON_VERSION:
        /* kept as given ("26.0.1", "3.14.0") but must start with M.m */
        if (!hk__env_ver2(value, &ma, &mi) || !strchr(value, '.')) goto bad;
        for (const char *p = value; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '+') goto bad;
        *norm = hk__strdup(value);
        break;
    case HK_K_TORCH_VERSION:
    case HK_K_TORCH_CUDA_VERSION:
    case HK_K_TORCH_HIP_VERSION:
    case HK_K_TORCH_XPU_VERSION:
    case HK_K_BACKEND_VERSION:
    case HK_K_TVM_FFI_VERSION:
    case HK_K_CUDA_RUNTIME_VERSION:
    case HK_K_CUDA_DRIVER_VERSION:
    case HK_K_HIP_RUNTIME_VERSION:
        /* major.minor of a version: "2.13.0+cu130" → "2.13" */
        if (!hk__env_ver2(value, &ma, &mi)) goto bad;
        for (const char *p = value; *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr(".+-_", *p)) goto bad;
        *norm = hk__asprintf("%u.%u", ma, mi);
        break;
    case HK_K_BACKEND: {
        bool ok = false;
        for (size_t i = 0; i < HK_ARRAY_LEN(k_backends); i++) ok |= strcmp(value, k_backends[i]) == 0;
        if (!ok) goto bad;
        *norm = hk__strdup(value);
        break;
    }
    case HK_K_GPU_ARCH:
        /* kept as given, feature flags included ("gfx90a:sramecc+:xnack-") */
        if (!hk__env_gcn_arch_valid(value)) goto bad;
        *norm = hk__strdup(value);
        break;
    case HK_K_GPUS: {
        if (strcmp(value, "none") == 0) {
            *norm = hk__strdup("none");
            break;
        }
        hk_strbuf sb;
        hk__sb_init(&sb);
        const char *p = value;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char item[32];
            if (len == 0 || len >= sizeof item) {
                hk__sb_free(&sb);
                goto bad;
            }
            memcpy(item, p, len);
            item[len] = '\0';
            char *dot = strchr(item, '.');
            if (!dot || !hk__env_ver2(item, &ma, &mi) || ma > 99 || mi > 99 ||
                strspn(item, "0123456789") != (size_t)(dot - item) ||
                strspn(dot + 1, "0123456789") != strlen(dot + 1)) {
                hk__sb_free(&sb);
                goto bad;
            }
            hk__sb_printf(&sb, "%s%u.%u", sb.len ? "," : "", ma, mi);
            if (!comma) break;
            p = comma + 1;
        }
        *norm = hk__sb_steal(&sb);
        break;
    }
    default:
        *norm = hk__strdup(value);
        break;
    }
    return *norm ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
bad:
    return hk__fail(HK_ERR_INVALID_ARG, "invalid value '%s' for environment key '%s'%s", value,
                   hk__env_key_name(k),
                   k == HK_K_BACKEND ? " (use cuda, rocm, xpu, cann, metal, neuron, tpu or cpu)"
                   : k == HK_K_GPUS  ? " (use compute capabilities like 9.0,8.6, or none)"
                   : k == HK_K_GPU_ARCH ? " (use a ROCm gcnArchName like gfx942 or "
                                          "gfx90a:sramecc+:xnack-; CUDA GPUs are described with gpus)"
                   : (k == HK_K_PYTHON_FREE_THREADED || k == HK_K_TORCH_CXX11_ABI) ? " (use 0 or 1)"
                   : (k == HK_K_OS || k == HK_K_CPU) ? " (use a name like linux or x86_64)"
                                                      : " (use a version like 2.13)");
}

static int env_set(hk_env *env, const char *key, const char *value);

int hk_env_set(hk_env *env, const char *key, const char *value) {
    if (!env) return hk__fail(HK_ERR_INVALID_ARG, "hk_env_set: env is NULL");
    int rc = env_set(env, key, value);
    if (rc == HK_ERR_NOMEM) env->oom = true;
    return rc;
}

static int env_set(hk_env *env, const char *key, const char *value) {
    int k = hk__env_key_lookup(key);
    if (k < 0) {
        hk_strbuf sb;
        hk__sb_init(&sb);
        for (int i = 0; i < HK_K_COUNT; i++) hk__sb_printf(&sb, "%s%s", i ? ", " : "", hk__env_key_name((hk_env_key)i));
        int rc = hk__fail(HK_ERR_INVALID_ARG, "unknown environment key '%s' (known keys: %s)",
                         key ? key : "(null)", sb.data ? sb.data : "");
        hk__sb_free(&sb);
        return rc;
    }
    char *norm = NULL;
    int rc = normalise((hk_env_key)k, value, &norm);
    if (rc) return rc;
    /* "gpus none" = known to have no GPU */
    if (k == HK_K_GPUS && norm && strcmp(norm, "none") == 0) {
        free(norm);
        free_gpus(env);
        free(env->f[k]);
        env->f[k] = NULL;
        return hk__env_derive(env) ? hk__fail(HK_ERR_NOMEM, "out of memory") : HK_OK;
    }
    if (k == HK_K_GPUS) {
        free(env->f[k]);
        env->f[k] = NULL;
    }
    rc = hk__env_put(env, (hk_env_key)k, norm);
    free(norm);
    if (k == HK_K_TORCH_DIR && !env->f[k]) env->torch_installed = false;
    if (rc || hk__env_derive(env)) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

