/* The log entry's body must describe this bundle: a hashedrekord whose artifact digest,
 * signature and certificate are the bundle's (CVE-2022-36056: a valid entry for another
 * signature must not vouch for this one). Compared field by field as sigstore-python compares its
 * models. v0.0.1 (Rekor v1): digest as lowercase hex, signature as standard base64, certificate as
 * base64 of its PEM (string equality). v0.0.2 (Rekor v2): SHA2_256 digest, signature and DER
 * certificate compared as decoded bytes, keyDetails named after the certificate's key. With a
 * managed key, the entry's public key is compared as a decoded SubjectPublicKeyInfo. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

static const cJSON *path(const cJSON *o, const char *a, const char *b, const char *c) {
    o = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) o = cJSON_GetObjectItemCaseSensitive(o, b);
    if (c) o = cJSON_GetObjectItemCaseSensitive(o, c);
    return o;
}

static char *leaf_pem_b64(X509 *leaf) {
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (bio && PEM_write_bio_X509(bio, leaf) == 1) {
        char *pem = NULL;
        long n = BIO_get_mem_data(bio, &pem);
        if (n > 0) out = hk__sg_b64_encode((const unsigned char *)pem, (size_t)n);
    }
    BIO_free(bio);
    return out;
}

static bool b64_equals(const char *s, const unsigned char *want, size_t want_len) {
    hk_sg_bytes got;
    if (!s || !hk__sg_b64_decode(&got, s)) return false;
    bool eq = got.len == want_len && memcmp(got.data, want, want_len) == 0;
    free(got.data);
    return eq;
}

bool hk__sg_verifier_matches(const char *b64_pem, const hk_sg_signer *s, bool exact) {
    if (!b64_pem) return false;
    if (s->leaf && exact) {
        char *mine = leaf_pem_b64(s->leaf);
        bool eq = mine && strcmp(mine, b64_pem) == 0;
        free(mine);
        return eq;
    }
    hk_sg_bytes pem;
    if (!hk__sg_b64_decode(&pem, b64_pem)) return false;
    BIO *bio = pem.len <= INT32_MAX ? BIO_new_mem_buf(pem.data, (int)pem.len) : NULL;
    bool eq = false;
    if (bio && s->leaf) {
        X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        eq = x && X509_cmp(x, s->leaf) == 0;
        X509_free(x);
    } else if (bio) {
        EVP_PKEY *k = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
        eq = hk__sg_same_pubkey(k, s->key);
        EVP_PKEY_free(k);
    }
    BIO_free(bio);
    free(pem.data);
    ERR_clear_error();
    return eq;
}

static bool v002_verifier_matches(const cJSON *verifier, const hk_sg_signer *s) {
    char *details = hk__sg_key_details(s->key);
    const char *kd = hk__sg_json_str(verifier, "keyDetails");
    bool ok = details && kd && strcmp(kd, details) == 0;
    free(details);
    if (!ok) return false;
    unsigned char *der = NULL;
    int der_len = s->leaf ? i2d_X509(s->leaf, &der) : i2d_PUBKEY(s->key, &der);
    const char *field = s->leaf ? "x509Certificate" : "publicKey";
    ok = der_len > 0 && b64_equals(hk__sg_json_str(path(verifier, field, NULL, NULL), "rawBytes"), der, (size_t)der_len);
    OPENSSL_free(der);
    return ok;
}

int hk__sg_check_body_v002(const hk_sg_bundle *b, const hk_sg_signer *s, const char *alg, const unsigned char *digest,
                          size_t digest_len, const hk_sg_bytes *sig, char **why) {
    cJSON *doc = NULL;
    const char *what = NULL;
    if (hk__sg_json_parse(&doc, (const char *)b->body.data, b->body.len, &what) == HK_OK) what = NULL;
    const cJSON *spec = path(doc, "spec", "hashedRekordV002", NULL);
    const cJSON *data = path(spec, "data", NULL, NULL);
    if (what)
        ; /* not exact JSON: said by `what` */
    else if (!cJSON_IsObject(doc) || !hk__sg_json_str(doc, "kind") || strcmp(hk__sg_json_str(doc, "kind"), "hashedrekord") != 0 ||
        !hk__sg_json_str(doc, "apiVersion") || strcmp(hk__sg_json_str(doc, "apiVersion"), "0.0.2") != 0 || !spec)
        what = "body is not a hashedrekord 0.0.2";
    else if (!alg || !hk__sg_json_str(data, "algorithm") || strcmp(hk__sg_json_str(data, "algorithm"), alg) != 0 ||
             !b64_equals(hk__sg_json_str(data, "digest"), digest, digest_len))
        what = b->is_dsse ? "its digest differs from the envelope's PAE digest" : "its artifact digest differs";
    else if (!b64_equals(hk__sg_json_str(path(spec, "signature", NULL, NULL), "content"), sig->data, sig->len))
        what = "its signature differs";
    else if (!v002_verifier_matches(path(spec, "signature", "verifier", NULL), s))
        what = s->leaf ? "its certificate differs" : "its public key differs";
    cJSON_Delete(doc);
    if (what) {
        *why = hk__asprintf("transparency log entry is inconsistent with the bundle: %s", what);
        return -1;
    }
    return 0;
}

