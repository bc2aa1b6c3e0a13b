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

/* The files object's entries copied into out's arena, each node freed once copied: the parse
 * peaks at the JSON tree, not at the tree and the copies together. */
static int take_files(hk_digest_list *out, cJSON *files) {
    size_t n = (size_t)cJSON_GetArraySize(files);
    out->e = n ? calloc(n, sizeof *out->e) : NULL;
    if (n && !out->e) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (cJSON *f = files->child, *next; f; f = next) {
        next = f->next;
        if (f->string) {
            const char *want = cJSON_GetStringValue(f); /* NULL: not a string, never matches */
            hk_digest_entry *e = &out->e[out->n];
            e->rel = hk__arena_strdup(&out->strs, f->string);
            e->want = hk__arena_strdup(&out->strs, want);
            if (!e->rel || (want && !e->want)) return hk__fail(HK_ERR_NOMEM, "out of memory");
            out->n++;
        }
        cJSON_Delete(cJSON_DetachItemViaPointer(files, f));
    }
    return HK_OK;
}

/* owned: text is freed as soon as cJSON has parsed it (7 MB less while a 100k-file list is copied) */
static int parse(hk_digest_list *out, char *owned, const char *text, size_t len, const char *what) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(owned);
    if (!root) return hk__fail(HK_ERR_PARSE, "%s/metadata.json is not valid JSON", what);
    cJSON *dg = cJSON_GetObjectItemCaseSensitive(root, "digest");
    if (!cJSON_IsObject(dg)) { /* no digest: has_digest stays false */
        cJSON_Delete(root);
        return HK_OK;
    }
    out->has_digest = true;
    cJSON *files = cJSON_GetObjectItemCaseSensitive(dg, "files");
    out->has_files = cJSON_IsObject(files);
    const char *alg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dg, "algorithm"));
    bool known = alg && (strcmp(alg, "sha256") == 0 || strcmp(alg, "sha512") == 0);
    if (known) out->kind = strcmp(alg, "sha256") == 0 ? HK_HASH_SHA256 : HK_HASH_SHA512;
    int rc = out->has_files ? take_files(out, files) : HK_OK;
    if (out->n) qsort(out->e, out->n, sizeof *out->e, cmp_entry); /* sorted even when refused: the stray scan reads it */
    if (rc == HK_OK && !known)
        rc = hk__fail(HK_ERR_DIGEST, "%s: AlgorithmMismatch: unknown digest algorithm '%s'", what, alg ? alg : "(none)");
    cJSON_Delete(root);
    if (rc) return rc;
    if (!out->has_files) return hk__fail(HK_ERR_DIGEST, "%s: metadata.json digest has no files object", what);
    /* a name listed twice has two expectations for one file: no honest build writes that */
    for (size_t i = 1; i < out->n; i++)
        if (strcmp(out->e[i - 1].rel, out->e[i].rel) == 0)
            return hk__fail(HK_ERR_DIGEST, "%s: metadata.json digest lists %s twice", what, out->e[i].rel);
    return HK_OK;
}

int hk__digest_list_parse(hk_digest_list *out, const char *text, size_t len, const char *what) {
    return parse(out, NULL, text, len, what);
}

int hk__digest_list_parse_owned(hk_digest_list *out, char *text, size_t len, const char *what) {
    return parse(out, text, text, len, what);
}

const hk_digest_entry *hk__digest_list_find(const hk_digest_list *l, const char *rel) {
    if (!l->n) return NULL;
    hk_digest_entry key = {rel, NULL};
    return bsearch(&key, l->e, l->n, sizeof *l->e, cmp_entry);
}

void hk__digest_list_free(hk_digest_list *l) {
    free(l->e);
    hk__arena_free(&l->strs);
    memset(l, 0, sizeof *l);
}
