/* Signature checks: the pull's check of a staged or cached variant (before its metadata.json is
 * parsed; a verified result kept in a signature receipt) and `kernels verify-signature`'s check of
 * one variant directory (hk_signature_verify_variant). The cryptography is the sigstore layer's. */
#include "client/signature.h"

#include "cache/cache_internal.h"
#include "cache/sig_receipt.h"
#include "client/hub_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define BUNDLE_MAX (1u << 20)

/* Read <dir>/<name>: HK_OK, HK_ERR_NOT_FOUND (absent, nothing recorded), or the error. */
static int read_beside(char **out, size_t *len, const char *dir, const char *name, size_t max) {
    *out = NULL;
    *len = 0;
    char *p = hk__path_join(dir, name);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = hk__path_exists(p) ? hk__read_file(out, len, p, max) : HK_ERR_NOT_FOUND;
    free(p);
    return rc;
}

static char *identity_of(const hk_sigstore_result *r) {
    return hk__asprintf("signer=%s repo=%s issuer=%s log_index=%" PRId64, r->signer_uri ? r->signer_uri : "(none)",
                        r->source_repo ? r->source_repo : "(none)", r->issuer ? r->issuer : "(none)", r->log_index);
}

/* Verify bundle over meta with the trust root and repo's policies. key (may be NULL): the receipt
 * key of exactly these inputs, filled. *identity on success. HK_ERR_PARSE: not a bundle. */
