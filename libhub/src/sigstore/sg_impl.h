/* Shared internals of the sigstore layer: parsed bundle, parsed trust root, key helpers.
 * Each check lives in its own file (sg_*.c); verify.c runs them in order. */
#ifndef HK_SG_IMPL_H
#define HK_SG_IMPL_H

#include "sigstore/sigstore.h"

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

/* ---- bytes and JSON helpers (sg_util.c) ------------------------------------------------------ */
typedef struct hk_sg_bytes {
    unsigned char *data;
    size_t len;
} hk_sg_bytes;

/* Standard or URL-safe base64, padding optional (protobuf JSON accepts both). false: malformed. */
bool hk__sg_b64_decode(hk_sg_bytes *out, const char *s);
char *hk__sg_b64_encode(const unsigned char *data, size_t len); /* standard, padded; caller frees */
/* A protobuf JSON int64: a decimal string or a JSON integer; false otherwise. */
bool hk__sg_json_int64(int64_t *out, const cJSON *item);
const char *hk__sg_json_str(const cJSON *obj, const char *key); /* NULL if absent / not a string */
/* Every JSON document of this layer (bundle, trusted root, log entry body, in-toto statement) is
 * read with this, so that hubkern sees what sigstore-python's strict parser sees: one JSON value
 * and nothing after it but whitespace, the JSON grammar's own whitespace, numbers and control-free
 * UTF-8 strings (cJSON is laxer in each), no \u0000 (cJSON would cut the string there), no object
 * naming a key twice (cJSON takes the first, sigstore-python the last), and every member whose
 * value is null removed, so null reads exactly as absent (protobuf JSON). On failure *out is NULL
 * and *why says what was wrong (static text). HK_OK, HK_ERR_PARSE or HK_ERR_NOMEM; sets no error. */
int hk__sg_json_parse(cJSON **out, const char *json, size_t len, const char **why);
bool hk__sg_utf8_valid(const unsigned char *p, size_t n); /* RFC 3629 (shortest forms, no surrogates) */
void hk__sg_sha256(unsigned char out[32], const void *data, size_t len);
/* "2021-03-07T03:20:29Z" (RFC 3339, optional fraction, Z or ±hh:mm) → seconds since the epoch. */
bool hk__sg_parse_rfc3339(int64_t *out, const char *s);

/* A stack of certificates and the certificates in it (NULL-safe; OpenSSL 3.0 lacks a helper). */
void hk__sg_certs_free(STACK_OF(X509) *certs);

/* ---- keys (sg_keys.c) ------------------------------------------------------------------------ */
typedef enum { HK_SG_KEY_ECDSA, HK_SG_KEY_ED25519, HK_SG_KEY_RSA } hk_sg_key_kind;

typedef struct hk_sg_key {
    EVP_PKEY *pkey;
    hk_sg_key_kind kind;
    const EVP_MD *md;      /* NULL for Ed25519 */
    unsigned char id[32];  /* SHA-256 of the DER SubjectPublicKeyInfo (RFC 6962 key id) */
    int64_t start, end;    /* validFor; end == INT64_MAX when open */
    char *name;            /* baseUrl of the log, for messages */
} hk_sg_key;

/* Key of a trusted_root keyDetails string + DER SPKI. false: unsupported or malformed. */
bool hk__sg_key_load(hk_sg_key *key, const char *details, const unsigned char *der, size_t len);
void hk__sg_key_clear(hk_sg_key *key);
/* Verify sig over data with key (hashing with key->md; Ed25519 pure). */
bool hk__sg_key_verify(const hk_sg_key *key, const unsigned char *sig, size_t sig_len,
                      const void *data, size_t len);
/* sigstore-python's keyring rule: the key whose id equals key_id, else every key in turn. Keys
 * whose validFor excludes `when` (seconds, or -1: no time known) are skipped. Returns the key that
 * verified, NULL if none did. */
const hk_sg_key *hk__sg_keyring_verify(const hk_sg_key *keys, size_t nkeys,
                                      const unsigned char *key_id, size_t key_id_len, int64_t when,
                                      const unsigned char *sig, size_t sig_len, const void *data,
                                      size_t len);
