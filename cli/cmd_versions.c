/* hubkern versions: the major versions (vN branches) of a kernel repo. */
#include "cli/cli.h"

#include <hubkern.h>

#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: hubkern versions ORG/NAME [--json] [--endpoint URL] [--cache DIR] [--offline]\n\n"
               "Lists the versions (vN branches) of a kernel with their commits; 'cached' marks versions whose\n"
               "refs/vN is in the local cache. Offline, lists the cached versions only. Online, a version whose\n"
               "kernel-status.toml redirects is marked '-> ORG/NAME@REV' (JSON: redirects_to, redirect_revision;\n"
               "a chain that cannot be followed: redirect_error): pull, load, lock and info of that version\n"
               "act on the destination.\n");
}

int hk_cmd_versions(int argc, char **argv);
int hk_cmd_versions(int argc, char **argv) {
    hk_cli_hub_args a = {0};
    const char *repo = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        int c = hk_cli_hub_opt(&a, argc, argv, &i);
        if (c < 0) return 2;
        if (c) continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (argv[i][0] != '-' && !repo) repo = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!repo) {
        usage(stderr);
        return 2;
    }
    hk_hub *hub = NULL;
    if (hk_cli_hub_open(&hub, &a, NULL, NULL)) return hk_cli_report_error("versions");
    hk_hub_version_list *v = NULL;
    if (hk_hub_list_versions(&v, hub, repo)) {
        hk_hub_free(hub);
        return hk_cli_report_error(NULL);
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
            if (dest) {
                cJSON_AddStringToObject(o, "redirects_to", dest);
                cJSON_AddStringToObject(o, "redirect_revision", dest_rev);
            }
            if (redirect_error) cJSON_AddStringToObject(o, "redirect_error", redirect_error);
            cJSON_AddItemToArray(j, o);
        } else {
            printf("v%-4d %s%s%s", hk_hub_version_list_number(v, i), hk_hub_version_list_commit(v, i), i + 1 == n ? "  latest" : "", is_cached ? "  cached" : "");
            if (dest) printf("  -> %s@%s", dest, dest_rev);
            printf("\n");
            if (redirect_error) fprintf(stderr, "hubkern: v%d: %s\n", hk_hub_version_list_number(v, i), redirect_error);
        }
        hk_free(dest);
        hk_free(dest_rev);
        hk_free(dcommit);
        free(redirect_error);
    }
    hk_clear_error();
    if (j) {
        char *s = cJSON_Print(j);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
    } else if (n == 0) {
        fprintf(stderr, "%s has no versions%s\n", repo, hk_hub_is_offline(hub) ? " in the cache" : "");
    }
    free(dir);
    hk_hub_version_list_free(v);
    hk_hub_free(hub);
    return 0;
}