int hk__sg_check_body(const hk_sg_bundle *b, const hk_sg_signer *s, const unsigned char digest[32], char **why) {
    if (strcmp(b->kind, "hashedrekord") != 0) {
        *why = hk__asprintf("expected entry type hashedrekord, got %s", b->kind);
        return -1;
    }
    if (strcmp(b->kind_version, "0.0.2") == 0) return hk__sg_check_body_v002(b, s, "SHA2_256", digest, 32, &b->signature, why);
    if (strcmp(b->kind_version, "0.0.1") != 0) {
        *why = hk__asprintf("unsupported hashedrekord version %s", b->kind_version);
        return -1;
    }
    cJSON *doc = NULL;
    const char *what = NULL;
    if (hk__sg_json_parse(&doc, (const char *)b->body.data, b->body.len, &what) == HK_OK) what = NULL;
    char *sig64 = hk__sg_b64_encode(b->signature.data, b->signature.len);
    char hex[65];
    hk__hex(hex, digest, 32);
    if (what)
        ; /* not exact JSON: said by `what` */
    else if (!cJSON_IsObject(doc)) what = "body is not JSON";
    else if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "kind")) ||
             strcmp(hk__sg_json_str(doc, "kind"), "hashedrekord") != 0 ||
             !hk__sg_json_str(doc, "apiVersion") || strcmp(hk__sg_json_str(doc, "apiVersion"), "0.0.1") != 0)
        what = "body is not a hashedrekord 0.0.1";
    else {
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(doc, "spec");
        const char *alg = hk__sg_json_str(path(spec, "data", "hash", NULL), "algorithm");
        const char *val = hk__sg_json_str(path(spec, "data", "hash", NULL), "value");
        const char *sc = hk__sg_json_str(path(spec, "signature", NULL, NULL), "content");
        const char *pk = hk__sg_json_str(path(spec, "signature", "publicKey", NULL), "content");
        if (!alg || strcmp(alg, "sha256") != 0 || !val || strcmp(val, hex) != 0)
            what = "its artifact digest differs";
        else if (!sc || !sig64 || strcmp(sc, sig64) != 0)
            what = "its signature differs";
        else if (!hk__sg_verifier_matches(pk, s, true))
            what = s->leaf ? "its certificate differs" : "its public key differs";
    }
    cJSON_Delete(doc);
    free(sig64);
    if (what) {
        *why = hk__asprintf("transparency log entry is inconsistent with the bundle: %s", what);
        return -1;
    }
    return 0;
}
