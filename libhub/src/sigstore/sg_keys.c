/* Public keys of the trusted root (tlog, ctlog) and the keyring rule of sigstore-python: look a
 * key up by its RFC 6962 id, fall back to trying every key. */
#include "sigstore/sg_impl.h"

#include <string.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

bool hk__sg_spki_id(unsigned char out[32], EVP_PKEY *pkey) {
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(pkey, &der);
    if (n <= 0) return false;
    hk__sg_sha256(out, der, (size_t)n);
    OPENSSL_free(der);
    return true;
}

bool hk__sg_key_load(hk_sg_key *key, const char *details, const unsigned char *der, size_t len) {
    memset(key, 0, sizeof *key);
    key->end = INT64_MAX;
    if (!details || !der || len == 0) return false;
    const unsigned char *p = der;
    EVP_PKEY *pk = d2i_PUBKEY(NULL, &p, (long)len);
    if (!pk || p != der + len) {
        EVP_PKEY_free(pk);
        return false;
    }
    int type = EVP_PKEY_get_base_id(pk);
    bool ok = false;
    if (strncmp(details, "PKIX_ECDSA_P", 12) == 0 && type == EVP_PKEY_EC) {
        key->kind = HK_SG_KEY_ECDSA;
        char curve[64] = "";
        size_t cl = 0;
        EVP_PKEY_get_utf8_string_param(pk, "group", curve, sizeof curve, &cl);
        if (strcmp(details, "PKIX_ECDSA_P256_SHA_256") == 0 && strcmp(curve, "prime256v1") == 0) {
            key->md = EVP_sha256();
            ok = true;
        } else if (strcmp(details, "PKIX_ECDSA_P384_SHA_384") == 0 && strcmp(curve, "secp384r1") == 0) {
            key->md = EVP_sha384();
            ok = true;
        } else if (strcmp(details, "PKIX_ECDSA_P521_SHA_512") == 0 && strcmp(curve, "secp521r1") == 0) {
            key->md = EVP_sha512();
            ok = true;
        }
    } else if (strcmp(details, "PKIX_ED25519") == 0 && type == EVP_PKEY_ED25519) {
        key->kind = HK_SG_KEY_ED25519;
        ok = true;
    } else if ((strcmp(details, "PKCS1_RSA_PKCS1V5") == 0 ||
                (strncmp(details, "PKIX_RSA_PKCS1V15_", 18) == 0 && hk__str_ends_with(details, "_SHA256"))) &&
               type == EVP_PKEY_RSA) {
        key->kind = HK_SG_KEY_RSA;
        key->md = EVP_sha256();
        ok = true;
    }
    if (!ok || !hk__sg_spki_id(key->id, pk)) {
        EVP_PKEY_free(pk);
        return false;
    }
    key->pkey = pk;
    return true;
}

void hk__sg_key_clear(hk_sg_key *key) {
    EVP_PKEY_free(key->pkey);
    free(key->name);
    memset(key, 0, sizeof *key);
}

bool hk__sg_key_verify(const hk_sg_key *key, const unsigned char *sig, size_t sig_len,
                      const void *data, size_t len) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) return false;
    bool ok = EVP_DigestVerifyInit(ctx, NULL, key->kind == HK_SG_KEY_ED25519 ? NULL : key->md, NULL,
                                   key->pkey) == 1 &&
              EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

static bool key_valid_at(const hk_sg_key *k, int64_t when) {
    return when < 0 || (k->start <= when && when <= k->end);
}

const hk_sg_key *hk__sg_keyring_verify(const hk_sg_key *keys, size_t nkeys,
                                      const unsigned char *key_id, size_t key_id_len, int64_t when,
                                      const unsigned char *sig, size_t sig_len, const void *data,
                                      size_t len) {
    if (key_id && key_id_len == 32) {
        for (size_t i = 0; i < nkeys; i++)
            if (memcmp(keys[i].id, key_id, 32) == 0) {
                if (!key_valid_at(&keys[i], when)) return NULL;
                return hk__sg_key_verify(&keys[i], sig, sig_len, data, len) ? &keys[i] : NULL;
            }
    }
    for (size_t i = 0; i < nkeys; i++)
        if (key_valid_at(&keys[i], when) && hk__sg_key_verify(&keys[i], sig, sig_len, data, len))
            return &keys[i];
    return NULL;
}

char *hk__sg_key_details(EVP_PKEY *pk) {
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

const EVP_MD *hk__sg_key_md(EVP_PKEY *pk) {
    int type = pk ? EVP_PKEY_get_base_id(pk) : 0;
    if (type == EVP_PKEY_RSA) return EVP_sha256();
    if (type == EVP_PKEY_EC) {
        int bits = EVP_PKEY_get_bits(pk);
        return bits == 256 ? EVP_sha256() : bits == 384 ? EVP_sha384() : bits == 521 ? EVP_sha512() : NULL;
    }
    return NULL;
}

EVP_PKEY *hk__sg_pubkey_from_pem(const char *pem, size_t len) {
    if (!pem || len == 0 || len > INT32_MAX) return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *pk = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    ERR_clear_error();
    char curve[64] = "";
    size_t cl = 0;
    bool nist = pk && EVP_PKEY_get_base_id(pk) == EVP_PKEY_EC &&
                EVP_PKEY_get_utf8_string_param(pk, "group", curve, sizeof curve, &cl) == 1 &&
                (strcmp(curve, "prime256v1") == 0 || strcmp(curve, "secp384r1") == 0 || strcmp(curve, "secp521r1") == 0);
    ERR_clear_error();
    int type = pk ? EVP_PKEY_get_base_id(pk) : 0;
    if (pk && !(type == EVP_PKEY_ED25519 || type == EVP_PKEY_RSA || nist)) { /* a key Sigstore does not sign with */
        EVP_PKEY_free(pk);
        return NULL;
    }
    return pk;
}

bool hk__sg_same_pubkey(EVP_PKEY *a, EVP_PKEY *b) {
    unsigned char ia[32], ib[32];
    return a && b && hk__sg_spki_id(ia, a) && hk__sg_spki_id(ib, b) && memcmp(ia, ib, 32) == 0;
}
