/* hk__sigstore_verify: the checks of a Sigstore bundle in sigstore-python's order (docs/sigstore.md):
 *   0 parse + structural invariants      → HK_ERR_PARSE
 *   1 signing times: RFC 3161 timestamps, the log's integration time when an inclusion promise
 *     binds it; at least one
 *   2 chain to a Fulcio CA at every signing time
 *   3 embedded SCT
 *   4 key usage / extended key usage, identity extensions in DER and none twice, then the
 *     identity policy
 *   5 inclusion proof, signed checkpoint, signed entry timestamp
 *   6 every signing time inside the certificate's validity
 *   7 the artifact digest and signature
 *   8 the log entry body against the bundle
 * DSSE bundles (dsse.c) take 7 and 8 over the envelope, then its in-toto statement; with a
 * managed key, 2, 3, 4 and 6 (the certificate's) do not apply.
 * A failed check is HK_ERR_SIGNATURE with "<check>: <reason> (identity: ...)". */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#define OID_ISSUER_V1 "1.3.6.1.4.1.57264.1.1"
#define OID_ISSUER_V2 "1.3.6.1.4.1.57264.1.8"
#define OID_BUILD_SIGNER_URI "1.3.6.1.4.1.57264.1.9"
#define OID_SOURCE_REPO_URI "1.3.6.1.4.1.57264.1.12"

void hk__sigstore_result_free(hk_sigstore_result *r) {
    if (!r) return;
    free(r->issuer);
    free(r->san);
    free(r->source_repo);
    free(r->signer_uri);
    memset(r, 0, sizeof *r);
}

static void fill_identity(hk_sigstore_result *r, X509 *leaf) {
    r->issuer = hk__sg_cert_ext_utf8(leaf, OID_ISSUER_V2);
    if (!r->issuer) r->issuer = hk__sg_cert_ext_raw(leaf, OID_ISSUER_V1);
    r->source_repo = hk__sg_cert_ext_utf8(leaf, OID_SOURCE_REPO_URI);
    r->signer_uri = hk__sg_cert_ext_utf8(leaf, OID_BUILD_SIGNER_URI);
    size_t n = 0;
    char **sans = hk__sg_cert_sans(leaf, &n);
    if (sans && n) r->san = sans[0];
    for (size_t i = 1; sans && i < n; i++) free(sans[i]);
    free(sans);
}

static int failed(const hk_sigstore_result *r, const char *check, char *why) {
    int rc = hk__fail(HK_ERR_SIGNATURE,
                     "sigstore: %s failed: %s (identity seen: issuer=%s san=%s repo=%s signer=%s)", check,
                     why ? why : "out of memory", r->issuer ? r->issuer : "-", r->san ? r->san : "-",
                     r->source_repo ? r->source_repo : "-", r->signer_uri ? r->signer_uri : "-");
    free(why);
    return rc;
}

/* The log's integration time counts only for entry kinds whose promise sigstore-python trusts,
 * plus Rekor v1 intoto 0.0.2 for DSSE (sigstore-go does; sigstore-conformance's in-toto cases
 * need it). */
static bool integrated_time_usable(const hk_sg_bundle *b) {
    if (strcmp(b->kind_version, "0.0.1") == 0) return strcmp(b->kind, "hashedrekord") == 0 || strcmp(b->kind, "dsse") == 0;
    return b->is_dsse && strcmp(b->kind_version, "0.0.2") == 0 && strcmp(b->kind, "intoto") == 0;
}

