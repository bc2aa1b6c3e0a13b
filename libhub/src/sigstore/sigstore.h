/* Sigstore bundle verification (the sigstore layer of libhubkern; depends on the util layer,
 * OpenSSL libcrypto and cJSON only). Internal: pull/load and the CLI call it; not installed.
 *
 * hk__sigstore_verify checks a Sigstore bundle (media types v0.1, v0.2, v0.3, JSON) over an
 * artifact the way sigstore-python 4.5.1 and sigstore-go do: signing time(s), the certificate
 * chain to a Fulcio CA at that time, the embedded SCT, key usage, the identity policy, the
 * transparency log entry (inclusion proof, signed checkpoint, signed entry timestamp), the entry's
 * body against the bundle, and the signature over the artifact. docs/sigstore.md has the order and
 * the reasons. */
#ifndef HK_SIGSTORE_H
#define HK_SIGSTORE_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>


/* ---- trust root ------------------------------------------------------------------------------ */
typedef struct hk_sigstore_trust_root hk_sigstore_trust_root;

/* Load a trusted_root.json (application/vnd.dev.sigstore.trustedroot+json;version=0.1). A root is
 * parsed once per process: the same bytes (by SHA-256) give the same shared, read-only root (a
 * reference; _free drops it), which threads may verify with at once. */
int hk__sigstore_trust_root_load(hk_sigstore_trust_root **out, const char *path);
int hk__sigstore_trust_root_parse(hk_sigstore_trust_root **out, const char *json, size_t len);
void hk__sigstore_trust_root_free(hk_sigstore_trust_root *root);
/* Drop the process memo's references (hk_shutdown; roots still held stay valid until freed). */
void hk__sigstore_trust_root_memo_clear(void);

/* ---- identity policies ----------------------------------------------------------------------- */
#define HK_SIGSTORE_ISSUER_V1 1u /* 1.3.6.1.4.1.57264.1.1, raw string */
#define HK_SIGSTORE_ISSUER_V2 2u /* 1.3.6.1.4.1.57264.1.8, DER UTF8String */

/* One identity the signing certificate may carry. A NULL (or zero-count) field matches anything;
 * every non-NULL field must match exactly. */
typedef struct hk_sigstore_policy {
    const char *issuer;             /* OIDC issuer */
    unsigned issuer_exts;           /* which issuer extensions must exist and equal `issuer` */
    const char *san;                /* a SAN (URI, email or Sigstore othername) equal to this */
    const char *source_repo;        /* 1.3.6.1.4.1.57264.1.12 */
    const char *const *signer_uris; /* 1.3.6.1.4.1.57264.1.9 equals one of these */
    size_t nsigner_uris;
} hk_sigstore_policy;

/* kernels' default policy (kernels 0.17.2 verify.py DEFAULT_POLICIES): GitHub Actions issuer in
 * both extensions, source repo huggingface/kernels-community, one of its four signing workflows
 * at refs/heads/main. */
const hk_sigstore_policy *hk__sigstore_default_policy(void);

/* ---- verification ---------------------------------------------------------------------------- */
/* Bits of hk_sigstore_result.checks: what ran and passed. */
enum {
    HK_SIGSTORE_CHECK_TSA = 1u << 0,        /* RFC 3161 timestamp(s) */
    HK_SIGSTORE_CHECK_CHAIN = 1u << 1,      /* chain to a Fulcio CA at every signing time */
    HK_SIGSTORE_CHECK_SCT = 1u << 2,        /* embedded SCT against a CT log key */
    HK_SIGSTORE_CHECK_USAGE = 1u << 3,      /* digitalSignature + codeSigning */
    HK_SIGSTORE_CHECK_POLICY = 1u << 4,     /* identity policy */
    HK_SIGSTORE_CHECK_INCLUSION = 1u << 5,  /* RFC 6962 inclusion proof */
    HK_SIGSTORE_CHECK_CHECKPOINT = 1u << 6, /* signed checkpoint over the proof's root */
    HK_SIGSTORE_CHECK_SET = 1u << 7,        /* signed entry timestamp (inclusion promise) */
    HK_SIGSTORE_CHECK_VALIDITY = 1u << 8,   /* signing times inside the cert's validity */
    HK_SIGSTORE_CHECK_SIGNATURE = 1u << 9,  /* signature over the artifact */
    HK_SIGSTORE_CHECK_BODY = 1u << 10,      /* log entry body matches cert, signature, digest */
    HK_SIGSTORE_CHECK_SUBJECT = 1u << 11    /* DSSE: the in-toto statement names the artifact */
};

typedef struct hk_sigstore_result {
    char *issuer;      /* v2 extension, else v1; NULL if absent */
    char *san;         /* first SAN (URI, email or othername) */
    char *source_repo; /* 1.3.6.1.4.1.57264.1.12 */
    char *signer_uri;  /* 1.3.6.1.4.1.57264.1.9 */
    int64_t integrated_time; /* log integration time (seconds), -1 if the entry has none */
    int64_t tsa_time;        /* earliest verified RFC 3161 time, -1 if none */
    int64_t log_index;
    int bundle_version;      /* 1, 2 or 3 (media type v0.1 / v0.2 / v0.3) */
    int policy_index;        /* which policy matched (-1 with a managed key) */
    unsigned checks;         /* HK_SIGSTORE_CHECK_* that ran and passed */
    int dsse;                /* 1: a DSSE envelope (in-toto statement) was verified */
    int managed_key;         /* 1: verified with a given public key, not a certificate */
} hk_sigstore_result;

/* Verify `bundle_json` over `artifact`. npolicies == 0 means the default policy; otherwise any
 * one policy must match. HK_OK (no error left set), HK_ERR_PARSE for a malformed bundle,
 * HK_ERR_SIGNATURE for a failed check: the message names the check and the identity seen.
 * `result` (may be NULL) is filled as far as verification got; free with hk__sigstore_result_free. */
int hk__sigstore_verify(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                       const hk_sigstore_policy *policies, size_t npolicies,
                       const void *artifact, size_t artifact_len,
                       const char *bundle_json, size_t bundle_len);
/* Same with the artifact given by its SHA-256 digest (conformance passes "sha256:<hex>"). */
int hk__sigstore_verify_digest(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                              const hk_sigstore_policy *policies, size_t npolicies,
                              const unsigned char sha256[32],
                              const char *bundle_json, size_t bundle_len);
void hk__sigstore_result_free(hk_sigstore_result *result);

/* The general entry point (sigstore-conformance's verify-bundle; the two above are it with
 * everything off). Kernel variants never go through it with dsse or a key: their metadata.json
 * is signed with cosign sign-blob (messageSignature), as sigstore-python's verify_artifact wants. */
typedef struct hk_sigstore_verify_opts {
    const hk_sigstore_policy *policies; /* keyless: any one must match; 0 policies: the default */
    size_t npolicies;
    /* 1: a bundle with a DSSE envelope verifies too, when its payload is an in-toto statement
     * (application/vnd.in-toto+json) with a subject whose sha256 is the artifact's */
    int allow_dsse;
    /* non-NULL: verify with this PEM public key (a managed key: the bundle names a publicKey, no
     * certificate, so no chain, SCT or identity policy; the log entry is still required) */
    const char *public_key_pem;
    size_t public_key_pem_len;
} hk_sigstore_verify_opts;

/* `artifact` may be NULL (only `sha256` known: Ed25519 then cannot verify). */
int hk__sigstore_verify_ex(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                          const hk_sigstore_verify_opts *opts, const unsigned char sha256[32],
                          const void *artifact, size_t artifact_len,
                          const char *bundle_json, size_t bundle_len);

#endif
