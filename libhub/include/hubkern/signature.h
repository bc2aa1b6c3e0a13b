/* hubkern — Sigstore signature policy of pulls and loads (docs/sigstore.md).
 *
 * kernels-community's CI signs every build variant keylessly: build/<variant>/metadata.json has a
 * cosign bundle beside it, metadata.json.sigstore. hubkern checks it before the metadata.json is
 * parsed, on every pull and load (hk_hub_pull, hk_get_kernel, hk_load_locked):
 *
 *   - a bundle that is present and fails any check is always refused: HK_ERR_SIGNATURE, the message
 *     names the check and the identity the certificate carries;
 *   - a missing bundle: HK_ERR_SIGNATURE ("no metadata.json.sigstore") under HK_SIGNATURE_REQUIRE,
 *     a warning through the log callback under HK_SIGNATURE_WARN, nothing under HK_SIGNATURE_OFF.
 *
 * HK_SIGNATURE_DEFAULT (0) means: HUBKERN_SIGNATURE (require|warn|off) when set; else REQUIRE for a
 * repo whose Hub org a policy covers (kernels-community, by kernels' built-in policy, and the orgs
 * of extra policies) and WARN for every other repo.
 *
 * Trust root (trusted_root.json): the option, else HUBKERN_SIGSTORE_TRUST_ROOT, else the copy
 * installed with `hubkern trust-root install` ($XDG_CONFIG_HOME or ~/.config, /hubkern/sigstore/),
 * else the one shipped with hubkern (<prefix>/share/hubkern/sigstore/, found relative to the
 * library, or to the program when it links libhubkern.a; never in a source or build tree: a build
 * tree has the same share/hubkern/sigstore/ layout).
 *
 * Policies: kernels' default is built in (GitHub Actions of huggingface/kernels-community, its
 * build, build-mac, build-windows and sign-old-builds workflows at refs/heads/main, covering the
 * Hub org kernels-community). More: hk_signature_policies (API), a policy file (JSON, the
 * signature_policy_file option or HUBKERN_SIGNATURE_POLICIES):
 *
 *   {"policies": [{"hub_org": "mycorp",
 *                  "issuer": "https://token.actions.githubusercontent.com",
 *                  "source_repository": "https://github.com/mycorp/kernels",
 *                  "build_signer_uris": ["https://github.com/mycorp/kernels/.github/workflows/build.yaml@refs/heads/main"]}]}
 *
 * A repo of an org some policies cover must be signed by one of those; a repo no policy covers may
 * be signed by any of them (as `kernels verify-signature`, which accepts any default policy). */
#ifndef HUBKERN_SIGNATURE_H
#define HUBKERN_SIGNATURE_H

#include "hubkern/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values of the `signature` fields of hk_pull_spec and hk_get_kernel_options. */
#define HK_SIGNATURE_DEFAULT 0 /* HUBKERN_SIGNATURE, else require where a policy covers the org, else warn */
#define HK_SIGNATURE_REQUIRE 1
#define HK_SIGNATURE_WARN 2
#define HK_SIGNATURE_OFF 3

/* "require", "warn", "off" or "default" → *out; HK_ERR_INVALID_ARG for anything else. */
HK_API int hk_signature_mode_parse(int *out, const char *text);
/* "require", "warn", "off", "default" ("?" for an unknown value). */
HK_API const char *hk_signature_mode_name(int mode);

/* ---- policies ------------------------------------------------------------------------------ */
typedef struct hk_signature_policies hk_signature_policies;

/* An empty list (kernels' default policy is always added by the client, not kept here). */
HK_API int hk_signature_policies_new(hk_signature_policies **out);
/* One identity the signing certificate may carry: OIDC issuer (in both Fulcio extensions),
 * source repository URI and one of the build signer URIs (all required; nsigner_uris >= 1).
 * hub_org: the Hub org whose repos this policy covers (NULL: none; it is then only one more
 * identity accepted for repos no policy covers). Strings are copied. */
HK_API int hk_signature_policies_add(hk_signature_policies *p, const char *hub_org, const char *issuer,
                                     const char *source_repository, const char *const *signer_uris,
                                     size_t nsigner_uris);
/* Add every policy of a policy file (format above). HK_ERR_PARSE naming the entry when malformed. */
HK_API int hk_signature_policies_load_file(hk_signature_policies *p, const char *path);
HK_API size_t hk_signature_policies_count(const hk_signature_policies *p);
HK_API void hk_signature_policies_free(hk_signature_policies *p);

/* ---- trust root ---------------------------------------------------------------------------- */
/* The trusted_root.json the client would use given this option (NULL: none): *out newly allocated
 * (free with hk_free); *out_source (may be NULL): "option", "HUBKERN_SIGSTORE_TRUST_ROOT",
 * "installed" or "shipped" (static strings). HK_ERR_NOT_FOUND when none exists. */
HK_API int hk_signature_trust_root_path(char **out, const char **out_source, const char *explicit_path);
/* A JSON summary of a trusted_root.json (path, sha256, its CAs, transparency logs, CT logs and
 * timestamp authorities with their URLs and validity), after checking that it loads as a trust
 * root. *out_json: free with hk_free. */
HK_API int hk_signature_trust_root_describe(char **out_json, const char *path);
/* Check that `file` loads as a trust root and install it (atomically) where `trust-root install`
 * puts it: $XDG_CONFIG_HOME/hubkern/sigstore/trusted_root.json (or ~/.config/...). *out_path
 * (may be NULL): where it went, free with hk_free. */
HK_API int hk_signature_trust_root_install(char **out_path, const char *file);

/* ---- one variant, as `kernels verify-signature` checks it ---------------------------------- */
#define HK_SIGNATURE_VERIFIED 0          /* signed by a policy's identity and the digest matches */
#define HK_SIGNATURE_BUNDLE_MISSING 1    /* no metadata.json.sigstore */
#define HK_SIGNATURE_BUNDLE_INVALID 2    /* not a Sigstore bundle hubkern can read */
#define HK_SIGNATURE_METADATA_MISSING 3  /* no metadata.json */
#define HK_SIGNATURE_FAILED 4            /* a check of the signature failed */
#define HK_SIGNATURE_METADATA_INVALID 5  /* signed, but not valid JSON */
#define HK_SIGNATURE_DIGEST_MISSING 6    /* signed, but metadata.json has no digest */
#define HK_SIGNATURE_DIGEST_MISMATCH 7   /* signed, but the files do not match the digest */

struct hk_hub; /* hubkern/hub.h */

/* Check a variant directory the way kernels 0.17.2 verify_variant does (bundle, metadata, the
 * signature before anything parses the metadata, then the digest over every file, hashed again),
 * with hub's trust root and policies for repo_id. HK_OK when the check ran: *out_outcome is one of
 * HK_SIGNATURE_VERIFIED..HK_SIGNATURE_DIGEST_MISMATCH, *out_reason (may be NULL) the reason or, on
 * success, the identity that signed (free with hk_free). An error return means the check could not
 * run (no trust root, out of memory). */
HK_API int hk_signature_verify_variant(int *out_outcome, char **out_reason, struct hk_hub *hub,
                                       const char *repo_id, const char *variant_dir);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_SIGNATURE_H */