static int run_checks(hk_sigstore_result *r, const hk_sigstore_trust_root *root, const hk_sg_bundle *b,
                      const hk_sigstore_verify_opts *o, const hk_sg_signer *s, const unsigned char digest[32],
                      const void *artifact, size_t artifact_len) {
    char *why = NULL;
    if (b->is_dsse && !o->allow_dsse)
        return failed(r, "bundle", hk__strdup("DSSE envelopes are not accepted for this artifact; expected messageSignature "
                                              "(cosign sign-blob)"));

    /* 1: signing times */
    int64_t times[33];
    size_t ntimes = 0;
    if (hk__sg_check_tsa(root, b, times, &ntimes, &why) != 0) return failed(r, "signed timestamp", why);
    if (ntimes) {
        r->checks |= HK_SIGSTORE_CHECK_TSA;
        r->tsa_time = times[0];
        for (size_t i = 1; i < ntimes; i++)
            if (times[i] < r->tsa_time) r->tsa_time = times[i];
    }
    if (b->has_integrated_time && b->has_promise) {
        if (!integrated_time_usable(b))
            return failed(r, "signing time", hk__strdup("integrated time only supported for dsse/hashedrekord 0.0.1 entries"));
        times[ntimes++] = b->integrated_time;
    }
    if (ntimes == 0) return failed(r, "signing time", hk__strdup("not enough sources of verified time"));

    if (s->leaf) { /* 2-4: the certificate; a managed key has none of it */
        /* 2: chain at every time; the last chain feeds the SCT check */
        STACK_OF(X509) *chain = NULL;
        for (size_t i = 0; i < ntimes; i++) {
            hk__sg_certs_free(chain);
            if (hk__sg_check_chain(root, s->leaf, times[i], &chain, &why) != 0) return failed(r, "certificate chain", why);
        }
        r->checks |= HK_SIGSTORE_CHECK_CHAIN;

        /* 3 */
        int sct_rc = hk__sg_check_sct(root, s->leaf, chain, &why);
        hk__sg_certs_free(chain);
        if (sct_rc != 0) return failed(r, "SCT", why);
        r->checks |= HK_SIGSTORE_CHECK_SCT;

        /* 4 */
        if (hk__sg_check_usage(s->leaf, &why) != 0 || hk__sg_check_identity_der(s->leaf, &why) != 0)
            return failed(r, "certificate profile", why);
        r->checks |= HK_SIGSTORE_CHECK_USAGE;
        if (hk__sg_check_policy(s->leaf, o->policies, o->npolicies, &r->policy_index, &why) != 0)
            return failed(r, "identity policy", why);
        r->checks |= HK_SIGSTORE_CHECK_POLICY;
    }

    /* 5 */
    if (hk__sg_check_inclusion(b, &why) != 0) return failed(r, "inclusion proof", why);
    r->checks |= HK_SIGSTORE_CHECK_INCLUSION;
    if (hk__sg_check_checkpoint(root, b, &why) != 0) return failed(r, "checkpoint", why);
    r->checks |= HK_SIGSTORE_CHECK_CHECKPOINT;
    if (b->has_promise && b->has_integrated_time) {
        if (hk__sg_check_set(root, b, &why) != 0) return failed(r, "inclusion promise", why);
        r->checks |= HK_SIGSTORE_CHECK_SET;
    }

    /* 6: X509_verify_cert already held the leaf's window at each time; said once more, explicitly */
    for (size_t i = 0; s->leaf && i < ntimes; i++) {
        time_t t = (time_t)times[i];
        if (X509_cmp_time(X509_get0_notBefore(s->leaf), &t) > 0 || X509_cmp_time(X509_get0_notAfter(s->leaf), &t) < 0)
            return failed(r, "certificate validity",
                          hk__asprintf("signing time %lld is outside the certificate's validity", (long long)times[i]));
    }
    if (s->leaf) r->checks |= HK_SIGSTORE_CHECK_VALIDITY;

    if (b->is_dsse) { /* 7, 8, then what the envelope says (dsse.c) */
        if (hk__sg_check_dsse_signature(b, s, &why) != 0) return failed(r, "signature", why);
        r->checks |= HK_SIGSTORE_CHECK_SIGNATURE;
        if (hk__sg_check_dsse_body(b, s, &why) != 0) return failed(r, "log entry body", why);
        r->checks |= HK_SIGSTORE_CHECK_BODY;
        if (hk__sg_check_intoto_subject(b, digest, &why) != 0) return failed(r, "in-toto statement", why);
        r->checks |= HK_SIGSTORE_CHECK_SUBJECT;
        return HK_OK;
    }

    /* 7 */
    if (b->has_digest && (b->digest.len != 32 || memcmp(b->digest.data, digest, 32) != 0))
        return failed(r, "signature", hk__strdup("bundle message digest does not match the artifact"));
    if (hk__sg_check_signature(s->key, &b->signature, digest, artifact, artifact_len, &why) != 0)
        return failed(r, "signature", why);
    r->checks |= HK_SIGSTORE_CHECK_SIGNATURE;

    /* 8 */
    if (hk__sg_check_body(b, s, digest, &why) != 0) return failed(r, "log entry body", why);
    r->checks |= HK_SIGSTORE_CHECK_BODY;
    return HK_OK;
}

