/* Publisher trust: GET /api/organizations/<org>/overview, trustedKernelPublisher
 * (kernel-hub-format.md §11.1). By design the mirror answers this itself.
 *
 * A "trusted" answer is remembered for the freshness window (hk_hub.freshness_ms:
 * HUBKERN_FRESHNESS_S / hk_hub_options.freshness_s, default 60 s; 0 disables it) in this process
 * (client/memo.c) and as the mtime of <cache>/.locks/hubkern-trust/<endpoint hash>--<org>, so that a
 * fleet's warm pulls and repeat loads do not ask again (huggingface_hub's HF_HUB_ETAG_TIMEOUT plays
 * the same role for its metadata). Only positive answers are kept; an untrusted or failed answer is
 * asked again every time. A hubkern mirror also says "trusted" in the refs answer of a repo
 * (X-Kernel-Publisher-Trusted: true, client/refs.c): that is the same endpoint's answer, recorded
 * here the same way, and saves the overview request of a cold pull. */
#include "client/client.h"
#include "client/memo.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* The memo file of (endpoint, org): the endpoint is part of the name, so that two mirrors' answers
 * never stand in for each other. */
static char *memo_path(const hk_hub *hub, const char *org) {
    if (!hub->cache_root || strchr(org, '/') || strcmp(org, "..") == 0 || strcmp(org, ".") == 0) return NULL;
    char hex[65];
    if (hk__sha256_hex(hex, hub->endpoint, strlen(hub->endpoint))) return NULL;
    hex[16] = '\0';
    return hk__asprintf("%s/.locks/hubkern-trust/%s--%s", hub->cache_root, hex, org);
}

static bool memo_fresh(const hk_hub *hub, const char *path) {
    long win = hub->freshness_ms;
    struct stat st;
    if (!path || win <= 0 || stat(path, &st) != 0) return false;
    double age = difftime(time(NULL), st.st_mtime);
    return age >= 0 && age * 1000.0 < (double)win;
}

static void memo_write(const hk_hub *hub, const char *path) {
    if (!path || hub->freshness_ms <= 0 || hub->read_only) return;
    char *dir = hk__strdup(path);
    if (dir) *strrchr(dir, '/') = '\0';
    if (dir && hk__mkdirs(dir, 0777) == HK_OK) hk__write_file_atomic(path, "", 0);
    hk_clear_error(); /* a memo that cannot be written only costs a request next time */
    free(dir);
}

bool hk__client_trust_known(const hk_hub *hub, const char *org) {
    if (!hk__memo_on(hub)) return false;
    char *key = hk__memo_key(hub, "trust", org, NULL);
    char *v = hk__memo_get(hub->share, key, hub->freshness_ms);
    bool known = v != NULL;
    free(v);
    if (!known) {
        char *path = memo_path(hub, org);
        known = memo_fresh(hub, path);
        free(path);
        if (known) hk__memo_put(hub->share, key, "1");
    }
    free(key);
    return known;
}

void hk__client_trust_remember(const hk_hub *hub, const char *org) {
    if (!hk__memo_on(hub)) return;
    char *key = hk__memo_key(hub, "trust", org, NULL);
    hk__memo_put(hub->share, key, "1");
    free(key);
    char *path = memo_path(hub, org);
    memo_write(hub, path);
    free(path);
}

int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org) {
    *out_trusted = 0;
    if (hk__client_trust_known(hub, org)) {
        *out_trusted = 1;
        return HK_OK;
    }
    char *eorg = hk__pct_encode(org, false);
    char *url = eorg ? hk__asprintf("%s/api/organizations/%s/overview", hub->endpoint, eorg) : NULL;
    free(eorg);
    if (!url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    int rc = hk__http_get(&r, hub, url, 1u << 20);
    free(url);
    if (rc == HK_OK) {
        if (r.status == 200) {
            cJSON *j = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
            if (!j) rc = hk__fail(HK_ERR_PROTOCOL, "organization overview of %s is not JSON", org);
            else *out_trusted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "trustedKernelPublisher"));
            cJSON_Delete(j);
        } else if (r.status == 401 && !hub->token) {
            /* an organisation is not a repository (the mirror says RepoNotFound, as the Hub does on a 401):
             * say that the endpoint wants a token */
            rc = hk__fail(HK_ERR_AUTH,
                         "checking publisher trust of %s: %s requires a token (HTTP 401); set HF_TOKEN or pass one",
                         org, hub->endpoint);
        } else if (r.status != 404) {
            char *what = hk__asprintf("checking publisher trust of %s", org);
            rc = hk__http_fail(&r, what ? what : "trust check");
            free(what);
        }
    }
    hk__http_resp_free(&r);
    if (rc == HK_OK && *out_trusted) hk__client_trust_remember(hub, org);
    return rc;
}
