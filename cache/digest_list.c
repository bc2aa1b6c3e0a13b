/* The one parser of a variant's metadata.json digest list (kernel-hub-format.md §7): the pull's
 * digest check (digest.c), `cache verify`'s walk (verify.c) and the stray scan (strays.c) read the
 * same sorted list, so they cannot disagree about which files a variant should hold. */
#include "cache/cache_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const hk_digest_entry *)a)->rel, ((const hk_digest_entry *)b)->rel);
}

int hk__digest_list_parse(hk_digest_list *out, const char *text, size_t len, const char *what) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return hk__fail(HK_ERR_PARSE, "%s/metadata.json is not valid JSON", what);
    out->root = root;
    cJSON *dg = cJSON_GetObjectItemCaseSensitive(root, "digest");
    if (!cJSON_IsObject(dg)) return HK_OK; /* no digest: has_digest stays false */
    out->has_digest = true;
    cJSON *files = cJSON_GetObjectItemCaseSensitive(dg, "files");
    out->has_files = cJSON_IsObject(files);
    if (out->has_files) {
        size_t n = (size_t)cJSON_GetArraySize(files);
        out->e = n ? calloc(n, sizeof *out->e) : NULL;
        if (n && !out->e) return hk__fail(HK_ERR_NOMEM, "out of memory");
        const cJSON *f;
        cJSON_ArrayForEach(f, files) {
            if (!f->string) continue;
            out->e[out->n].rel = f->string;
            out->e[out->n].want = cJSON_GetStringValue(f); /* NULL: not a string, never matches */
            out->n++;
        }
        if (out->n) qsort(out->e, out->n, sizeof *out->e, cmp_entry);
    }
    const char *alg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dg, "algorithm"));
    if (alg && strcmp(alg, "sha256") == 0) out->kind = HK_HASH_SHA256;
    else if (alg && strcmp(alg, "sha512") == 0) out->kind = HK_HASH_SHA512;
    else return hk__fail(HK_ERR_DIGEST, "%s: AlgorithmMismatch: unknown digest algorithm '%s'", what, alg ? alg : "(none)");
    if (!out->has_files) return hk__fail(HK_ERR_DIGEST, "%s: metadata.json digest has no files object", what);
    /* a name listed twice has two expectations for one file: no honest build writes that */
    for (size_t i = 1; i < out->n; i++)
        if (strcmp(out->e[i - 1].rel, out->e[i].rel) == 0)
            return hk__fail(HK_ERR_DIGEST, "%s: metadata.json digest lists %s twice", what, out->e[i].rel);
    return HK_OK;
}

const hk_digest_entry *hk__digest_list_find(const hk_digest_list *l, const char *rel) {
    if (!l->n) return NULL;
    hk_digest_entry key = {rel, NULL};
    return bsearch(&key, l->e, l->n, sizeof *l->e, cmp_entry);
}

void hk__digest_list_free(hk_digest_list *l) {
    free(l->e);
    cJSON_Delete(l->root);
    memset(l, 0, sizeof *l);
}
