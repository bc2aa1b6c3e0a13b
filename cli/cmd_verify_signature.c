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

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "version", 0, "N", "the kernel's major version N (also accepted positionally, as kernels does)", NULL, NULL},
    {HK_OPT_FLAG, "all-variants", 0, NULL, "every variant instead of the one this machine would load", NULL, NULL},
    {HK_OPT_FLAG, "filter-unsigned", 0, NULL, "skip variants without a signature bundle", NULL, NULL},
    {HK_OPT_FLAG, "filter-no-digest", 0, NULL, "skip variants whose metadata has no digest", NULL, NULL},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print each variant's outcome (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_verify_signature = {
    .name = "verify-signature",
    .summary = "verify a kernel's Sigstore signatures as `kernels verify-signature` does",
    .synopsis = "hubkern verify-signature ORG/NAME (--version N | N) [--all-variants] [--filter-unsigned]\n"
                "                                [--filter-no-digest] [--json] [hub options]",
    .description =
        "Pulls the variant this machine would load (--all-variants: every variant) and verifies that its\n"
        "metadata.json is signed (metadata.json.sigstore) by an identity of the policies (kernels' default:\n"
        "the build workflows of huggingface/kernels-community; more with HUBKERN_SIGNATURE_POLICIES) and\n"
        "that every file matches the metadata's digest. --filter-unsigned skips unsigned variants,\n"
        "--filter-no-digest variants without a digest. Trust root: HUBKERN_SIGSTORE_TRUST_ROOT, else\n"
        "`hubkern trust-root path`. Exit status 1 when a variant fails.\n",
    .tables = {k_opts, cli_hub_opts},
    .table_titles = k_titles,
    .json = 1,
};

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

int cli_cmd_verify_signature(int argc, char **argv) {
    cli_args args;
    int rc = cli_parse(&args, &cli_spec_verify_signature, argc, argv);
    if (rc || args.help) {
        if (!rc) cli_print_help(&cli_spec_verify_signature);
        cli_args_free(&args);
        return rc;
    }
    cli_hub_args a;
    cli_hub_args_get(&a, &args);
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    int json = cli_json();
    int filter_unsigned = cli_count(&args, "filter-unsigned") > 0;
    int filter_no_digest = cli_count(&args, "filter-no-digest") > 0;
    s.all_variants = cli_count(&args, "all-variants") > 0;
    s.trust_remote_code = cli_count(&args, "trust-remote-code") > 0;
    s.repo_id = args.npos ? args.pos[0] : NULL;
    rc = cli_int(&args, "version", 1000000, &s.kernel_version);
    if (!rc && args.npos == 2 && s.kernel_version < 0) { /* kernels takes the version positionally */
        char *end;
        long n = strtol(args.pos[1], &end, 10);
        if (!*args.pos[1] || *end || n < 0 || n > 1000000)
            rc = cli_usage_error("the version is a non-negative integer, got '%s'", args.pos[1]);
        else s.kernel_version = (int)n;
    } else if (!rc && args.npos >= 2) {
        rc = cli_usage_error("unexpected argument '%s'", args.pos[args.npos - 1]);
    }
    if (!rc && !s.repo_id) rc = cli_usage_error("missing ORG/NAME (the kernel repo)");
    else if (!rc && s.kernel_version < 0) rc = cli_usage_error("--version N (or N after ORG/NAME) is required");
    cli_args_free(&args); /* the strings above live in argv */
    if (rc) return rc;
    s.signature = HK_SIGNATURE_OFF; /* checked below, variant by variant, with kernels' outcomes */
    hk_hub *hub = NULL;
    if (cli_hub_open(&hub, &a, NULL, NULL)) return cli_report_error(NULL);
    hk_pull_result *r = NULL;
    if (hk_hub_pull(&r, hub, &s)) {
        int code = hk_last_error_code(), status = 1;
        if (!json && (code == HK_ERR_DIGEST || code == HK_ERR_INTEGRITY)) /* the pull keeps no mismatching file */
            printf("\u274c %s: kernel integrity check failed\n%s\n", s.repo_id, hk_last_error());
        else
            status = cli_report_error(NULL); /* 2 for an argument the pull refused */
        hk_hub_free(hub);
        return status;
    }
    int failed = 0;
    cJSON *out = json ? cJSON_CreateObject() : NULL;
    cJSON *list = out ? cJSON_AddArrayToObject(out, "variants") : NULL;
    if (out) {
        cJSON_AddStringToObject(out, "repo_id", hk_pull_result_repo(r));
        cJSON_AddStringToObject(out, "commit", hk_pull_result_commit(r));
    }
    for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) {
        int outcome = HK_SIGNATURE_FAILED, skipped = 0;
        char *reason = NULL;
        const char *variant = hk_pull_result_variant(r, i);
        if (hk_signature_verify_variant(&outcome, &reason, hub, hk_pull_result_repo(r), hk_pull_result_variant_path(r, i))) {
            failed = 1;
            cli_report_error(variant);
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
        cli_print_json(out);
    }
    hk_pull_result_free(r);
    hk_hub_free(hub);
    return failed;
}
