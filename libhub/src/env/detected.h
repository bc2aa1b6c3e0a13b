/* The process-wide detected machine (env/detected.c), for callers that were given no hk_env. */
#ifndef HK_ENV_CACHE_H
#define HK_ENV_CACHE_H

#include "hubkern/env.h"

/* hk_env_detect(NULL) run once per process (the first successful call wins; a failed detection
 * is not kept, so the next call tries again), then shared read-only: never free *out, never
 * hk_env_set it. Thread-safe. */
int hk__env_cached(const hk_env **out);

#endif
