/* hubkern versions: the major versions (vN branches) of a kernel repo. */
#include "cli/cli.h"

#include <hubkern.h>

#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_versions = {
    .name = "versions",
    .summary = "list the versions (vN branches) of a kernel",
    .synopsis = "hubkern versions ORG/NAME [--json] [--endpoint URL] [--cache-dir DIR] [--offline]",
    .description =
        "Lists the versions (vN branches) of a kernel with their commits; 'cached' marks versions whose\n"
        "refs/vN is in the local cache. Offline, lists the cached versions only. Online, a version whose\n"
        "kernel-status.toml redirects is marked '-> ORG/NAME@REV' (JSON: redirects_to, redirect_revision;\n"
        "a chain that cannot be followed: redirect_error): pull, load, lock and info of that version\n"
        "act on the destination.\n",
    .tables = {k_opts, cli_hub_opts},
    .table_titles = k_titles,
    .json = 1,
};

int cli_cmd_versions(int argc, char **argv) {
    cli_args a;
    int prc = cli_parse(&a, &cli_spec_versions, argc, argv);
    if (prc || a.help) {
        if (!prc) cli_print_help(&cli_spec_versions);
        cli_args_free(&a);
        return prc;
    }
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    int json = cli_json();
    const char *repo = a.npos ? a.pos[0] : NULL;
    if (!repo) prc = cli_usage_error("missing ORG/NAME (the kernel repo)");
    else if (a.npos > 1) prc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
    if (prc) {
        cli_args_free(&a);
        return prc;
    }
    hk_hub *hub = NULL;
    hk_hub_version_list *v = NULL;
    /* a read-only client: listing versions never writes to the cache (issue 24 item 6) */
    if (cli_hub_open(&hub, &h, NULL, NULL) || hk_hub_set_read_only(hub, 1) ||
        hk_hub_list_versions(&v, hub, repo)) {
        hk_hub_free(hub);
        cli_args_free(&a);
        return cli_report_error(NULL);
    }
    size_t n = hk_hub_version_list_count(v);
    char *dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, repo);
    cJSON *j = json ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < n; i++) {
        char ref[32], *cached = NULL;
        snprintf(ref, sizeof ref, "v%d", hk_hub_version_list_number(v, i));
        bool is_cached = dir && hk_cache_resolve_ref(&cached, dir, ref) == 0 &&
                         strcmp(cached, hk_hub_version_list_commit(v, i)) == 0;
        hk_free(cached);
        /* online: does kernel-status.toml at this version's commit redirect (where to, or why the
         * chain cannot be followed)? The versions listed stay those of the repo as asked. */
        char *dest = NULL, *dest_rev = NULL, *redirect_error = NULL, *dcommit = NULL;
        if (!hk_hub_is_offline(hub)) {
            hk_pull_spec s = HK_PULL_SPEC_INIT;
            s.repo_id = repo;
            s.revision = hk_hub_version_list_commit(v, i);
            s.trust_remote_code = 1; /* only looks */
            if (hk_hub_resolve_spec(&dest, &dest_rev, &dcommit, hub, &s) != HK_OK) {
                redirect_error = hk__asprintf("%s [%s]", hk_last_error(), hk_error_name(hk_last_error_code()));
            } else if (strcmp(dest, repo) == 0) {
                hk_free(dest);
                hk_free(dest_rev);
                dest = dest_rev = NULL;
            }
        }
        if (j) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "version", hk_hub_version_list_number(v, i));
            cJSON_AddStringToObject(o, "commit", hk_hub_version_list_commit(v, i));
            cJSON_AddBoolToObject(o, "cached", is_cached);
            cJSON_AddBoolToObject(o, "latest", i + 1 == n);
            if (dest) cJSON_AddStringToObject(o, "redirects_to", dest);
            else cJSON_AddNullToObject(o, "redirects_to");
            if (dest) cJSON_AddStringToObject(o, "redirect_revision", dest_rev);
            else cJSON_AddNullToObject(o, "redirect_revision");
            if (redirect_error) cJSON_AddStringToObject(o, "redirect_error", redirect_error);
            else cJSON_AddNullToObject(o, "redirect_error");
            cJSON_AddItemToArray(j, o);
        } else {
            printf("v%-4d %s%s%s", hk_hub_version_list_number(v, i), hk_hub_version_list_commit(v, i), i + 1 == n ? "  latest" : "", is_cached ? "  cached" : "");
            if (dest) printf("  -> %s@%s", dest, dest_rev);
            printf("\n");
            if (redirect_error) fprintf(stderr, "hubkern versions: v%d: %s\n", hk_hub_version_list_number(v, i), redirect_error);
        }
        hk_free(dest);
        hk_free(dest_rev);
        hk_free(dcommit);
        free(redirect_error);
    }
    hk_clear_error();
    if (j) { /* the envelope is an object: the list goes under "versions" (docs/json.md) */
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "repo_id", repo);
        cJSON_AddBoolToObject(doc, "offline", hk_hub_is_offline(hub));
        cJSON_AddItemToObject(doc, "versions", j);
        cli_print_json(doc);
    } else if (n == 0) {
        fprintf(stderr, "%s has no versions%s\n", repo, hk_hub_is_offline(hub) ? " in the cache" : "");
    }
    free(dir);
    hk_hub_version_list_free(v);
    hk_hub_free(hub);
    cli_args_free(&a);
    return 0;
}
