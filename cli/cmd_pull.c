/* hubkern pull: resolve a kernel version or revision, choose the variant for this machine and
 * download it into the shared cache, verified. */
#include "cli/cli.h"
#include "cli/progress.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hk_cli_opt k_opts[] = {
    {HK_OPT_VALUE, "version", 0, "N", "the kernel's major version N (branch vN)", NULL, NULL},
    {HK_OPT_VALUE, "revision", 0, "REV", "a branch, tag or commit instead of --version", NULL, NULL},
    {HK_OPT_VALUE, "variant", 0, "V", "this exact build variant instead of the one chosen for this machine", NULL, NULL},
    {HK_OPT_FLAG, "all-variants", 0, NULL, "every variant under build/", NULL, NULL},
    {HK_OPT_VALUE, "signature", 0, "MODE", "the metadata.json.sigstore check (docs/sigstore.md); default: require for "
     "orgs a signing policy covers, warn for others (HUBKERN_SIGNATURE)", NULL, "require|warn|off"},
    {HK_OPT_VALUE, "backend", 0, "B", "choose the variant for this backend (cpu, cuda, rocm, ...)", NULL,
     "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as one JSON object on stdout", NULL, NULL},
    {HK_OPT_VALUE, "progress", 0, "MODE", "auto (a bar on a terminal), bar, plain (a line every 2 s) or none", NULL,
     "auto|bar|plain|none"},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const hk_cli_spec hk_spec_pull = {
    .name = "pull",
    .summary = "download a kernel variant into the cache, verified",
    .synopsis = "hubkern pull ORG/NAME (--version N | --revision REV) [--variant V | --all-variants] [options]",
    .description =
        "Downloads build/<variant>/ of a kernel into the huggingface_hub cache (KERNELS_CACHE, HF_HUB_CACHE,\n"
        "HF_HOME/hub), checking every file's size and hash and the metadata.json digest, and writes\n"
        "refs/vN so that offline use works. Prints the variant directory (or JSON with --json).\n"
        "Online, kernel-status.toml redirects are followed: the destination repo is pulled (a note on\n"
        "stderr says so; --json adds \"redirected_from\"), with its publisher checked too.\n"
        "A cached variant is re-checked against its digest on every use; files that its verification\n"
        "receipt shows unchanged since they were hashed (same inode, size, mtime, ctime) are not read\n"
        "again (HUBKERN_VERIFY=always: hash everything).\n"
        "Ctrl-C stops the download at once; the files completed so far stay in the cache (exit 130).\n"
        "Environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT,\n"
        "HF_HUB_DISABLE_PROGRESS_BARS, HUBKERN_VERIFY, HUBKERN_RECEIPTS_DIR.\n",
    .tables = {k_opts, hk_cli_hub_opts},
    .table_titles = k_titles,
    .conflicts = "version,revision;variant,all-variants",
    .json = 1,
};

static void print_json(hk_pull_result *r, hk_hub *hub, const char *asked, bool moved) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "repo", hk_pull_result_repo(r));
    if (moved) cJSON_AddStringToObject(j, "redirected_from", asked);
    cJSON_AddStringToObject(j, "revision", hk_pull_result_revision(r));
    cJSON_AddStringToObject(j, "commit", hk_pull_result_commit(r));
    cJSON_AddStringToObject(j, "snapshot", hk_pull_result_snapshot(r));
    cJSON_AddStringToObject(j, "cache", hk_hub_cache_root(hub));
    cJSON_AddBoolToObject(j, "offline", hk_pull_result_offline(r));
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) {
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "name", hk_pull_result_variant(r, i));
        cJSON_AddStringToObject(v, "path", hk_pull_result_variant_path(r, i));
        cJSON_AddItemToArray(vs, v);
    }
    cJSON *fs = cJSON_AddArrayToObject(j, "files");
    for (size_t i = 0; i < hk_pull_result_file_count(r); i++)
        cJSON_AddItemToArray(fs, cJSON_CreateString(hk_pull_result_file(r, i)));
    cJSON_AddNumberToObject(j, "files_downloaded", (double)hk_pull_result_files_downloaded(r));
    cJSON_AddNumberToObject(j, "bytes_downloaded", (double)hk_pull_result_bytes_downloaded(r));
    cJSON_AddNumberToObject(j, "bytes_verified", (double)hk_pull_result_bytes_verified(r));
    cJSON_AddNumberToObject(j, "bytes_trusted", (double)hk_pull_result_bytes_trusted(r));
    hk_cli_print_json(j);
}

