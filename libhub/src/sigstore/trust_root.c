/* trusted_root.json (application/vnd.dev.sigstore.trustedroot+json;version=0.1): Fulcio CAs, Rekor
 * logs, CT logs and timestamp authorities, each with its validity window. A key or CA this build
 * cannot use (unknown keyDetails) is skipped, as sigstore-python does; an entry that is malformed
 * makes the whole file malformed. */
#include "sigstore/sg_impl.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/vec.h"

#define TRUST_ROOT_MEDIA "application/vnd.dev.sigstore.trustedroot+json;version=0.1"

static int bad(const char *what) {
    return hk__fail(HK_ERR_PARSE, "trusted root: %s", what);
}

static int parse_window(int64_t *start, int64_t *end, const cJSON *valid_for) {
    *start = INT64_MIN;
    *end = INT64_MAX;
    if (!valid_for) return HK_OK;
    if (!cJSON_IsObject(valid_for)) return bad("validFor is not an object");
    const char *s = hk__sg_json_str(valid_for, "start"), *e = hk__sg_json_str(valid_for, "end");
    /* a validity range must say when it starts (the protobuf-specs TimeRange; sigstore-conformance
     * trust-root-tlog-missing-validity-start_fail): an open start would trust the key for all past time */
    if (!s) return bad("validFor has no start");
    if (!hk__sg_parse_rfc3339(start, s)) return bad("validFor.start is not an RFC 3339 time");
    if (e && !hk__sg_parse_rfc3339(end, e)) return bad("validFor.end is not an RFC 3339 time");
    return HK_OK;
}

static int parse_logs(hk_sg_key **out, size_t *count, const cJSON *arr, const char *what) {
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    if (!arr) return HK_OK;
    if (!cJSON_IsArray(arr)) return hk__fail(HK_ERR_PARSE, "trusted root: %s is not an array", what);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(it, "publicKey");
        const char *raw = hk__sg_json_str(pk, "rawBytes");
        const char *details = hk__sg_json_str(pk, "keyDetails");
        if (!raw) return hk__fail(HK_ERR_PARSE, "trusted root: %s entry without publicKey.rawBytes", what);
        hk_sg_bytes der;
        if (!hk__sg_b64_decode(&der, raw))
            return hk__fail(HK_ERR_PARSE, "trusted root: %s publicKey.rawBytes is not base64", what);
        hk_sg_key key;
        bool ok = hk__sg_key_load(&key, details, der.data, der.len);
        free(der.data);
        if (!ok) continue; /* unsupported key type: unusable, not fatal */
        if (parse_window(&key.start, &key.end, cJSON_GetObjectItemCaseSensitive(pk, "validFor")) != HK_OK) {
            hk__sg_key_clear(&key);
            return HK_ERR_PARSE;
        }
        key.name = hk__strdup(hk__sg_json_str(it, "baseUrl"));
        if (HK_VEC_RESERVE(*out, cap, *count + 1) != HK_OK) {
            hk__sg_key_clear(&key);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        (*out)[(*count)++] = key;
    }
    return HK_OK;
}

static void ca_clear(hk_sg_ca *ca) {
    for (size_t i = 0; i < ca->ncerts; i++) X509_free(ca->certs[i]);
    free(ca->certs);
    free(ca->uri);
}

