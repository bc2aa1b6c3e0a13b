/* hubkern info: what the Hub (or the cache, offline) knows about a kernel: publisher trust,
 * versions, the variants of one version and the one this machine would use. */
#include "cli/cli.h"

#include <hubkern.h>

#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "version", 0, "N", "show version N (default: the newest)", NULL, NULL},
    {HK_OPT_VALUE, "revision", 0, "REV", "show a branch, tag or commit instead", NULL, NULL},
    {HK_OPT_VALUE, "backend", 0, "B", "choose the variant for this backend", NULL, "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_info = {
    .name = "info",
    .summary = "show a kernel's publisher trust, versions and variants",
    .synopsis = "hubkern info ORG/NAME [--version N | --revision REV] [--backend B] [--json] [hub options]",
    .description =
        "Shows the publisher trust status, the versions, and for one version (default: the newest) its\n"
        "commit, build variants and the variant this machine would pull. When that version's\n"
        "kernel-status.toml redirects (online), commit, variants and cache state are those of the\n"
        "destination, which `pull`/`load` would use: redirects_to, redirect_revision and\n"
        "redirect_trusted_publisher name it, and a note on stderr says so. Offline, everything comes\n"
        "from the cache and the endpoint shows as offline.\n",
    .tables = {k_opts, cli_hub_opts},
    .table_titles = k_titles,
    .conflicts = "version,revision",
    .json = 1,
};

/* What `kernels info` shows from metadata.json (name, version, minimum kernels version, license,
 * upstream, source), its provenance, and the dependency tree this machine would load (resolved as
 * hk_get_kernel would, publisher and arch checks included; nothing but metadata.json files is
 * downloaded). A tree hk_get_kernel would refuse is reported in dependency_tree_error; the rest of
 * the information is still shown. */
static void add_tree(cJSON *j, const char *repo, int version, const char *revision, const char *backend,
                     hk_hub *hub) {
    hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
    o.repo_id = repo;
    o.kernel_version = revision ? HK_VERSION_UNSET : version;
    o.revision = revision;
    o.backend = backend;
    o.hub = hub; /* info's read-only client: the tree is resolved without writing to the cache */
    o.no_local_kernels = 1;
    hk_kernel_tree *t = NULL;
    if (hk_kernel_tree_resolve(&t, &o, NULL) != HK_OK) {
        cJSON_AddStringToObject(j, "dependency_tree_error", hk_last_error());
        hk_clear_error();
        return;
    }
    const hk_kernel_metadata *md = hk_kernel_tree_metadata(t, 0);
    if (md) {
        cJSON_AddStringToObject(j, "name", md->name);
        cJSON_AddNumberToObject(j, "metadata_version", md->version);
        const char *minver = hk_kernel_metadata_kernels_minver(md);
        /* missing fields are null, as kernels prints None (docs/json.md); the text shows "-" */
        if (minver) cJSON_AddStringToObject(j, "kernels_minver", minver);
        else cJSON_AddNullToObject(j, "kernels_minver");
        cJSON_AddStringToObject(j, "license", md->license);
        if (md->upstream) cJSON_AddStringToObject(j, "upstream", md->upstream);
        else cJSON_AddNullToObject(j, "upstream");
        if (md->source) cJSON_AddStringToObject(j, "source", md->source);
        else cJSON_AddNullToObject(j, "source");
        const char *bv, *bc, *kc;
        int bd, kd;
        if (hk_kernel_metadata_provenance(md, &bv, &bc, &bd, &kc, &kd)) {
            cJSON *p = cJSON_AddObjectToObject(j, "provenance");
            cJSON_AddStringToObject(p, "kernel_builder_version", bv);
            if (bc) cJSON_AddStringToObject(p, "kernel_builder_commit", bc);
            if (bd >= 0) cJSON_AddBoolToObject(p, "kernel_builder_dirty", bd);
            if (kc) cJSON_AddStringToObject(p, "kernel_commit", kc);
            if (kd >= 0) cJSON_AddBoolToObject(p, "kernel_dirty", kd);
            cJSON_AddBoolToObject(p, "dirty", bd == 1 || kd == 1);
        }
    }
    cJSON *arr = cJSON_AddArrayToObject(j, "dependency_tree");
    for (size_t i = 0; i < hk_kernel_tree_count(t); i++) {
        cJSON *n = cJSON_CreateObject();
        cJSON_AddStringToObject(n, "repo_id", hk_kernel_tree_repo_id(t, i));
        if (hk_kernel_tree_revision(t, i)) cJSON_AddStringToObject(n, "revision", hk_kernel_tree_revision(t, i));
        else cJSON_AddNumberToObject(n, "version", hk_kernel_tree_version(t, i));
        cJSON_AddStringToObject(n, "commit", hk_kernel_tree_commit(t, i));
        cJSON_AddStringToObject(n, "variant", hk_kernel_tree_variant(t, i));
        cJSON_AddNumberToObject(n, "depth", hk_kernel_tree_depth(t, i));
        cJSON_AddItemToArray(arr, n);
    }
    hk_kernel_tree_free(t);
}

