/* The log entry's body must describe this bundle: a hashedrekord whose artifact digest,
 * signature and certificate are the bundle's (CVE-2022-36056: a valid entry for another
 * signature must not vouch for this one). Compared field by field as sigstore-python compares its
 * models. v0.0.1 (Rekor v1): digest as lowercase hex, signature as standard base64, certificate as
 * base64 of its PEM (string equality). v0.0.2 (Rekor v2): SHA2_256 digest, signature and DER
 * certificate compared as decoded bytes, keyDetails named after the certificate's key. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

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

/* protobuf-specs PublicKeyDetails of the certificate's key, as sigstore-python names it. */
static char *key_details(X509 *leaf) {
    EVP_PKEY *pk = X509_get0_pubkey(leaf);
    int type = pk ? EVP_PKEY_get_base_id(pk) : 0;
    if (type == EVP_PKEY_ED25519) return hk__strdup("PKIX_ED25519");
    if (type == EVP_PKEY_RSA) return hk__asprintf("PKIX_RSA_PKCS1V15_%d_SHA256", EVP_PKEY_get_bits(pk));
    if (type == EVP_PKEY_EC) {
        int bits = EVP_PKEY_get_bits(pk);
        if (bits == 256) return hk__strdup("PKIX_ECDSA_P256_SHA_256");
        if (bits == 384) return hk__strdup("PKIX_ECDSA_P384_SHA_384");
        if (bits == 521) return hk__strdup("PKIX_ECDSA_P521_SHA_512");
    }
    return NULL;
}

static int check_v002(const hk_sg_bundle *b, const unsigned char digest[32], char **why) {
    cJSON *doc = cJSON_ParseWithLength((const char *)b->body.data, b->body.len);
    unsigned char *der = NULL;
    int der_len = i2d_X509(b->leaf, &der);
    char *details = key_details(b->leaf);
    const char *what = NULL;
    const cJSON *spec = path(doc, "spec", "hashedRekordV002", NULL);
    const cJSON *verifier = path(spec, "signature", "verifier", NULL);
    if (!cJSON_IsObject(doc) || !hk__sg_json_str(doc, "kind") || strcmp(hk__sg_json_str(doc, "kind"), "hashedrekord") != 0 ||
        !hk__sg_json_str(doc, "apiVersion") || strcmp(hk__sg_json_str(doc, "apiVersion"), "0.0.2") != 0 || !spec)
        what = "body is not a hashedrekord 0.0.2";
    else if (!hk__sg_json_str(path(spec, "data", NULL, NULL), "algorithm") ||
             strcmp(hk__sg_json_str(path(spec, "data", NULL, NULL), "algorithm"), "SHA2_256") != 0 ||
             !b64_equals(hk__sg_json_str(path(spec, "data", NULL, NULL), "digest"), digest, 32))
        what = "its artifact digest differs";
    else if (!b64_equals(hk__sg_json_str(path(spec, "signature", NULL, NULL), "content"), b->signature.data, b->signature.len))
        what = "its signature differs";
    else if (der_len <= 0 ||
             !b64_equals(hk__sg_json_str(path(verifier, "x509Certificate", NULL, NULL), "rawBytes"), der, (size_t)der_len) ||
             !details || !hk__sg_json_str(verifier, "keyDetails") || strcmp(hk__sg_json_str(verifier, "keyDetails"), details) != 0)
        what = "its certificate differs";
    cJSON_Delete(doc);
    OPENSSL_free(der);
    free(details);
    if (what) {
        *why = hk__asprintf("transparency log entry is inconsistent with the bundle: %s", what);
        return -1;
    }
    return 0;
}

int hk__sg_check_body(const hk_sg_bundle *b, const unsigned char digest[32], char **why) {
    if (strcmp(b->kind, "hashedrekord") != 0) {
        *why = hk__asprintf("expected entry type hashedrekord, got %s", b->kind);
        return -1;
    }
    if (strcmp(b->kind_version, "0.0.2") == 0) return check_v002(b, digest, why);
    if (strcmp(b->kind_version, "0.0.1") != 0) {
        *why = hk__asprintf("unsupported hashedrekord version %s", b->kind_version);
        return -1;
    }
    cJSON *doc = cJSON_ParseWithLength((const char *)b->body.data, b->body.len);
    char *sig64 = hk__sg_b64_encode(b->signature.data, b->signature.len);
    char *cert64 = leaf_pem_b64(b->leaf);
    char hex[65];
    hk__hex(hex, digest, 32);
    const char *what = NULL;
    if (!cJSON_IsObject(doc)) what = "body is not JSON";
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
        else if (!pk || !cert64 || strcmp(pk, cert64) != 0)
            what = "its certificate differs";
    }
    cJSON_Delete(doc);
    free(sig64);
    free(cert64);
    if (what) {
        *why = hk__asprintf("transparency log entry is inconsistent with the bundle: %s", what);
        return -1;
    }
    return 0;
}