static int parse_cas(hk_sg_ca **out, size_t *count, const cJSON *arr, const char *what) {
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    if (!arr) return HK_OK;
    if (!cJSON_IsArray(arr)) return hk__fail(HK_ERR_PARSE, "trusted root: %s is not an array", what);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        hk_sg_ca ca = {0};
        size_t ccap = 0;
        const cJSON *certs =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(it, "certChain"), "certificates");
        if (!cJSON_IsArray(certs) || cJSON_GetArraySize(certs) == 0)
            return hk__fail(HK_ERR_PARSE, "trusted root: %s entry without certChain.certificates", what);
        const cJSON *c;
        cJSON_ArrayForEach(c, certs) {
            hk_sg_bytes der;
            if (!hk__sg_b64_decode(&der, hk__sg_json_str(c, "rawBytes"))) {
                ca_clear(&ca);
                return hk__fail(HK_ERR_PARSE, "trusted root: %s certificate rawBytes is not base64", what);
            }
            const unsigned char *p = der.data;
            X509 *x = d2i_X509(NULL, &p, (long)der.len);
            bool whole = x && p == der.data + der.len;
            free(der.data);
            if (!whole || HK_VEC_RESERVE(ca.certs, ccap, ca.ncerts + 1) != HK_OK) {
                X509_free(x);
                ca_clear(&ca);
                return hk__fail(HK_ERR_PARSE, "trusted root: %s certificate is not DER X.509", what);
            }
            /* OpenSSL fills a certificate's extension cache (key ids, flags) on first use, and
             * 3.0 checks whether it is filled without the lock: filled here, before the root is
             * shared, threads verifying with it only read */
            X509_check_purpose(x, -1, 0);
            ERR_clear_error();
            ca.certs[ca.ncerts++] = x;
        }
        if (parse_window(&ca.start, &ca.end, cJSON_GetObjectItemCaseSensitive(it, "validFor")) != HK_OK) {
            ca_clear(&ca);
            return HK_ERR_PARSE;
        }
        ca.uri = hk__strdup(hk__sg_json_str(it, "uri"));
        if (HK_VEC_RESERVE(*out, cap, *count + 1) != HK_OK) {
            ca_clear(&ca);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        (*out)[(*count)++] = ca;
    }
    return HK_OK;
}

/* The process memo: parsing a root (a dozen certificates and keys) costs as much as verifying a
 * bundle, and every hub handle reads the same file. Keyed by the SHA-256 of the bytes, so a file
 * replaced in place is parsed again; a few entries, the oldest dropped first. */
#define MEMO_MAX 8

static pthread_mutex_t g_memo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    unsigned char sha[32];
    hk_sigstore_trust_root *root;
} g_memo[MEMO_MAX];
static size_t g_nmemo;

static void root_destroy(hk_sigstore_trust_root *r) {
    for (size_t i = 0; i < r->ntlogs; i++) hk__sg_key_clear(&r->tlogs[i]);
    for (size_t i = 0; i < r->nctlogs; i++) hk__sg_key_clear(&r->ctlogs[i]);
    for (size_t i = 0; i < r->ncas; i++) ca_clear(&r->cas[i]);
    for (size_t i = 0; i < r->ntsas; i++) ca_clear(&r->tsas[i]);
    free(r->tlogs);
    free(r->ctlogs);
    free(r->cas);
    free(r->tsas);
    free(r);
}

/* Drop one reference; true when it was the last (the caller destroys the root, outside the lock). */
static bool unref_locked(hk_sigstore_trust_root *r) {
    return --r->refs == 0;
}

void hk__sigstore_trust_root_free(hk_sigstore_trust_root *r) {
    if (!r) return;
    pthread_mutex_lock(&g_memo_lock);
    bool last = unref_locked(r);
    pthread_mutex_unlock(&g_memo_lock);
    if (last) root_destroy(r);
}

void hk__sigstore_trust_root_memo_clear(void) {
    hk_sigstore_trust_root *dead[MEMO_MAX];
    size_t ndead = 0;
    pthread_mutex_lock(&g_memo_lock);
    for (size_t i = 0; i < g_nmemo; i++)
        if (unref_locked(g_memo[i].root)) dead[ndead++] = g_memo[i].root;
    g_nmemo = 0;
    pthread_mutex_unlock(&g_memo_lock);
    for (size_t i = 0; i < ndead; i++) root_destroy(dead[i]);
}

/* A reference to the memo's root of these bytes, or NULL. */
static hk_sigstore_trust_root *memo_get(const unsigned char sha[32]) {
    hk_sigstore_trust_root *r = NULL;
    pthread_mutex_lock(&g_memo_lock);
    for (size_t i = 0; i < g_nmemo && !r; i++)
        if (memcmp(g_memo[i].sha, sha, 32) == 0) r = g_memo[i].root;
    if (r) r->refs++;
    pthread_mutex_unlock(&g_memo_lock);
    return r;
}

/* Remember a freshly parsed root (refs 1, the caller's); returns the root the caller gets: another
 * thread may have put the same bytes in first, and then that one is used and `r` destroyed. */
