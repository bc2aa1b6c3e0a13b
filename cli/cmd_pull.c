/* hubkern pull: resolve a kernel version or revision, choose the variant for this machine and
 * download it into the shared cache, verified. */
#include "cli/cli.h"

#include <hubkern.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bar {
    int drawn;
} bar;

static int draw_bar(void *ud, const hk_progress *p) {
    bar *b = ud;
    if (strcmp(p->stage, "download") != 0 || p->total_bytes == 0) return 0;
    double f = (double)p->done_bytes / (double)p->total_bytes;
    if (f > 1) f = 1;
    int w = 30, k = (int)(f * w);
    char cells[31];
    for (int i = 0; i < w; i++) cells[i] = i < k ? '#' : ' ';
    cells[w] = '\0';
    fprintf(stderr, "\r[%s] %3d%% %7.1f/%.1f MB  %u/%u files", cells, (int)(f * 100), p->done_bytes / 1e6,
            p->total_bytes / 1e6, p->done_files, p->total_files);
    fflush(stderr);
    b->drawn = 1;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern pull ORG/NAME (--version N | --revision REV) [--variant V | --all-variants]\n"
            "                    [--json] [--endpoint URL] [--cache DIR] [--offline] [--trust-remote-code]\n"
            "                    [--backend cpu|cuda|...]\n\n"
            "Downloads build/<variant>/ of a kernel into the huggingface_hub cache (KERNELS_CACHE, HF_HUB_CACHE,\n"
            "HF_HOME/hub), checking every file's size and hash and the metadata.json digest, and writes\n"
            "refs/vN so that offline use works. Prints the variant directory (or JSON with --json).\n"
            "Online, kernel-status.toml redirects are followed: the destination repo is pulled (a note on\n"
            "stderr says so; --json adds \"redirected_from\"), with its publisher checked too.\n"
            "A cached variant is re-checked against its digest on every use; files that its verification\n"
            "receipt shows unchanged since they were hashed (same inode, size, mtime, ctime) are not read\n"
            "again (HUBKERN_VERIFY=always: hash everything).\n"
            "Environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT,\n"
            "HUBKERN_VERIFY, HUBKERN_RECEIPTS_DIR.\n"
            "--signature require|warn|off: the metadata.json.sigstore check (docs/sigstore.md; default: require\n"
            "for orgs a policy covers, warn for others; HUBKERN_SIGNATURE, HUBKERN_SIGSTORE_TRUST_ROOT).\n");
}

int hk_cmd_pull(int argc, char **argv);
int hk_cmd_pull(int argc, char **argv) {
    hk_cli_hub_args a = {0};
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int c = hk_cli_hub_opt(&a, argc, argv, &i);
        if (c < 0) return 2;
        if (c) continue;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "--json") == 0) json = 1;
        else if (strcmp(o, "--all-variants") == 0) s.all_variants = 1;
        else if (strcmp(o, "--trust-remote-code") == 0) s.trust_remote_code = 1;
        else if ((strcmp(o, "--version") == 0 || strcmp(o, "--revision") == 0 || strcmp(o, "--variant") == 0 ||
                  strcmp(o, "--backend") == 0 || strcmp(o, "--signature") == 0) && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(o, "--version") == 0) {
                char *end;
                long n = strtol(v, &end, 10);
                if (*v == '\0' || *end || n < 0 || n > 1000000) {
                    fprintf(stderr, "hubkern: --version takes a non-negative integer, got '%s'\n", v);
                    return 2;
                }
                s.kernel_version = (int)n;
            } else if (strcmp(o, "--signature") == 0) { /* require|warn|off (hubkern/signature.h) */
                if (hk_signature_mode_parse(&s.signature, v)) return hk_cli_report_error("pull") + 1;
            } else if (strcmp(o, "--revision") == 0) s.revision = v;
            else if (strcmp(o, "--variant") == 0) s.variant = v;
            else s.backend = v;
        } else if (o[0] != '-' && !s.repo_id) s.repo_id = o;
        else {
            fprintf(stderr, "hubkern pull: unexpected argument '%s'\n\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (!s.repo_id || (s.kernel_version < 0) == (s.revision == NULL) || (s.variant && s.all_variants)) {
        usage(stderr);
        return 2;
    }
    bar b = {0};
    hk_hub *hub = NULL;
    if (hk_cli_hub_open(&hub, &a, isatty(STDERR_FILENO) && !json ? draw_bar : NULL, &b)) return hk_cli_report_error("pull");
    hk_pull_result *r = NULL;
    int rc = hk_hub_pull(&r, hub, &s);
    if (b.drawn) fprintf(stderr, "\n");
    if (rc) {
        hk_hub_free(hub);
        return hk_cli_report_error(NULL);
    }
    bool moved = hk_cli_note_redirect(s.repo_id, hk_pull_result_repo(r), NULL);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "repo", hk_pull_result_repo(r));
        if (moved) cJSON_AddStringToObject(j, "redirected_from", s.repo_id);
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
        char *txt = cJSON_Print(j);
        if (txt) printf("%s\n", txt);
        free(txt);
        cJSON_Delete(j);
    } else {
        fprintf(stderr, "%s %s -> %.12s: %zu file%s, %zu downloaded (%.1f MB), all verified\n", hk_pull_result_repo(r),
                hk_pull_result_revision(r), hk_pull_result_commit(r), hk_pull_result_file_count(r),
                hk_pull_result_file_count(r) == 1 ? "" : "s", hk_pull_result_files_downloaded(r),
                hk_pull_result_bytes_downloaded(r) / 1e6);
        for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) printf("%s\n", hk_pull_result_variant_path(r, i));
    }
    hk_pull_result_free(r);
    hk_hub_free(hub);
    return 0;
}
