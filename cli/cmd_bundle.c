/* hubkern bundle: carry cached repos to machines without network access. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "cache root (default: KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub, ...)", "cache",
     NULL},
    {HK_OPT_VALUE, "repo-type", 0, "T", "model, dataset, space or kernel (default kernel)", NULL,
     "kernel|model|dataset|space"},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

const cli_spec cli_spec_bundle = {
    .name = "bundle",
    .summary = "move cached repos to air-gapped machines as one tar file",
    .synopsis = "hubkern bundle create OUT.tar[.gz|.zst|.bz2|.xz] REPO [REPO...] [--cache-dir DIR]\n"
                "    [--repo-type T] [--json]\n"
                "hubkern bundle extract IN.tar[.gz|.zst|.bz2|.xz] [--cache-dir DIR] [--json]\n"
                "hubkern bundle list IN.tar[.gz|.zst|.bz2|.xz] [--json]",
    .description =
        "Moves cached repos (blobs, snapshots, refs) between machines, e.g. from a node that can\n"
        "reach the Hub to an air-gapped fleet. REPO is org/name (of --repo-type, default kernel) or a\n"
        "cache folder name such as kernels--org--name. extract verifies every blob against its\n"
        "name (sha256 or git sha1), accepts nothing outside the cache layout, and writes refs last.\n"
        "create compresses as OUT's name says (.tar.gz, .tar.zst, .tar.bz2, .tar.xz; .tar: none) and\n"
        "refuses any other name.\n",
    .tables = {k_opts},
    .subcommands = "create extract list",
    .json = 1,
};

static void print_entry(void *ud, const char *path, char kind, uint64_t size, const char *target) {
    cJSON *arr = ud;
    if (arr) {
        cJSON *e = cJSON_CreateObject();
        char k[2] = {kind, 0};
        cJSON_AddStringToObject(e, "kind", k);
        cJSON_AddStringToObject(e, "path", path);
        if (kind == 'l') cJSON_AddStringToObject(e, "target", target ? target : "");
        else cJSON_AddNumberToObject(e, "size", (double)size);
        cJSON_AddItemToArray(arr, e);
    } else if (kind == 'l') {
        printf("l %12s %s -> %s\n", "", path, target ? target : "?");
    } else {
        printf("%c %12llu %s\n", kind, (unsigned long long)size, path);
    }
}

static cJSON *report_json(const hk_bundle_report *st, const char *file, const char *root) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "file", file);
    cJSON_AddStringToObject(j, "cache", root);
    cJSON_AddNumberToObject(j, "repos", hk_bundle_report_repos(st));
    cJSON_AddNumberToObject(j, "blobs_added", hk_bundle_report_blobs_added(st));
    cJSON_AddNumberToObject(j, "blobs_present", hk_bundle_report_blobs_present(st));
    cJSON_AddNumberToObject(j, "bytes", (double)hk_bundle_report_bytes(st));
    cJSON_AddNumberToObject(j, "snapshot_files", hk_bundle_report_links(st));
    cJSON_AddNumberToObject(j, "refs", hk_bundle_report_refs(st));
    return j;
}

static int run(const cli_args *a) {
    if (a->npos == 0) return cli_usage_error("missing subcommand (create, extract or list)");
    const char *verb = a->pos[0];
    bool create = !strcmp(verb, "create"), extract = !strcmp(verb, "extract"), list = !strcmp(verb, "list");
    if (!create && !extract && !list) return cli_usage_error("unknown subcommand '%s' (create, extract or list)", verb);
    static char name[32];
    if (create || extract || list) { /* "bundle create" in messages and as the JSON command */
        snprintf(name, sizeof name, "bundle %s", verb);
        cli_set_command(name);
    }
    if (a->npos < 2) return cli_usage_error("missing the %s file", create ? "OUT.tar" : "IN.tar");
    if (create && a->npos < 3) return cli_usage_error("missing REPO (at least one repo to bundle)");
    if (!create && a->npos > 2) return cli_usage_error("unexpected argument '%s'", a->pos[2]);
    const char *file = a->pos[1];
    hk_repo_type type = HK_REPO_KERNEL;
    const char *ts = cli_str(a, "repo-type");
    if (ts && hk_repo_type_parse(&type, ts)) return cli_usage_error("%s", hk_last_error());
    if (list) {
        cJSON *arr = cli_json() ? cJSON_CreateArray() : NULL;
        if (hk_bundle_list(file, print_entry, arr)) {
            cJSON_Delete(arr);
            return cli_report_error(NULL);
        }
        if (arr) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "file", file);
            cJSON_AddItemToObject(j, "entries", arr);
            cli_print_json(j);
        }
        return 0;
    }
    char *root = NULL;
    if (hk_cache_root(&root, cli_str(a, "cache-dir"), type)) return cli_report_error(NULL);
    hk_bundle_options o = HK_BUNDLE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_type = type;
    hk_bundle_report *st = NULL;
    int rc = create ? hk_bundle_create(&st, file, (const char *const *)(a->pos + 2), a->npos - 2, &o)
                    : hk_bundle_extract(&st, file, &o);
    if (rc) {
        rc = cli_report_error(NULL);
    } else if (cli_json()) {
        cli_print_json(report_json(st, file, root));
    } else if (create) {
        printf("bundled %u repo(s): %u blobs (%llu bytes), %u snapshot files, %u refs into %s\n",
               hk_bundle_report_repos(st), hk_bundle_report_blobs_added(st),
               (unsigned long long)hk_bundle_report_bytes(st), hk_bundle_report_links(st), hk_bundle_report_refs(st),
               file);
    } else {
        printf("imported %u repo(s) into %s: %u new blobs, %u already present (%llu bytes verified), "
               "%u snapshot files, %u refs\n",
               hk_bundle_report_repos(st), root, hk_bundle_report_blobs_added(st), hk_bundle_report_blobs_present(st),
               (unsigned long long)hk_bundle_report_bytes(st), hk_bundle_report_links(st), hk_bundle_report_refs(st));
    }
    hk_bundle_report_free(st);
    free(root);
    return rc;
}

int cli_cmd_bundle(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_bundle, argc, argv);
    if (!rc && a.help) rc = cli_print_help(&cli_spec_bundle);
    else if (!rc) rc = run(&a);
    cli_args_free(&a);
    return rc;
}