/* One piece: a command's main reads its options, asks the library in order and prints one report
 * (text or JSON) as it goes; split, each part would take the arguments, the client and the report
 * being built. */
int cli_cmd_info(int argc, char **argv) {
    cli_args a;
    int prc = cli_parse(&a, &cli_spec_info, argc, argv);
    if (prc || a.help) {
        if (!prc) cli_print_help(&cli_spec_info);
        cli_args_free(&a);
        return prc;
    }
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    int json = cli_json(), version = -1;
    const char *repo = a.npos ? a.pos[0] : NULL, *revision = cli_str(&a, "revision");
    const char *backend = cli_str(&a, "backend");
    if (!repo) prc = cli_usage_error("missing ORG/NAME (the kernel repo)");
    else if (a.npos > 1) prc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
    else if (!(prc = cli_int(&a, "version", 1000000, &version))) prc = cli_check_backend(backend);
    cli_args_free(&a); /* the strings above live in argv */
    if (prc) return prc;
    hk_hub *hub = NULL;
    if (cli_hub_open(&hub, &h, NULL, NULL)) return cli_report_error(NULL);
    hk_hub_set_read_only(hub, 1); /* info only asks: the cache stays as it was (issue 24 item 6) */
    int rc = 0;
    char *dest = NULL, *dest_rev = NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "repo_id", repo);
    /* offline, no endpoint is asked: say so instead of naming the one that would be */
    if (hk_hub_is_offline(hub)) cJSON_AddStringToObject(j, "endpoint", "(offline: the cache only)");
    else cJSON_AddStringToObject(j, "endpoint", hk_hub_endpoint(hub));
    cJSON_AddBoolToObject(j, "offline", hk_hub_is_offline(hub));
    if (!hk_hub_is_offline(hub)) {
        char org[128];
        const char *slash = strchr(repo, '/');
        snprintf(org, sizeof org, "%.*s", slash ? (int)(slash - repo) : (int)strlen(repo), repo);
        int trusted = 0;
        if (hk_hub_check_trust(&trusted, hub, org) == HK_OK) cJSON_AddBoolToObject(j, "trusted_publisher", trusted);
        else cJSON_AddStringToObject(j, "trusted_publisher", hk_last_error());
    }
    hk_hub_version_list *v = NULL;
    if (hk_hub_list_versions(&v, hub, repo)) {
        rc = cli_report_error(hk_hub_is_offline(hub) ? "offline" : NULL);
        goto out;
    }
    size_t n = hk_hub_version_list_count(v);
    cJSON *jv = cJSON_AddArrayToObject(j, "versions");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "version", hk_hub_version_list_number(v, i));
        cJSON_AddStringToObject(o, "commit", hk_hub_version_list_commit(v, i));
        cJSON_AddItemToArray(jv, o);
    }
    if (version < 0 && !revision) {
        if (n == 0) {
            hk_hub_version_list_free(v);
            rc = cli_fail(1, "HK_ERR_VERSION_NOT_FOUND", "%s has no versions (vN branches)%s; use --revision", repo,
                             hk_hub_is_offline(hub) ? " in the cache (offline: no refs/vN there)" : "");
            goto out;
        }
        version = hk_hub_version_list_number(v, n - 1);
    }
    hk_hub_version_list_free(v);
    /* where a load would go: kernel-status.toml redirects followed as hk_get_kernel follows them
     * (online); the publisher of the destination is reported, not enforced (info loads nothing) */
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = repo;
    s.kernel_version = version;
    s.revision = revision;
    s.trust_remote_code = 1;
    char commit[65], *resolved = NULL;
    if (hk_hub_resolve_spec(&dest, &dest_rev, &resolved, hub, &s)) {
        rc = cli_report_error(hk_hub_is_offline(hub) ? "offline" : NULL);
        goto out;
    }
    snprintf(commit, sizeof commit, "%s", resolved);
    hk_free(resolved);
    if (version >= 0) cJSON_AddNumberToObject(j, "version", version);
    else cJSON_AddStringToObject(j, "revision", revision);
    if (strcmp(dest, repo) != 0) {
        char *what = hk__asprintf("showing %s@%s", dest, dest_rev);
        cli_note_redirect(repo, dest, what);
        free(what);
        cJSON_AddStringToObject(j, "redirects_to", dest);
        cJSON_AddStringToObject(j, "redirect_revision", dest_rev);
        char org[128];
        snprintf(org, sizeof org, "%.*s", (int)(strchr(dest, '/') - dest), dest);
        int trusted = 0;
        if (hk_hub_check_trust(&trusted, hub, org) == HK_OK) cJSON_AddBoolToObject(j, "redirect_trusted_publisher", trusted);
        else cJSON_AddStringToObject(j, "redirect_trusted_publisher", hk_last_error());
    }
    cJSON_AddStringToObject(j, "commit", commit);
    char **names = NULL;
    size_t nn = 0;
    if (hk_hub_list_variants(&names, &nn, hub, dest, commit)) {
        rc = cli_report_error(hk_hub_is_offline(hub) ? "offline" : NULL);
        goto out;
    }
    cJSON *jn = cJSON_AddArrayToObject(j, "variants");
    for (size_t i = 0; i < nn; i++) cJSON_AddItemToArray(jn, cJSON_CreateString(names[i]));
    char *best = NULL;
    hk_choose_options co = HK_CHOOSE_OPTIONS_INIT;
    co.backend = backend;
    if (hk_choose_variant(&best, NULL, (const char *const *)names, nn, &co) == HK_OK)
        cJSON_AddStringToObject(j, "selected_variant", best);
    else
        cJSON_AddStringToObject(j, "selected_variant_error", hk_last_error());
    hk_free(best);
    char *dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, dest);
    char *snap = dir ? hk_cache_snapshot_dir(dir, commit) : NULL;
    cJSON_AddBoolToObject(j, "cached", snap && hk__is_dir(snap));
    free(dir);
    free(snap);
    hk_hub_strv_free(names);
    add_tree(j, repo, version, revision, backend, hub);
    if (json) {
        cli_print_json(j);
        j = NULL;
    } else {
        cJSON *it;
        cJSON_ArrayForEach(it, j) {
            if (cJSON_IsArray(it) && strcmp(it->string, "dependency_tree") == 0) {
                printf("%-23s\n", it->string);
                cJSON *e;
                cJSON_ArrayForEach(e, it) {
                    int d = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "depth"));
                    cJSON *r = cJSON_GetObjectItem(e, "revision");
                    char at[96];
                    if (r) snprintf(at, sizeof at, "@%.80s", cJSON_GetStringValue(r));
                    else snprintf(at, sizeof at, "v%d", (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "version")));
                    printf("  %*s%s %s %.12s %s\n", 2 * d, "", cJSON_GetStringValue(cJSON_GetObjectItem(e, "repo_id")),
                           at, cJSON_GetStringValue(cJSON_GetObjectItem(e, "commit")),
                           cJSON_GetStringValue(cJSON_GetObjectItem(e, "variant")));
                }
            } else if (cJSON_IsArray(it)) {
                printf("%-23s ", it->string);
                cJSON *e;
                int first = 1;
                cJSON_ArrayForEach(e, it) {
                    if (cJSON_IsString(e)) printf("%s%s", first ? "" : "\n                        ", e->valuestring);
                    else printf("%sv%d %s", first ? "" : "\n                        ",
                                (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "version")),
                                cJSON_GetStringValue(cJSON_GetObjectItem(e, "commit")));
                    first = 0;
                }
                printf("%s\n", first ? "(none)" : "");
            } else if (cJSON_IsObject(it)) {
                cJSON *e;
                cJSON_ArrayForEach(e, it) {
                    if (cJSON_IsString(e)) printf("%-23s %s\n", e->string, e->valuestring);
                    else printf("%-23s %s\n", e->string, cJSON_IsTrue(e) ? "yes" : "no");
                }
            } else if (cJSON_IsString(it)) printf("%-23s %s\n", it->string, it->valuestring);
            else if (cJSON_IsBool(it)) printf("%-23s %s\n", it->string, cJSON_IsTrue(it) ? "yes" : "no");
            else if (cJSON_IsNumber(it)) printf("%-23s %d\n", it->string, (int)it->valuedouble);
            else if (cJSON_IsNull(it)) printf("%-23s -\n", it->string);
        }
    }
out:
    hk_free(dest);
    hk_free(dest_rev);
    cJSON_Delete(j);
    hk_hub_free(hub);
    return rc;
}
