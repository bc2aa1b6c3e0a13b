/* Signature receipts: see cache/sig_receipt.h. */
#include "cache/sig_receipt.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define SIG_RECEIPT_FORMAT "hubkern-signature-receipt/1"

char *hk__sig_receipt_path(const char *root, const char *repo_dir, const char *commit, const char *variant) {
    char *p = hk__receipt_path(root, repo_dir, commit, variant);
    if (!p || !hk__str_ends_with(p, ".json")) {
        free(p);
        return NULL;
    }
    p[strlen(p) - 5] = '\0';
    char *s = hk__asprintf("%s.signature", p);
    free(p);
    return s;
}

bool hk__sig_receipt_vouches(const char *path, const char *key, char **identity) {
    if (identity) *identity = NULL;
    if (!path || !key || !hk_receipts_enabled()) return false;
    char *text = NULL;
    if (hk__read_file(&text, NULL, path, 64u << 10)) {
        hk_clear_error();
        return false;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    const char *f = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "format"));
    const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "key"));
    bool ok = f && k && strcmp(f, SIG_RECEIPT_FORMAT) == 0 && strcmp(k, key) == 0;
    if (ok && identity) *identity = hk__strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "identity")));
    cJSON_Delete(j);
    return ok;
}

int hk__sig_receipt_save(const char *path, const char *key, const char *identity) {
    if (!path || !hk_receipts_enabled()) return HK_OK;
    cJSON *j = cJSON_CreateObject();
    bool ok = j && cJSON_AddStringToObject(j, "format", SIG_RECEIPT_FORMAT) && cJSON_AddStringToObject(j, "key", key) &&
              cJSON_AddStringToObject(j, "identity", identity ? identity : "");
    if (!ok) {
        cJSON_Delete(j);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return hk__receipt_write_json(path, j);
}