int hk_cmd_pull(int argc, char **argv) {
    hk_cli_args a;
    int rc = hk_cli_parse(&a, &hk_spec_pull, argc, argv);
    if (rc || a.help) {
        if (!rc) hk_cli_print_help(&hk_spec_pull);
        hk_cli_args_free(&a);
        return rc;
    }
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    hk_cli_hub_args h;
    hk_cli_hub_args_get(&h, &a);
    s.revision = hk_cli_str(&a, "revision");
    s.variant = hk_cli_str(&a, "variant");
    s.backend = hk_cli_str(&a, "backend");
    s.all_variants = hk_cli_count(&a, "all-variants") > 0;
    s.trust_remote_code = hk_cli_count(&a, "trust-remote-code") > 0;
    hk_cli_progress prog;
    if ((rc = hk_cli_int(&a, "version", 1000000, &s.kernel_version))) goto out;
    const char *sig = hk_cli_str(&a, "signature");
    if (sig && hk_signature_mode_parse(&s.signature, sig)) {
        rc = hk_cli_usage_error("--signature: %s", hk_last_error());
        goto out;
    }
    if (a.npos == 0) {
        rc = hk_cli_usage_error("missing ORG/NAME (the kernel repo to pull)");
        goto out;
    }
    if (a.npos > 1) {
        rc = hk_cli_usage_error("unexpected argument '%s'", a.pos[1]);
        goto out;
    }
    s.repo_id = a.pos[0];
    if (s.kernel_version < 0 && !s.revision) {
        rc = hk_cli_usage_error("--version N or --revision REV is required");
        goto out;
    }
    if ((rc = hk_cli_check_backend(s.backend)) || (rc = hk_cli_progress_init(&prog, hk_cli_str(&a, "progress"))))
        goto out;
    hk_cli_catch_interrupt();
    hk_hub *hub = NULL;
    if (hk_cli_hub_open(&hub, &h, hk_cli_progress_cb, &prog)) {
        rc = hk_cli_report_error(NULL);
        goto out;
    }
    hk_pull_result *r = NULL;
    int prc = hk_hub_pull(&r, hub, &s);
    hk_cli_progress_done(&prog);
    if (prc) {
        int cancelled = hk_last_error_code() == HK_ERR_CANCELLED;
        rc = hk_cli_report_error(NULL);
        if (cancelled) {
            char done[32], total[32];
            snprintf(done, sizeof done, "%.1f MB", prog.done_bytes / 1e6);
            snprintf(total, sizeof total, "%.1f MB", prog.total_bytes / 1e6);
            fprintf(stderr, "hubkern pull: interrupted: %u of %u files (%s of %s) were complete and stay in %s; "
                    "run the same command to fetch the rest\n", prog.done_files, prog.total_files, done, total,
                    hk_hub_cache_root(hub));
        }
        hk_hub_free(hub);
        goto out;
    }
    bool moved = hk_cli_note_redirect(s.repo_id, hk_pull_result_repo(r), NULL);
    if (hk_cli_json()) {
        print_json(r, hub, s.repo_id, moved);
    } else {
        if (!hk_cli_quiet())
            fprintf(stderr, "%s %s -> %.12s: %zu file%s, %zu downloaded (%.1f MB), all verified\n",
                    hk_pull_result_repo(r), hk_pull_result_revision(r), hk_pull_result_commit(r),
                    hk_pull_result_file_count(r), hk_pull_result_file_count(r) == 1 ? "" : "s",
                    hk_pull_result_files_downloaded(r), hk_pull_result_bytes_downloaded(r) / 1e6);
        for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) printf("%s\n", hk_pull_result_variant_path(r, i));
    }
    hk_pull_result_free(r);
    hk_hub_free(hub);
out:
    hk_cli_args_free(&a);
    return rc;
}
