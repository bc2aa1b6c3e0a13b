/* hk_init / hk_shutdown: the reference count of libcurl's global state. The client owns it because
 * it is the only part that uses libcurl. The implicit initialisation of a program that never calls
 * hk_init (hk_hub_new's fallback) holds one reference that is never released (see common.h). */
#include "client/client.h"
#include "client/memo.h"
#include "sigstore/sigstore.h"

#include <pthread.h>

static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refs;      /* hk_init calls not yet paired with hk_shutdown */
static bool g_implicit;      /* hk_hub_new initialised libcurl for a program that had not */

/* libcurl is initialised while g_refs > 0 or g_implicit; called with the lock held. */
static int curl_up(void) {
    if (g_refs > 0 || g_implicit) return HK_OK;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return hk__fail(HK_ERR_INTERNAL, "curl_global_init failed (libcurl or its TLS library cannot start)");
    return HK_OK;
}

int hk_init(void) {
    pthread_mutex_lock(&g_init_lock);
    int rc = curl_up();
    if (rc == HK_OK) g_refs++;
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

int hk_shutdown(void) {
    pthread_mutex_lock(&g_init_lock);
    if (g_refs > 0 && --g_refs == 0) {
        hk__memo_clear(hk__memo_default()); /* the memoised answers go with the last reference (client/memo.c) */
        hk__sigstore_trust_root_memo_clear(); /* and the parsed trust roots (sigstore/trust_root.c) */
        if (!g_implicit) curl_global_cleanup();
    }
    int left = (int)g_refs;
    pthread_mutex_unlock(&g_init_lock);
    return left;
}

int hk__client_global_init(void) {
    pthread_mutex_lock(&g_init_lock);
    int rc = HK_OK;
    if (g_refs == 0 && !g_implicit) {
        rc = curl_up();
        if (rc == HK_OK) g_implicit = true;
    }
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}
