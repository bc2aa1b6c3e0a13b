/* Signature checks of pulls and loads (signature.c) and their configuration: trust root, policies,
 * mode (sig_config.c). Internal to the client layer; the public face is hubkern/signature.h. */
#ifndef HK_CLIENT_SIGNATURE_H
#define HK_CLIENT_SIGNATURE_H

#include "hubkern/hub.h"
#include "hubkern/signature.h"
#include "sigstore/sigstore.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct hk_sig_policy_own {
    char *hub_org; /* NULL: covers no org */
    char *issuer, *source_repo;
    char **signers;
    size_t nsigners;
} hk_sig_policy_own;

struct hk_signature_policies {
    hk_sig_policy_own *p;
    size_t n, cap;
};

/* What a hub handle knows about signatures. The trust root is read (and hashed) on first need. */
typedef struct hk_sig_config {
    char *trust_root_option;       /* hk_hub_options.sigstore_trust_root, copied */
    char *trust_root_path;         /* resolved on first need */
    const char *trust_root_source;
    char trust_root_sha[65];       /* of its bytes; "" until read */
    hk_sigstore_trust_root *root;  /* parsed on first need (not when a receipt vouches) */
    char *trust_root_text;
    size_t trust_root_len;
    hk_signature_policies extra;   /* API + policy file */
    int env_mode;                  /* HUBKERN_SIGNATURE; HK_SIGNATURE_DEFAULT when unset */
} hk_sig_config;

int hk__sig_config_new(hk_sig_config **out, const hk_hub_options *opts);
void hk__sig_config_free(hk_sig_config *c);
/* Read the trust root's bytes (path resolved, sha256 taken) when not yet done. */
int hk__sig_config_root_bytes(hk_sig_config *c);
/* Parse it when not yet done. */
int hk__sig_config_root(const hk_sigstore_trust_root **out, hk_sig_config *c);

/* The policies a bundle of repo_id must match (covering ones if any, else all); *out is an array
 * of views into c (free the array only), *covered whether some policy covers the repo's org.
 * fp: hex sha256 over the selection (for receipts). */
int hk__sig_policies_for(hk_sigstore_policy **out, size_t *n, bool *covered, char fp[65], const hk_sig_config *c,
                         const char *repo_id);
/* The mode in force for repo_id: mode, else HUBKERN_SIGNATURE, else require/warn by coverage. */
int hk__sig_effective_mode(const hk_sig_config *c, int mode, const char *repo_id);
/* The mode of one repo of a request: a signature mode belongs to the request, not to wherever it
 * ends up. `requested` is the caller's mode (HK_SIGNATURE_DEFAULT: none given); `floor` the mode
 * already in force on the way here (the repo asked for, a redirect hop, a dependent; 0: none).
 * An explicit mode is kept as asked; otherwise the stricter of floor and repo_id's own default,
 * so that neither a redirect nor a dependency lowers it. Never HK_SIGNATURE_DEFAULT. */
int hk__sig_request_mode(const hk_sig_config *c, int requested, int floor, const char *repo_id);

/* The pull's check of build/<variant> (variant_dir: the staged or the published directory) of
 * repo at commit, before its metadata.json is parsed: HK_OK, or HK_ERR_SIGNATURE (present and
 * failing, or missing under require). A verified result is kept in a signature receipt beside the
 * digest receipt (hub's cache root, repo_dir, commit, variant), so that unchanged bytes (metadata,
 * bundle, trust root, policies) are not verified again. */
int hk__client_check_signature(struct hk_hub *hub, int mode, const char *repo, const char *repo_dir,
                               const char *commit, const char *variant, const char *variant_dir);

#endif
