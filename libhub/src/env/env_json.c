/* hk_env_to_json: the machine description as one JSON object (`hubkern env --json`). */
#include "env/env_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ----------------------------------------------------------------------------------- */

static void add_str(cJSON *o, const char *k, const char *v) {
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void add_tri(cJSON *o, const char *k, int v) {
    if (v < 0)
        cJSON_AddNullToObject(o, k);
    else
        cJSON_AddBoolToObject(o, k, v);
}

char *hk_env_to_json(const hk_env *env) {
    if (!env) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (int k = 0; k < HK_K_COUNT; k++) {
        const char *name = hk__env_key_name((hk_env_key)k);
        switch (k) {
        case HK_K_PYTHON_FREE_THREADED: add_tri(o, name, hk_env_python_free_threaded(env)); break;
        case HK_K_TORCH_CXX11_ABI: add_tri(o, name, hk_env_torch_cxx11_abi(env)); break;
        case HK_K_SITE_PACKAGES: {
            cJSON *a = cJSON_AddArrayToObject(o, name);
            for (size_t i = 0; a && i < env->nsite; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(env->site[i]));
            break;
        }
        case HK_K_BACKEND:
            add_str(o, name, hk_env_backend(env));
            break;
        case HK_K_BACKEND_VERSION:
            add_str(o, name, env->backend_version);
            add_str(o, "backend_variant", env->backend_variant);
            add_str(o, "backend_source", env->backend_source);
            break;
        case HK_K_GPUS: {
            cJSON_AddNumberToObject(o, "gpu_count", env->ngpus);
            cJSON *a = cJSON_AddArrayToObject(o, name);
            for (int i = 0; a && i < env->ngpus; i++) {
                cJSON *g = cJSON_CreateObject();
                if (!g) break;
                cJSON_AddItemToArray(a, g);
                cJSON_AddNumberToObject(g, "index", i);
                add_str(g, "name", env->gpus[i].name);
                char cap[32];
                snprintf(cap, sizeof cap, "%d.%d", env->gpus[i].major, env->gpus[i].minor);
                cJSON_AddStringToObject(g, "capability", cap);
            }
            break;
        }
        default: add_str(o, name, env->f[k]); break;
        }
    }
    cJSON_AddBoolToObject(o, "torch_installed", env->torch_installed);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    char *res = text ? hk__strdup(text) : NULL;
    cJSON_free(text);
    return res;
}
