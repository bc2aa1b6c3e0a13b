/* Publisher trust: GET /api/organizations/<org>/overview, trustedKernelPublisher
 * (kernel-hub-format.md §11.1). By design the mirror answers this itself. */
#include "client/client.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org) {
    *out_trusted = 0;
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
    return rc;
}