/* SHA-256 of a key's DER SubjectPublicKeyInfo. */
bool hk__sg_spki_id(unsigned char out[32], EVP_PKEY *pkey);

/* ---- trust root (trust_root.c) --------------------------------------------------------------- */
typedef struct hk_sg_ca {
    X509 **certs; /* leaf (or intermediate) first, root last */
    size_t ncerts;
    int64_t start, end;
    char *uri;
} hk_sg_ca;

struct hk_sigstore_trust_root {
    hk_sg_key *tlogs;
    size_t ntlogs;
    hk_sg_key *ctlogs;
    size_t nctlogs;
    hk_sg_ca *cas;
    size_t ncas;
    hk_sg_ca *tsas;
    size_t ntsas;
    unsigned refs; /* callers' and the process memo's references (trust_root.c, under its lock) */
};

/* ---- bundle (bundle.c) ----------------------------------------------------------------------- */
typedef struct hk_sg_bundle {
    int version;               /* 1, 2, 3 */
    X509 *leaf;                /* NULL when the bundle names a managed key (publicKey) */
    bool has_public_key;       /* verificationMaterial.publicKey (a hint only; the key is given) */
    /* messageSignature.signature, or the DSSE envelope's one signature: what RFC 3161 stamps */
    hk_sg_bytes signature;
    bool has_digest;           /* messageSignature.messageDigest */
    char *digest_alg;
    hk_sg_bytes digest;
    bool is_dsse;              /* dsseEnvelope instead of messageSignature */
    char *dsse_type;           /* payloadType */
    hk_sg_bytes dsse_payload;  /* decoded payload */
    /* the one tlog entry */
    int64_t log_index;
    hk_sg_bytes log_id;
    char *kind, *kind_version;
    bool has_integrated_time;
    int64_t integrated_time;
    bool has_promise;
    hk_sg_bytes set;
    hk_sg_bytes body;          /* canonicalizedBody */
    bool has_proof;
    int64_t proof_index, tree_size;
    hk_sg_bytes root_hash;
    hk_sg_bytes *hashes;
    size_t nhashes;
    char *checkpoint;          /* NULL when the proof has none */
    hk_sg_bytes *tsrs;         /* RFC 3161 responses (DER) */
    size_t ntsrs;
} hk_sg_bundle;

/* HK_OK or HK_ERR_PARSE with the reason (sigstore-python's bundle invariants included). */
int hk__sg_bundle_parse(hk_sg_bundle *b, const char *json, size_t len);
void hk__sg_bundle_clear(hk_sg_bundle *b);

/* ---- checks; each returns NULL on success or a static/allocated reason in *why -------------- */
/* Certificate (cert.c): chain to a Fulcio CA valid at `when`; fills the issuer chain (without the
 * leaf, issuer first) for the SCT check. */
int hk__sg_check_chain(const hk_sigstore_trust_root *root, X509 *leaf, int64_t when,
                      STACK_OF(X509) **chain, char **why);
int hk__sg_check_usage(X509 *leaf, char **why);
/* The identity extensions in DER, not BER (X.690 10: definite lengths in the fewest octets, primitive
 * strings): the Fulcio UTF8String extensions hubkern reads (1.3.6.1.4.1.57264.1.8, .9, .12) and the
 * SAN; and no extension twice (RFC 5280 4.2), which would leave the identity to whichever the
 * reader takes. */
int hk__sg_check_identity_der(X509 *leaf, char **why);
/* Fulcio extension as text: v1 raw bytes, v2 DER UTF8String. NULL if absent, malformed, not DER or
 * present twice. */
char *hk__sg_cert_ext_raw(X509 *cert, const char *oid);
char *hk__sg_cert_ext_utf8(X509 *cert, const char *oid);
/* SANs (URI, email, Sigstore othername 1.3.6.1.4.1.57264.1.7), NULL-terminated; free each + array.
 * None when the extension is not DER or present twice. */
char **hk__sg_cert_sans(X509 *cert, size_t *count);

/* SCT (sct.c). */
int hk__sg_check_sct(const hk_sigstore_trust_root *root, X509 *leaf, STACK_OF(X509) *chain,
                    char **why);

