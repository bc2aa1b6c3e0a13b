/* hubkern-sigstore-verify: drives libhubkern's Sigstore verifier from the command line, for the
 * integration tests, the differential campaign and sigstore-conformance's bundle verification:
 *
 *   hubkern-sigstore-verify verify-bundle --bundle B [--certificate-identity I]
 *       [--certificate-oidc-issuer O] [--trusted-root T] [--staging] [--issuer-ext v1|v2|both|any]
 *       [--source-repo R] [--signer-uri U]... [--default-policy] [--key PEM] [--dsse] [--json]
 *       ARTIFACT_OR_sha256:DIGEST
 *
 * --key: a managed key (no certificate, no identity). --dsse: a DSSE bundle (in-toto statement
 * naming the artifact) verifies too; without it only messageSignature bundles do, as at pull/load.
 *
 * Exit 0: verified (with --json a result object on stdout); 1: rejected (message on stderr);
 * 2: usage. Test tool, not installed. */
#include "sigstore/sigstore.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HK_SOURCE_DIR
#define HK_SOURCE_DIR "."
#endif

static int usage(void) {
    fprintf(stderr, "usage: hubkern-sigstore-verify verify-bundle --bundle B [--certificate-identity I] "
                    "[--certificate-oidc-issuer O] [--trusted-root T] [--staging] [--issuer-ext v1|v2|both|any] "
                    "[--source-repo R] [--signer-uri U]... [--default-policy] [--key PEM] [--dsse] [--json] ARTIFACT\n");
    return 2;
}

static void json_field(const char *k, const char *v, int *first) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_json_str(&sb, v ? v : "");
    printf("%s\"%s\":%s", *first ? "" : ",", k, v ? sb.data : "null");
    *first = 0;
    hk__sb_free(&sb);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "verify-bundle") != 0) return usage();
    const char *bundle = NULL, *identity = NULL, *issuer = NULL, *root_path = NULL, *artifact = NULL;
    const char *repo = NULL, *key_path = NULL;
    const char *signers[16];
    size_t nsigners = 0;
    unsigned exts = 0;
    int staging = 0, json = 0, use_default = 0, dsse = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--bundle") == 0 && v) bundle = argv[++i];
        else if (strcmp(a, "--certificate-identity") == 0 && v) identity = argv[++i];
        else if (strcmp(a, "--certificate-oidc-issuer") == 0 && v) issuer = argv[++i];
        else if (strcmp(a, "--trusted-root") == 0 && v) root_path = argv[++i];
        else if (strcmp(a, "--source-repo") == 0 && v) repo = argv[++i];
        else if (strcmp(a, "--key") == 0 && v) key_path = argv[++i];
        else if (strcmp(a, "--dsse") == 0) dsse = 1;
        else if (strcmp(a, "--signer-uri") == 0 && v && nsigners < 16) signers[nsigners++] = argv[++i];
        else if (strcmp(a, "--issuer-ext") == 0 && v) {
            v = argv[++i];
            exts = strcmp(v, "v1") == 0 ? HK_SIGSTORE_ISSUER_V1 : strcmp(v, "v2") == 0 ? HK_SIGSTORE_ISSUER_V2
                   : strcmp(v, "both") == 0 ? HK_SIGSTORE_ISSUER_V1 | HK_SIGSTORE_ISSUER_V2 : 0;
        } else if (strcmp(a, "--staging") == 0) staging = 1;
        else if (strcmp(a, "--json") == 0) json = 1;
        else if (strcmp(a, "--default-policy") == 0) use_default = 1;
        else if (a[0] == '-' && a[1] == '-') return usage();
        else artifact = a;
    }
    if (!bundle || !artifact) return usage();
    if (!root_path)
        root_path = staging ? HK_SOURCE_DIR "/tests/sigstore/staging_trusted_root.json"
                            : HK_SOURCE_DIR "/data/sigstore/trusted_root.json";

    hk_sigstore_trust_root *root = NULL;
    if (hk__sigstore_trust_root_load(&root, root_path) != HK_OK) {
        fprintf(stderr, "%s\n", hk_last_error());
        return 1;
    }
    char *bjson = NULL, *data = NULL, *key = NULL;
    size_t blen = 0, dlen = 0, klen = 0;
    int rc = HK_OK;
    if (hk__read_file(&bjson, &blen, bundle, 64u << 20) != HK_OK ||
        (key_path && hk__read_file(&key, &klen, key_path, 1u << 20) != HK_OK)) {
        fprintf(stderr, "%s\n", hk_last_error());
        free(bjson);
        hk__sigstore_trust_root_free(root);
        return 1;
    }
    hk_sigstore_policy pol = {issuer, exts, identity, repo, signers, nsigners};
    hk_sigstore_verify_opts opts = {use_default ? NULL : &pol, use_default ? 0 : 1, dsse, key, klen};
    hk_sigstore_result res;
    memset(&res, 0, sizeof res);
    unsigned char d[32];
    if (strncmp(artifact, "sha256:", 7) == 0 && strlen(artifact + 7) == 64 && hk__unhex(d, artifact + 7, 32) == HK_OK) {
        rc = hk__sigstore_verify_ex(&res, root, &opts, d, NULL, 0, bjson, blen);
    } else if (hk__read_file(&data, &dlen, artifact, 1u << 30) != HK_OK) {
        fprintf(stderr, "%s\n", hk_last_error());
        rc = -1;
    } else {
        unsigned char full[64];
        hk_hasher *h = hk__hasher_new(HK_HASH_SHA256, 0);
        if (h) hk__hasher_update(h, data, dlen);
        if (h && hk__hasher_finish(h, full) == 32) {
            memcpy(d, full, 32);
            rc = hk__sigstore_verify_ex(&res, root, &opts, d, data, dlen, bjson, blen);
        } else {
            fprintf(stderr, "out of memory\n");
            rc = -1;
        }
    }
    if (rc == -1) {
        /* reported above */
    } else if (rc != HK_OK) {
        fprintf(stderr, "%s: %s\n", hk_error_name(rc), hk_last_error());
    } else if (json) {
        int first = 1;
        printf("{");
        json_field("issuer", res.issuer, &first);
        json_field("san", res.san, &first);
        json_field("source_repo", res.source_repo, &first);
        json_field("signer_uri", res.signer_uri, &first);
        printf(",\"integrated_time\":%lld,\"tsa_time\":%lld,\"log_index\":%lld,\"bundle_version\":%d,"
               "\"policy_index\":%d,\"checks\":%u,\"dsse\":%d,\"managed_key\":%d}\n",
               (long long)res.integrated_time, (long long)res.tsa_time, (long long)res.log_index,
               res.bundle_version, res.policy_index, res.checks, res.dsse, res.managed_key);
    } else {
        printf("OK\n");
    }
    hk__sigstore_result_free(&res);
    free(bjson);
    free(data);
    free(key);
    hk__sigstore_trust_root_free(root);
    return rc == HK_OK ? 0 : 1;
}
