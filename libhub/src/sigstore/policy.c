/* Identity policies over the Fulcio certificate extensions and SANs, and the kernels default
 * policy (kernels 0.17.2 verify.py): the GitHub Actions issuer (v1 and v2 extensions), the
 * kernels-community source repository and its signing workflows on refs/heads/main. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>

#define OID_ISSUER_V1 "1.3.6.1.4.1.57264.1.1"
#define OID_ISSUER_V2 "1.3.6.1.4.1.57264.1.8"
#define OID_BUILD_SIGNER_URI "1.3.6.1.4.1.57264.1.9"
#define OID_SOURCE_REPO_URI "1.3.6.1.4.1.57264.1.12"

static const char *const KERNELS_SIGNERS[] = {
    "https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main",
    "https://github.com/huggingface/kernels-community/.github/workflows/build-mac.yaml@refs/heads/main",
    "https://github.com/huggingface/kernels-community/.github/workflows/build-windows.yaml@refs/heads/main",
    "https://github.com/huggingface/kernels-community/.github/workflows/sign-old-builds.yaml@refs/heads/main",
};

static const hk_sigstore_policy KERNELS_DEFAULT = {
    .issuer = "https://token.actions.githubusercontent.com",
    .issuer_exts = HK_SIGSTORE_ISSUER_V1 | HK_SIGSTORE_ISSUER_V2,
    .san = NULL,
    .source_repo = "https://github.com/huggingface/kernels-community",
    .signer_uris = KERNELS_SIGNERS,
    .nsigner_uris = HK_ARRAY_LEN(KERNELS_SIGNERS),
};

const hk_sigstore_policy *hk__sigstore_default_policy(void) {
    return &KERNELS_DEFAULT;
}

static bool eq(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

/* NULL when `p` matches, else what differed first. */
static char *mismatch(const hk_sigstore_policy *p, const char *iss1, const char *iss2, char **sans,
                      size_t nsans, const char *repo, const char *signer) {
    if (p->issuer) {
        if ((p->issuer_exts & HK_SIGSTORE_ISSUER_V1) && !eq(iss1, p->issuer))
            return hk__asprintf("OIDC issuer (v1) is %s, expected %s", iss1 ? iss1 : "absent", p->issuer);
        if ((p->issuer_exts & HK_SIGSTORE_ISSUER_V2) && !eq(iss2, p->issuer))
            return hk__asprintf("OIDC issuer (v2) is %s, expected %s", iss2 ? iss2 : "absent", p->issuer);
        if (!p->issuer_exts && !eq(iss2 ? iss2 : iss1, p->issuer))
            return hk__asprintf("OIDC issuer is %s, expected %s", iss2 ? iss2 : iss1 ? iss1 : "absent", p->issuer);
    }
    if (p->san) {
        bool found = false;
        for (size_t i = 0; i < nsans; i++) found = found || eq(sans[i], p->san);
        if (!found) return hk__asprintf("no SAN equals %s", p->san);
    }
    if (p->source_repo && !eq(repo, p->source_repo))
        return hk__asprintf("source repository is %s, expected %s", repo ? repo : "absent", p->source_repo);
    if (p->nsigner_uris) {
        bool found = false;
        for (size_t i = 0; i < p->nsigner_uris; i++) found = found || eq(signer, p->signer_uris[i]);
        if (!found) return hk__asprintf("build signer URI %s is not an allowed workflow", signer ? signer : "absent");
    }
    return NULL;
}

int hk__sg_check_policy(X509 *leaf, const hk_sigstore_policy *policies, size_t npolicies, int *matched,
                       char **why) {
    if (npolicies == 0) {
        policies = &KERNELS_DEFAULT;
        npolicies = 1;
    }
    char *iss1 = hk__sg_cert_ext_raw(leaf, OID_ISSUER_V1);
    char *iss2 = hk__sg_cert_ext_utf8(leaf, OID_ISSUER_V2);
    char *repo = hk__sg_cert_ext_utf8(leaf, OID_SOURCE_REPO_URI);
    char *signer = hk__sg_cert_ext_utf8(leaf, OID_BUILD_SIGNER_URI);
    size_t nsans = 0;
    char **sans = hk__sg_cert_sans(leaf, &nsans);
    int rc = -1;
    char *first = NULL;
    for (size_t i = 0; i < npolicies && rc != 0; i++) {
        char *m = mismatch(&policies[i], iss1, iss2, sans, nsans, repo, signer);
        if (!m) {
            *matched = (int)i;
            rc = 0;
        } else if (!first) {
            first = m;
        } else {
            free(m);
        }
    }
    if (rc != 0) {
        *why = npolicies == 1 ? first : hk__asprintf("no policy matches (policy 0: %s)", first ? first : "");
        if (npolicies != 1) free(first);
    } else {
        free(first);
    }
    free(iss1);
    free(iss2);
    free(repo);
    free(signer);
    for (size_t i = 0; sans && i < nsans; i++) free(sans[i]);
    free(sans);
    return rc;
}