/* Transparency log (tlog.c, checkpoint.c). */
int hk__sg_check_inclusion(const hk_sg_bundle *b, char **why);
int hk__sg_check_checkpoint(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, char **why);
int hk__sg_check_set(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, char **why);
/* The signer of a bundle: the leaf certificate (keyless) or a managed key (leaf NULL). */
typedef struct hk_sg_signer {
    X509 *leaf;
    EVP_PKEY *key; /* the leaf's key, or the managed key */
} hk_sg_signer;

/* hashedrekord v0.0.1/v0.0.2 body vs signer, signature, sha256 digest (body.c). */
int hk__sg_check_body(const hk_sg_bundle *b, const hk_sg_signer *s, const unsigned char digest[32], char **why);
/* Body helpers shared with dsse.c (body.c). A Rekor v1 verifier field (base64 of a PEM
 * certificate or public key) names the signer: for a certificate, `exact` compares the string
 * with base64(PEM) as sigstore-python does, else the decoded certificate; a key by its SPKI. */
bool hk__sg_verifier_matches(const char *b64_pem, const hk_sg_signer *s, bool exact);
/* A hashedrekord v0.0.2 (Rekor v2) body over `digest` (algorithm `alg`: SHA2_256/384/512) with
 * signature `sig` by the signer. */
int hk__sg_check_body_v002(const hk_sg_bundle *b, const hk_sg_signer *s, const char *alg, const unsigned char *digest,
                          size_t digest_len, const hk_sg_bytes *sig, char **why);
/* protobuf-specs PublicKeyDetails of a key ("PKIX_ECDSA_P256_SHA_256", ...) and the digest its
 * hashedrekord v0.0.2 entries and DSSE signatures use; NULL if unsupported (or pure Ed25519). */
char *hk__sg_key_details(EVP_PKEY *key);
const EVP_MD *hk__sg_key_md(EVP_PKEY *key);

/* DSSE (dsse.c): the envelope signature over PAE(payloadType, payload), the in-toto statement
 * naming the artifact's digest, the log entry (dsse 0.0.1, intoto 0.0.2, hashedrekord 0.0.2)
 * against the envelope. */
int hk__sg_check_dsse_signature(const hk_sg_bundle *b, const hk_sg_signer *s, char **why);
int hk__sg_check_dsse_body(const hk_sg_bundle *b, const hk_sg_signer *s, char **why);
int hk__sg_check_intoto_subject(const hk_sg_bundle *b, const unsigned char digest[32], char **why);

/* DER values OpenSSL's decoder does not check (der_check.c): PrintableString / IA5String /
 * UTF8String contents, UTCTime / GeneralizedTime forms, BOOLEAN, NULL, and the parameters of
 * digest and ECDSA AlgorithmIdentifiers, throughout the (already well-formed) encoding. */
bool hk__sg_der_values_valid(const unsigned char *der, size_t len);

/* RFC 3161 (tsa.c): verifies every timestamp over the bundle signature; *times gets the gen time
 * of each one a trusted TSA vouches for (count in *ntimes). */
int hk__sg_check_tsa(const hk_sigstore_trust_root *root, const hk_sg_bundle *b, int64_t *times,
                    size_t *ntimes, char **why);

/* Artifact signature (signature.c): over the SHA-256 digest (ECDSA, RSA) or the bytes (Ed25519,
 * NULL when only the digest is known). */
int hk__sg_check_signature(EVP_PKEY *key, const hk_sg_bytes *sig, const unsigned char digest[32],
                          const void *artifact, size_t artifact_len, char **why);

/* A PEM SubjectPublicKeyInfo (managed key) of a supported type (sg_keys.c); NULL if not one. */
EVP_PKEY *hk__sg_pubkey_from_pem(const char *pem, size_t len);
bool hk__sg_same_pubkey(EVP_PKEY *a, EVP_PKEY *b); /* same DER SubjectPublicKeyInfo */

/* Identity policy (policy.c). */
int hk__sg_check_policy(X509 *leaf, const hk_sigstore_policy *policies, size_t npolicies,
                       int *matched, char **why);

#endif
