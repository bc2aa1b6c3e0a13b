/* The signature over the artifact, with the signing certificate's key (or a managed key). cosign and sigstore-python
 * sign the SHA-256 digest (the one the hashedrekord entry records): ECDSA (P-256, P-384) and RSA
 * PKCS#1 v1.5 verify over that digest; Ed25519 signs the message itself, so it needs the bytes. */
#include "sigstore/sg_impl.h"

#include <openssl/err.h>
#include <openssl/rsa.h>

int hk__sg_check_signature(EVP_PKEY *pk, const hk_sg_bytes *sig, const unsigned char digest[32],
                          const void *artifact, size_t artifact_len, char **why) {
    int type = pk ? EVP_PKEY_get_base_id(pk) : 0;
    bool ok = false;
    if (type == EVP_PKEY_EC || type == EVP_PKEY_RSA) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(pk, NULL);
        ok = ctx && EVP_PKEY_verify_init(ctx) == 1 && EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 &&
             (type != EVP_PKEY_RSA || EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1) &&
             EVP_PKEY_verify(ctx, sig->data, sig->len, digest, 32) == 1;
        EVP_PKEY_CTX_free(ctx);
    } else if (type == EVP_PKEY_ED25519) {
        if (!artifact) {
            *why = hk__strdup("an Ed25519 signature needs the artifact itself, not its digest");
            return -1;
        }
        EVP_MD_CTX *m = EVP_MD_CTX_new();
        ok = m && EVP_DigestVerifyInit(m, NULL, NULL, NULL, pk) == 1 &&
             EVP_DigestVerify(m, sig->data, sig->len, artifact, artifact_len) == 1;
        EVP_MD_CTX_free(m);
    } else {
        *why = hk__strdup("signing certificate has an unsupported key type");
        return -1;
    }
    ERR_clear_error();
    if (!ok) {
        *why = hk__strdup("signature is invalid for the artifact");
        return -1;
    }
    return 0;
}
