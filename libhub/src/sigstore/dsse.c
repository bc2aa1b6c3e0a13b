/* DSSE bundles (dsseEnvelope instead of messageSignature): what sigstore-conformance's in-toto
 * cases and `cosign attest` produce. Three checks, each after the certificate/log checks of
 * verify.c, in sigstore-python's order:
 *   - the envelope's one signature verifies over PAE(payloadType, payload) =
 *     "DSSEv1" SP len(type) SP type SP len(payload) SP payload (lengths in ASCII decimal);
 *   - the log entry describes this envelope (CVE-2022-36056 class): Rekor v1 `dsse` 0.0.1 (payload
 *     hash + signature + verifier; its envelope hash covers uncanonicalized JSON and cannot be
 *     checked), Rekor v1 `intoto` 0.0.2 (the envelope itself, doubly base64-encoded, + payload
 *     hash), Rekor v2 `hashedrekord` 0.0.2 (digest of the PAE + signature + verifier);
 *   - the payload is an in-toto Statement v1 (application/vnd.in-toto+json) with a subject whose
 *     sha256 is the artifact's (its name is not checked, as in sigstore-python). */
#include "sigstore/sg_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#define INTOTO_TYPE "application/vnd.in-toto+json"
#define STATEMENT_V1 "https://in-toto.io/Statement/v1"

static int fail(char **why, char *msg) {
    *why = msg ? msg : hk__strdup("out of memory");
    return -1;
}

