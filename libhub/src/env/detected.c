/* The process-wide detected machine: detection runs a Python interpreter and dlopens CUDA / HIP
 * libraries, so it is done once per process and shared by every caller that gave no hk_env
 * (pull, get, has, lock downloads). */
#include "env/detected.h"

#include "internal.h"

#include <pthread.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_env *g_env; /* set once under g_lock, then read-only until the process ends */

int hk__env_cached(const hk_env **out) {
    *out = NULL;
    pthread_mutex_lock(&g_lock);
    int rc = HK_OK;
    if (!g_env) rc = hk_env_detect(&g_env, NULL);
    const hk_env *env = g_env;
    pthread_mutex_unlock(&g_lock);
    if (rc) return rc;
    hk_clear_error(); /* detection records (and clears) what it could not find; nothing is left */
    *out = env;
    return HK_OK;
}