/* The signer: the leaf's key keyless, the given key with --key; each mode wants its own material. */
static int pick_signer(hk_sg_signer *s, EVP_PKEY **owned, hk_sigstore_result *r, const hk_sg_bundle *b,
                       const hk_sigstore_verify_opts *o) {
    *owned = NULL;
    if (!o->public_key_pem) {
        if (b->has_public_key)
            return hk__fail(HK_ERR_PARSE, "invalid bundle: %s (it names a managed key)",
                            b->version == 3 ? "expected certificate in bundle" : "expected non-empty certificate chain in bundle");
        s->leaf = b->leaf;
        s->key = X509_get0_pubkey(b->leaf); /* NULL: refused by the signature check, in its turn */
        return HK_OK;
    }
    if (!b->has_public_key)
        return failed(r, "bundle", hk__strdup("bundle carries a signing certificate, not a managed key; verify it by identity"));
    *owned = hk__sg_pubkey_from_pem(o->public_key_pem, o->public_key_pem_len);
    if (!*owned) return hk__fail(HK_ERR_INVALID_ARG, "the verification key is not a PEM public key of a supported type");
    s->leaf = NULL;
    s->key = *owned;
    r->managed_key = 1;
    return HK_OK;
}

static int verify_common(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                         const hk_sigstore_verify_opts *o, const unsigned char digest[32],
                         const void *artifact, size_t artifact_len, const char *bundle_json, size_t bundle_len) {
    hk_sigstore_result local;
    hk_sigstore_result *r = result ? result : &local;
    memset(r, 0, sizeof *r);
    r->integrated_time = -1;
    r->tsa_time = -1;
    r->log_index = -1;
    r->policy_index = -1;
    if (!root || !bundle_json) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify: root and bundle are required");
    if (o->policies == NULL && o->npolicies) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify: policies is NULL");
    hk_sg_bundle b;
    int rc = hk__sg_bundle_parse(&b, bundle_json, bundle_len);
    if (rc == HK_OK) {
        if (b.leaf) fill_identity(r, b.leaf);
        r->bundle_version = b.version;
        r->log_index = b.log_index;
        r->dsse = b.is_dsse;
        if (b.has_integrated_time) r->integrated_time = b.integrated_time;
        hk_sg_signer s;
        EVP_PKEY *owned = NULL;
        rc = pick_signer(&s, &owned, r, &b, o);
        if (rc == HK_OK) rc = run_checks(r, root, &b, o, &s, digest, artifact, artifact_len);
        EVP_PKEY_free(owned);
        hk__sg_bundle_clear(&b);
    }
    ERR_clear_error();
    if (rc == HK_OK) hk_clear_error();
    if (r == &local) hk__sigstore_result_free(&local);
    return rc;
}

int hk__sigstore_verify(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                       const hk_sigstore_policy *policies, size_t npolicies, const void *artifact,
                       size_t artifact_len, const char *bundle_json, size_t bundle_len) {
    if (!artifact && artifact_len) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify: artifact is NULL");
    unsigned char digest[32];
    hk__sg_sha256(digest, artifact ? artifact : "", artifact_len);
    hk_sigstore_verify_opts o = {policies, npolicies, 0, NULL, 0};
    return verify_common(result, root, &o, digest, artifact ? artifact : "", artifact_len, bundle_json, bundle_len);
}

int hk__sigstore_verify_digest(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                              const hk_sigstore_policy *policies, size_t npolicies, const unsigned char sha256[32],
                              const char *bundle_json, size_t bundle_len) {
    if (!sha256) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify_digest: digest is NULL");
    hk_sigstore_verify_opts o = {policies, npolicies, 0, NULL, 0};
    return verify_common(result, root, &o, sha256, NULL, 0, bundle_json, bundle_len);
}

int hk__sigstore_verify_ex(hk_sigstore_result *result, const hk_sigstore_trust_root *root,
                          const hk_sigstore_verify_opts *opts, const unsigned char sha256[32], const void *artifact,
                          size_t artifact_len, const char *bundle_json, size_t bundle_len) {
    if (!opts || !sha256) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify_ex: options and digest are required");
    if (!artifact && artifact_len) return hk__fail(HK_ERR_INVALID_ARG, "hk__sigstore_verify_ex: artifact is NULL");
    return verify_common(result, root, opts, sha256, artifact, artifact_len, bundle_json, bundle_len);
}
