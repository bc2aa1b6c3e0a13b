/* hubkern verify-signature: `kernels verify-signature` (kernels 0.17.2 cli/verify_signature.py) in
 * C: pull the variant for this machine (or every variant), then check each one's Sigstore bundle
 * before its metadata.json is parsed, then its digest over every file; the same outcomes, the same
 * lines, exit status 1 when any variant fails. */
#include "cli/cli.h"

#include <hubkern.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern verify-signature ORG/NAME (--version N | N) [--all-variants] [--filter-unsigned]\n"
            "                                [--filter-no-digest] [--json] [--endpoint URL] [--cache DIR]\n"
            "                                [--offline] [--trust-remote-code]\n\n"
            "Pulls the variant this machine would load (--all-variants: every variant) and verifies that its\n"
            "metadata.json is signed (metadata.json.sigstore) by an identity of the policies (kernels' default:\n"
            "the build workflows of huggingface/kernels-community; more with HUBKERN_SIGNATURE_POLICIES) and\n"
            "that every file matches the metadata's digest. --filter-unsigned skips unsigned variants,\n"
            "--filter-no-digest variants without a digest. Trust root: HUBKERN_SIGSTORE_TRUST_ROOT, else\n"
            "`hubkern trust-root path`. Exit status 1 when a variant fails.\n");
}

static const char *outcome_key(int o) {
    static const char *const k[] = {"success", "signature_bundle_missing", "signature_bundle_invalid",
                                    "metadata_missing", "signature_verification_failure", "metadata_invalid",
                                    "digest_missing", "digest_verification_failure"};
    return o >= 0 && o <= HK_SIGNATURE_DIGEST_MISMATCH ? k[o] : "?";
}

/* kernels' line for an outcome; *skipped when a filter hides it; returns whether it failed */
static int report(int outcome, const char *variant, const char *reason, int filter_unsigned, int filter_no_digest,
                  int *skipped, int quiet) {
    *skipped = 0;
    FILE *f = quiet ? NULL : stdout;
    switch (outcome) {
    case HK_SIGNATURE_BUNDLE_MISSING:
        if ((*skipped = filter_unsigned)) return 0;
        if (f) fprintf(f, "\u274c %s: cannot verify kernel integrity, signature not found\n", variant);
        return 1;
    case HK_SIGNATURE_BUNDLE_INVALID:
        if (f) fprintf(f, "\u274c %s: cannot verify kernel integrity, invalid signature bundle:\n%s\n", variant, reason);
        return 1;
    case HK_SIGNATURE_METADATA_INVALID:
        if (f) fprintf(f, "\u274c %s: cannot verify kernel integrity, invalid metadata:\n%s\n", variant, reason);
        return 1;
    case HK_SIGNATURE_METADATA_MISSING:
    case HK_SIGNATURE_DIGEST_MISSING:
        if ((*skipped = filter_no_digest)) return 0;
        if (f) fprintf(f, "\u274c %s: cannot verify kernel integrity, metadata does not have a digest\n", variant);
        return 1;
    case HK_SIGNATURE_DIGEST_MISMATCH:
        if (f) fprintf(f, "\u274c %s: kernel integrity check failed\n%s\n", variant, reason);
        return 1;
    case HK_SIGNATURE_FAILED:
        if (f) fprintf(f, "\u274c %s: metadata signature verification failed:\n%s\n", variant, reason);
        return 1;
    default:
        if (f) fprintf(f, "\u2705 %s: kernel metadata is correctly signed\n", variant);
        return 0;
    }
}

int hk_cmd_verify_signature(int argc, char **argv);
int hk_cmd_verify_signature(int argc, char **argv) {
    hk_cli_hub_args a = {0};
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    int json = 0, filter_unsigned = 0, filter_no_digest = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int c = hk_cli_hub_opt(&a, argc, argv, &i);
        if (c < 0) return 2;
        if (c) continue;
        char *end = NULL;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "--json") == 0) json = 1;
        else if (strcmp(o, "--all-variants") == 0) s.all_variants = 1;
        else if (strcmp(o, "--filter-unsigned") == 0) filter_unsigned = 1;
        else if (strcmp(o, "--filter-no-digest") == 0) filter_no_digest = 1;
        else if (strcmp(o, "--trust-remote-code") == 0) s.trust_remote_code = 1;
        else if ((strcmp(o, "--version") == 0 && i + 1 < argc) || (o[0] != '-' && s.repo_id && s.kernel_version < 0)) {
            const char *v = o[0] == '-' ? argv[++i] : o; /* kernels takes the version positionally */
            long n = strtol(v, &end, 10);
            if (*v == '\0' || *end || n < 0 || n > 1000000) {
                fprintf(stderr, "hubkern: the version is a non-negative integer, got '%s'\n", v);
                return 2;
            }
            s.kernel_version = (int)n;
        } else if (o[0] != '-' && !s.repo_id) s.repo_id = o;
        else {
            fprintf(stderr, "hubkern verify-signature: unexpected argument '%s'\n\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (!s.repo_id || s.kernel_version < 0) {
        usage(stderr);
        return 2;
    }
    s.signature = HK_SIGNATURE_OFF; /* checked below, variant by variant, with kernels' outcomes */
    hk_hub *hub = NULL;
    if (hk_cli_hub_open(&hub, &a, NULL, NULL)) return hk_cli_report_error("verify-signature");
    hk_pull_result *r = NULL;
    if (hk_hub_pull(&r, hub, &s)) {
        int code = hk_last_error_code();
        if (code == HK_ERR_DIGEST || code == HK_ERR_INTEGRITY) /* the pull refuses to keep mismatching files */
            printf("\u274c %s: kernel integrity check failed\n%s\n", s.repo_id, hk_last_error());
        else
            hk_cli_report_error("verify-signature");
        hk_hub_free(hub);
        return 1;
    }
    int failed = 0;
    cJSON *out = json ? cJSON_CreateObject() : NULL;
    cJSON *list = out ? cJSON_AddArrayToObject(out, "variants") : NULL;
    if (out) {
        cJSON_AddStringToObject(out, "repo", hk_pull_result_repo(r));
        cJSON_AddStringToObject(out, "commit", hk_pull_result_commit(r));
    }
    for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) {
        int outcome = HK_SIGNATURE_FAILED, skipped = 0;
        char *reason = NULL;
        const char *variant = hk_pull_result_variant(r, i);
        if (hk_signature_verify_variant(&outcome, &reason, hub, hk_pull_result_repo(r), hk_pull_result_variant_path(r, i))) {
            failed = 1;
            hk_cli_report_error(variant);
            continue;
        }
        failed |= report(outcome, variant, reason ? reason : "", filter_unsigned, filter_no_digest, &skipped, json);
        if (list) {
            cJSON *v = cJSON_CreateObject();
            cJSON_AddStringToObject(v, "variant", variant);
            cJSON_AddStringToObject(v, "outcome", outcome_key(outcome));
            cJSON_AddBoolToObject(v, "skipped", skipped);
            if (reason) cJSON_AddStringToObject(v, outcome == HK_SIGNATURE_VERIFIED ? "identity" : "reason", reason);
            cJSON_AddItemToArray(list, v);
        }
        hk_free(reason);
    }
    if (out) {
        cJSON_AddBoolToObject(out, "ok", !failed);
        char *t = cJSON_Print(out);
        if (t) printf("%s\n", t);
        free(t);
        cJSON_Delete(out);
    }
    hk_pull_result_free(r);
    hk_hub_free(hub);
    return failed;
}