static hk_sigstore_trust_root *memo_put(const unsigned char sha[32], hk_sigstore_trust_root *r) {
    hk_sigstore_trust_root *dead = NULL, *have = NULL;
    pthread_mutex_lock(&g_memo_lock);
    for (size_t i = 0; i < g_nmemo && !have; i++)
        if (memcmp(g_memo[i].sha, sha, 32) == 0) have = g_memo[i].root;
    if (have) {
        have->refs++;
        dead = r;
        r = have;
    } else {
        if (g_nmemo == MEMO_MAX) {
            if (unref_locked(g_memo[0].root)) dead = g_memo[0].root;
            memmove(&g_memo[0], &g_memo[1], (MEMO_MAX - 1) * sizeof g_memo[0]);
            g_nmemo--;
        }
        memcpy(g_memo[g_nmemo].sha, sha, 32);
        g_memo[g_nmemo++].root = r;
        r->refs++;
    }
    pthread_mutex_unlock(&g_memo_lock);
    if (dead) root_destroy(dead);
    return r;
}

static int root_parse(hk_sigstore_trust_root **out, const char *json, size_t len) {
    *out = NULL;
    cJSON *doc = NULL;
    const char *why = NULL;
    int prc = hk__sg_json_parse(&doc, json, len, &why);
    if (prc == HK_ERR_NOMEM) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (prc != HK_OK) return bad(why);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return bad("not a JSON object");
    }
    const char *media = hk__sg_json_str(doc, "mediaType");
    if (!media || strcmp(media, TRUST_ROOT_MEDIA) != 0) {
        int rc = hk__fail(HK_ERR_PARSE, "trusted root: unsupported mediaType %s", media ? media : "(none)");
        cJSON_Delete(doc);
        return rc;
    }
    hk_sigstore_trust_root *r = calloc(1, sizeof *r);
    if (!r) {
        cJSON_Delete(doc);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    r->refs = 1;
    int rc = parse_logs(&r->tlogs, &r->ntlogs, cJSON_GetObjectItemCaseSensitive(doc, "tlogs"), "tlogs");
    if (rc == HK_OK)
        rc = parse_logs(&r->ctlogs, &r->nctlogs, cJSON_GetObjectItemCaseSensitive(doc, "ctlogs"), "ctlogs");
    if (rc == HK_OK)
        rc = parse_cas(&r->cas, &r->ncas, cJSON_GetObjectItemCaseSensitive(doc, "certificateAuthorities"),
                       "certificateAuthorities");
    if (rc == HK_OK)
        rc = parse_cas(&r->tsas, &r->ntsas, cJSON_GetObjectItemCaseSensitive(doc, "timestampAuthorities"),
                       "timestampAuthorities");
    cJSON_Delete(doc);
    if (rc == HK_OK && (r->ntlogs == 0 || r->ncas == 0))
        rc = bad(r->ntlogs == 0 ? "no usable transparency log key" : "no certificate authority");
    if (rc != HK_OK) {
        root_destroy(r);
        return rc;
    }
    *out = r;
    return HK_OK;
}

int hk__sigstore_trust_root_parse(hk_sigstore_trust_root **out, const char *json, size_t len) {
    *out = NULL;
    if (!json) return hk__fail(HK_ERR_INVALID_ARG, "trusted root: no text");
    unsigned char sha[32];
    unsigned int n = sizeof sha;
    if (EVP_Digest(json, len, sha, &n, EVP_sha256(), NULL) != 1) { /* no key: parsed, not remembered */
        ERR_clear_error();
        return root_parse(out, json, len);
    }
    if ((*out = memo_get(sha))) return HK_OK;
    hk_sigstore_trust_root *r = NULL;
    int rc = root_parse(&r, json, len);
    if (rc == HK_OK) *out = memo_put(sha, r);
    return rc; /* a root that fails is not remembered: its message is made again each time */
}

int hk__sigstore_trust_root_load(hk_sigstore_trust_root **out, const char *path) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = hk__read_file(&text, &len, path, 16u << 20);
    if (rc != HK_OK) return hk__fail_context("loading trusted root %s", path);
    rc = hk__sigstore_trust_root_parse(out, text, len);
    free(text);
    if (rc != HK_OK) return hk__fail_context("%s", path);
    return HK_OK;
}