static const cJSON *get(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* PAE(type, payload); caller frees. */
static unsigned char *pae(const hk_sg_bundle *b, size_t *out_len) {
    char head[96];
    size_t tlen = strlen(b->dsse_type);
    int n = snprintf(head, sizeof head, "DSSEv1 %zu ", tlen);
    char mid[32];
    int m = snprintf(mid, sizeof mid, " %zu ", b->dsse_payload.len);
    if (n <= 0 || m <= 0) return NULL;
    size_t len = (size_t)n + tlen + (size_t)m + b->dsse_payload.len;
    unsigned char *out = malloc(len ? len : 1);
    if (!out) return NULL;
    unsigned char *p = out;
    memcpy(p, head, (size_t)n);
    p += n;
    memcpy(p, b->dsse_type, tlen);
    p += tlen;
    memcpy(p, mid, (size_t)m);
    p += m;
    if (b->dsse_payload.len) memcpy(p, b->dsse_payload.data, b->dsse_payload.len);
    *out_len = len;
    return out;
}

int hk__sg_check_dsse_signature(const hk_sg_bundle *b, const hk_sg_signer *s, char **why) {
    int type = s->key ? EVP_PKEY_get_base_id(s->key) : 0;
    const EVP_MD *md = type == EVP_PKEY_ED25519 ? NULL : hk__sg_key_md(s->key);
    if (type != EVP_PKEY_ED25519 && !md) return fail(why, hk__strdup("signing key has an unsupported type"));
    /* hk__sg_key_md names the prehash of hashedrekord entries; DSSE signs the PAE itself with
     * the same hash (sigstore-go's rule; sigstore-python always uses SHA-256, the same for P-256) */
    size_t len = 0;
    unsigned char *msg = pae(b, &len);
    if (!msg) return fail(why, NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, md, NULL, s->key) == 1 &&
              EVP_DigestVerify(ctx, b->signature.data, b->signature.len, msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    free(msg);
    ERR_clear_error();
    return ok ? 0 : fail(why, hk__strdup("DSSE envelope signature is invalid"));
}

static const char *md_name(const EVP_MD *md) {
    if (md == EVP_sha256()) return "SHA2_256";
    if (md == EVP_sha384()) return "SHA2_384";
    if (md == EVP_sha512()) return "SHA2_512";
    return NULL;
}

/* Rekor v2: hashedrekord over Hash(PAE), the hash being the signing algorithm's prehash. */
static int body_hashedrekord_v002(const hk_sg_bundle *b, const hk_sg_signer *s, char **why) {
    const EVP_MD *md = hk__sg_key_md(s->key);
    if (!md || !md_name(md))
        return fail(why, hk__strdup("signing key has no prehash; it cannot be logged as a hashedrekord entry"));
    size_t len = 0;
    unsigned char *msg = pae(b, &len);
    if (!msg) return fail(why, NULL);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    bool ok = EVP_Digest(msg, len, digest, &dlen, md, NULL) == 1;
    free(msg);
    if (!ok) return fail(why, hk__strdup("cannot hash the DSSE envelope"));
    return hk__sg_check_body_v002(b, s, md_name(md), digest, dlen, &b->signature, why);
}

static bool hex_sha256_is(const cJSON *hash, const hk_sg_bytes *data) {
    const char *alg = hk__sg_json_str(hash, "algorithm"), *val = hk__sg_json_str(hash, "value");
    unsigned char d[32];
    char hex[65];
    hk__sg_sha256(d, data->data ? (const void *)data->data : "", data->len);
    hk__hex(hex, d, 32);
    return alg && strcmp(alg, "sha256") == 0 && val && strcmp(val, hex) == 0;
}

/* Rekor v1 dsse 0.0.1: compared as sigstore-python compares its models (strings). */
static const char *body_dsse_v001(const hk_sg_bundle *b, const hk_sg_signer *s, const cJSON *spec) {
    if (!hex_sha256_is(get(spec, "payloadHash"), &b->dsse_payload)) return "its payload hash differs";
    const cJSON *sigs = get(spec, "signatures");
    if (!cJSON_IsArray(sigs) || cJSON_GetArraySize(sigs) != 1) return "it does not hold exactly the envelope's one signature";
    const cJSON *sig = cJSON_GetArrayItem(sigs, 0);
    char *sig64 = hk__sg_b64_encode(b->signature.data, b->signature.len);
    const char *got = hk__sg_json_str(sig, "signature");
    bool same = sig64 && got && strcmp(sig64, got) == 0;
    free(sig64);
    if (!same) return "its signature differs";
    if (!hk__sg_verifier_matches(hk__sg_json_str(sig, "verifier"), s, true))
        return s->leaf ? "its certificate differs" : "its public key differs";
    return NULL;
}

/* base64(base64(want)) == s: intoto 0.0.2 stores the envelope's base64 fields base64-encoded. */
static bool b64b64_equals(const char *s, const hk_sg_bytes *want) {
    hk_sg_bytes outer = {0}, inner = {0};
    bool eq = false;
    if (s && hk__sg_b64_decode(&outer, s)) {
        char *text = hk__strndup((const char *)outer.data, outer.len);
        eq = text && strlen(text) == outer.len && hk__sg_b64_decode(&inner, text) && inner.len == want->len &&
             (want->len == 0 || memcmp(inner.data, want->data, want->len) == 0);
        free(text);
    }
    free(outer.data);
    free(inner.data);
    return eq;
}

/* Rekor v1 intoto 0.0.2: the logged envelope is this one (the certificate compared decoded:
 * Rekor re-encodes its PEM). */
static const char *body_intoto_v002(const hk_sg_bundle *b, const hk_sg_signer *s, const cJSON *spec) {
    const cJSON *content = get(spec, "content");
    const cJSON *env = get(content, "envelope");
    if (!hex_sha256_is(get(content, "payloadHash"), &b->dsse_payload)) return "its payload hash differs";
    const char *type = hk__sg_json_str(env, "payloadType");
    if (!type || strcmp(type, b->dsse_type) != 0) return "its payload type differs";
    const cJSON *payload = get(env, "payload");
    if (payload && !b64b64_equals(cJSON_IsString(payload) ? payload->valuestring : NULL, &b->dsse_payload))
        return "its payload differs";
    const cJSON *sigs = get(env, "signatures");
    if (!cJSON_IsArray(sigs) || cJSON_GetArraySize(sigs) != 1) return "it does not hold exactly the envelope's one signature";
    const cJSON *sig = cJSON_GetArrayItem(sigs, 0);
    if (!b64b64_equals(hk__sg_json_str(sig, "sig"), &b->signature)) return "its signature differs";
    if (!hk__sg_verifier_matches(hk__sg_json_str(sig, "publicKey"), s, false))
        return s->leaf ? "its certificate differs" : "its public key differs";
    return NULL;
}

int hk__sg_check_dsse_body(const hk_sg_bundle *b, const hk_sg_signer *s, char **why) {
    if (strcmp(b->kind, "hashedrekord") == 0 && strcmp(b->kind_version, "0.0.2") == 0)
        return body_hashedrekord_v002(b, s, why);
    bool dsse = strcmp(b->kind, "dsse") == 0 && strcmp(b->kind_version, "0.0.1") == 0;
    bool intoto = strcmp(b->kind, "intoto") == 0 && strcmp(b->kind_version, "0.0.2") == 0;
    if (!dsse && !intoto)
        return fail(why, hk__asprintf("unsupported DSSE log entry type: %s/%s", b->kind, b->kind_version));
    cJSON *doc = NULL;
    const char *jwhy = NULL;
    hk__sg_json_parse(&doc, (const char *)b->body.data, b->body.len, &jwhy);
    const char *kind = hk__sg_json_str(doc, "kind"), *api = hk__sg_json_str(doc, "apiVersion");
    const char *what;
    if (!doc)
        what = jwhy;
    else if (!cJSON_IsObject(doc) || !kind || strcmp(kind, b->kind) != 0 || !api || strcmp(api, b->kind_version) != 0 ||
        !cJSON_IsObject(get(doc, "spec")))
        what = "its body is not the entry kind it claims";
    else
        what = dsse ? body_dsse_v001(b, s, get(doc, "spec")) : body_intoto_v002(b, s, get(doc, "spec"));
    cJSON_Delete(doc);
    if (what) return fail(why, hk__asprintf("transparency log entry is inconsistent with the DSSE envelope: %s", what));
    return 0;
}

int hk__sg_check_intoto_subject(const hk_sg_bundle *b, const unsigned char digest[32], char **why) {
    if (strcmp(b->dsse_type, INTOTO_TYPE) != 0)
        return fail(why, hk__asprintf("DSSE payload type %s is not an in-toto statement (" INTOTO_TYPE
                                     "); only in-toto statements are verified", b->dsse_type));
    cJSON *st = NULL;
    const char *jwhy = NULL;
    int rc = -1;
    if (hk__sg_json_parse(&st, (const char *)b->dsse_payload.data, b->dsse_payload.len, &jwhy) != HK_OK) {
        fail(why, hk__asprintf("malformed in-toto statement: %s", jwhy));
        goto done;
    }
    const char *type = hk__sg_json_str(st, "_type");
    const cJSON *subjects = get(st, "subject");
    if (!cJSON_IsObject(st) || !type || strcmp(type, STATEMENT_V1) != 0 || !cJSON_IsString(get(st, "predicateType")) ||
        !cJSON_IsArray(subjects) || cJSON_GetArraySize(subjects) == 0) {
        fail(why, hk__strdup("malformed in-toto statement: expected an " STATEMENT_V1
                             " with a predicateType and at least one subject"));
        goto done;
    }
    char hex[65];
    hk__hex(hex, digest, 32);
    const cJSON *sub;
    cJSON_ArrayForEach(sub, subjects) {
        const cJSON *set = get(sub, "digest");
        if (!cJSON_IsObject(sub) || !cJSON_IsObject(set)) {
            fail(why, hk__strdup("malformed in-toto statement: a subject has no digest set"));
            goto done;
        }
        const char *sha = hk__sg_json_str(set, "sha256");
        if (sha && strcmp(sha, hex) == 0) rc = 0;
    }
    if (rc != 0) fail(why, hk__asprintf("in-toto statement has no subject for digest %s", hex));
done:
    cJSON_Delete(st);
    return rc;
}
