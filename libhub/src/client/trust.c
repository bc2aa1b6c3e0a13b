/* Publisher trust: GET /api/organizations/<org>/overview, trustedKernelPublisher
 * (kernel-hub-format.md §11.1). By design the mirror answers this itself.
 *
 * A "trusted" answer is remembered for the freshness window (HUBKERN_FRESHNESS_S seconds, default
 * 300; 0 disables it) as the mtime of <cache>/.locks/hubkern-trust/<endpoint hash>--<org>, so that a
 * fleet's warm pulls and repeat loads do not ask again (huggingface_hub's HF_HUB_ETAG_TIMEOUT plays
 * the same role for its metadata). Only positive answers are kept; an untrusted or failed answer is
 * asked again every time. */
#include "client/client.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define HK_FRESHNESS_DEFAULT_S 300

static long freshness_s(void) {
    const char *e = hk__getenv("HUBKERN_FRESHNESS_S");
    if (!e || !*e) return HK_FRESHNESS_DEFAULT_S;
    char *end;
    long v = strtol(e, &end, 10);
    return *end || v < 0 ? HK_FRESHNESS_DEFAULT_S : v;
}

/* The memo file of (endpoint, org): the endpoint is part of the name, so that two mirrors' answers
 * never stand in for each other. */
static char *memo_path(const hk_hub *hub, const char *org) {
    if (!hub->cache_root || strchr(org, '/') || strcmp(org, "..") == 0 || strcmp(org, ".") == 0) return NULL;
    unsigned char dig[64];
    char hex[129];
    hk_hasher *h = hk__hasher_new(HK_HASH_SHA256, 0);
    if (!h) return NULL;
    hk__hasher_update(h, hub->endpoint, strlen(hub->endpoint));
    hk__hex(hex, dig, hk__hasher_finish(h, dig));
    hex[16] = '\0';
    return hk__asprintf("%s/.locks/hubkern-trust/%s--%s", hub->cache_root, hex, org);
}

static bool memo_fresh(const char *path) {
    long win = freshness_s();
    struct stat st;
    if (!path || win <= 0 || stat(path, &st) != 0) return false;
    double age = difftime(time(NULL), st.st_mtime);
    return age >= 0 && age < (double)win;
}

static void memo_write(const char *path) {
    if (!path || freshness_s() <= 0) return;
    char *dir = hk__strdup(path);
    if (dir) *strrchr(dir, '/') = '\0';
    if (dir && hk__mkdirs(dir, 0777) == HK_OK) hk__write_file_atomic(path, "", 0);
    hk_clear_error(); /* a memo that cannot be written only costs a request next time */
    free(dir);
}

int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org) {
    *out_trusted = 0;
    char *memo = memo_path(hub, org);
    if (memo_fresh(memo)) {
        free(memo);
        *out_trusted = 1;
        return HK_OK;
    }
    char *eorg = hk__pct_encode(org, false);
    char *url = eorg ? hk__asprintf("%s/api/organizations/%s/overview", hub->endpoint, eorg) : NULL;
    free(eorg);
    if (!url) {
        free(memo);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
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
    if (rc == HK_OK && *out_trusted) memo_write(memo);
    free(memo);
    return rc;
}