static int verify_bytes(char **identity, char key[400], hk_sig_config *c, const char *repo, const char *meta,
                        size_t mlen, const char *bundle, size_t blen, const char *receipt) {
    *identity = NULL;
    hk_sigstore_policy *pol = NULL;
    size_t npol = 0;
    bool covered = false;
    char fp[65], msha[65], bsha[65];
    int rc = hk__sig_policies_for(&pol, &npol, &covered, fp, c, repo);
    if (rc == HK_OK) rc = hk__sig_config_root_bytes(c);
    if (rc) {
        free(pol);
        return rc;
    }
    hk__sha256_hex(msha, meta, mlen);
    hk__sha256_hex(bsha, bundle, blen);
    snprintf(key, 400, "metadata=%s bundle=%s trust_root=%s policies=%s", msha, bsha, c->trust_root_sha, fp);
    if (receipt && hk__sig_receipt_vouches(receipt, key, identity)) {
        hk__log(HK_LOG_DEBUG, "%s: signature receipt vouches (%s); not verified again", repo, *identity ? *identity : "");
        free(pol);
        return HK_OK;
    }
    const hk_sigstore_trust_root *root = NULL;
    hk_sigstore_result res;
    memset(&res, 0, sizeof res);
    rc = hk__sig_config_root(&root, c);
    if (rc == HK_OK) {
        rc = hk__sigstore_verify(&res, root, pol, npol, meta, mlen, bundle, blen);
        hk__log(HK_LOG_DEBUG, "%s: Sigstore bundle verified with %s (%s): %s", repo, c->trust_root_path,
                c->trust_root_source, rc ? "refused" : "ok");
    }
    if (rc == HK_OK && !(*identity = identity_of(&res))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    hk__sigstore_result_free(&res);
    free(pol);
    return rc;
}

int hk__client_request_signature(const hk_hub *hub, int requested, int floor, const char *repo_id) {
    return hk__sig_request_mode(hub->sig, requested, floor, repo_id);
}

int hk__client_check_signature(hk_hub *hub, int mode, const char *repo, const char *repo_dir, const char *commit,
                               const char *variant, const char *variant_dir) {
    hk_sig_config *c = hub->sig;
    int eff = hk__sig_effective_mode(c, mode, repo);
    if (eff == HK_SIGNATURE_OFF) return HK_OK;
    const char *why = mode != HK_SIGNATURE_DEFAULT ? "requested" : c->env_mode ? "HUBKERN_SIGNATURE" : "a policy covers its org";
    char *bundle = NULL, *meta = NULL;
    size_t blen = 0, mlen = 0;
    int rc = read_beside(&bundle, &blen, variant_dir, "metadata.json.sigstore", BUNDLE_MAX);
    if (rc == HK_ERR_NOT_FOUND) {
        if (eff == HK_SIGNATURE_REQUIRE)
            return hk__fail(HK_ERR_SIGNATURE, "build/%s of %s at %.12s has no metadata.json.sigstore: it is not signed, "
                            "and a signature is required (%s; --signature warn or off to load it anyway)",
                            variant, repo, commit, why);
        hk__log(HK_LOG_WARN, "build/%s of %s at %.12s is not signed (no metadata.json.sigstore); using it without "
                "a signature check", variant, repo, commit);
        return HK_OK;
    }
    if (rc) return rc;
    rc = read_beside(&meta, &mlen, variant_dir, "metadata.json", HK_METADATA_JSON_MAX);
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk__fail(HK_ERR_SIGNATURE, "build/%s of %s has a metadata.json.sigstore but no metadata.json", variant, repo);
    char *receipt = repo_dir && commit ? hk__sig_receipt_path(hub->cache_root, repo_dir, commit, variant) : NULL;
    char *identity = NULL;
    char key[400];
    if (rc == HK_OK) rc = verify_bytes(&identity, key, c, repo, meta, mlen, bundle, blen, receipt);
    if (rc == HK_ERR_PARSE) rc = hk__fail_wrap(HK_ERR_SIGNATURE, "invalid signature bundle");
    if (rc == HK_ERR_SIGNATURE)
        hk__fail_context("build/%s of %s at %.12s: metadata.json.sigstore refused", variant, repo, commit);
    if (rc == HK_OK) {
        hk__log(HK_LOG_INFO, "build/%s of %s: metadata.json signed (%s)", variant, repo, identity);
        if (receipt && hk__sig_receipt_save(receipt, key, identity) != HK_OK) {
            hk__log(HK_LOG_DEBUG, "cannot write the signature receipt %s: %s", receipt, hk_last_error());
            hk_clear_error();
        }
    }
    free(identity);
    free(receipt);
    free(bundle);
    free(meta);
    return rc;
}

/* ---- kernels verify-signature's check of one variant ------------------------------------------ */
static int answer(int *out_outcome, char **out_reason, int outcome, const char *reason) {
    *out_outcome = outcome;
    if (out_reason && reason && !(*out_reason = hk__strdup(reason))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_clear_error();
    return HK_OK;
}

HK_API int hk_signature_verify_variant(int *out_outcome, char **out_reason, hk_hub *hub, const char *repo_id,
                                       const char *variant_dir) {
    if (out_reason) *out_reason = NULL;
    if (!out_outcome || !hub || !repo_id || !variant_dir)
        return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_verify_variant: NULL argument");
    *out_outcome = HK_SIGNATURE_FAILED;
    char *bundle = NULL, *meta = NULL, *identity = NULL;
    size_t blen = 0, mlen = 0;
    char key[400];
    int rc = read_beside(&bundle, &blen, variant_dir, "metadata.json.sigstore", BUNDLE_MAX);
    if (rc == HK_ERR_NOT_FOUND) return answer(out_outcome, out_reason, HK_SIGNATURE_BUNDLE_MISSING, NULL);
    if (rc) return rc;
    rc = read_beside(&meta, &mlen, variant_dir, "metadata.json", HK_METADATA_JSON_MAX);
    bool no_meta = rc == HK_ERR_NOT_FOUND;
    if (no_meta) rc = HK_OK;
    /* (kernels parses the bundle before looking for the metadata: an unreadable bundle wins) */
    if (rc == HK_OK) rc = verify_bytes(&identity, key, hub->sig, repo_id, no_meta ? "" : meta, mlen, bundle, blen, NULL);
    free(bundle);
    if (rc == HK_ERR_PARSE) rc = answer(out_outcome, out_reason, HK_SIGNATURE_BUNDLE_INVALID, hk_last_error());
    else if (no_meta) rc = answer(out_outcome, out_reason, HK_SIGNATURE_METADATA_MISSING, NULL);
    else if (rc == HK_ERR_SIGNATURE) rc = answer(out_outcome, out_reason, HK_SIGNATURE_FAILED, hk_last_error());
    else if (rc == HK_OK) {
        /* signed: only now is the metadata parsed, then every file hashed again (no receipts) */
        cJSON *j = cJSON_Parse(meta);
        bool has = false;
        if (!j) rc = answer(out_outcome, out_reason, HK_SIGNATURE_METADATA_INVALID, "metadata.json is not valid JSON");
        else if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "digest")))
            rc = answer(out_outcome, out_reason, HK_SIGNATURE_DIGEST_MISSING, NULL);
        else if ((rc = hk__verify_variant_cached(&has, NULL, variant_dir, NULL, true, NULL, 0)) == HK_ERR_DIGEST ||
                 rc == HK_ERR_INTEGRITY)
            rc = answer(out_outcome, out_reason, HK_SIGNATURE_DIGEST_MISMATCH, hk_last_error());
        else if (rc == HK_ERR_PARSE)
            rc = answer(out_outcome, out_reason, HK_SIGNATURE_METADATA_INVALID, hk_last_error());
        else if (rc == HK_OK)
            rc = answer(out_outcome, out_reason, has ? HK_SIGNATURE_VERIFIED : HK_SIGNATURE_DIGEST_MISSING,
                        has ? identity : NULL);
        cJSON_Delete(j);
    }
    free(identity);
    free(meta);
    return rc;
}
