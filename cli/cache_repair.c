/* hubkern cache verify --repair: every cached kernel variant pulled again at its commit, its
 * verification receipt forgotten first so that every byte is hashed. The pull fetches again,
 * atomically, the blobs whose bytes no longer match and those missing; an intact variant costs no
 * download. What was fetched is reported per variant. */
#include "cli/cache_cmds.h"
#include "cli/cli.h"

#include <hubkern.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One finding about build/<variant> at commit of kernel repo, reported to fn with its line,
 * "<lead>kernel/<repo>: <message>", as the library reports verify's. */
static void say(hk_cache_finding_fn fn, void *ud, hk_cache_finding_kind kind, const char *lead, const char *repo,
                const char *commit, const char *variant, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void say(hk_cache_finding_fn fn, void *ud, hk_cache_finding_kind kind, const char *lead, const char *repo,
                const char *commit, const char *variant, const char *fmt, ...) {
    char label[512], message[1536], line[2100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    snprintf(label, sizeof label, "kernel/%s", repo);
    snprintf(line, sizeof line, "%s%s: %s", lead, label, message);
    char *path = hk_cache_variant_entry(commit, variant); /* the layout is the library's to spell */
    hk_cache_finding f = {kind, label, repo, path, message, line};
    fn(ud, &f);
    hk_free(path);
}

/* Pull one variant of repo at commit again; *failed counts those that could not be repaired. */
static void repair_variant(hk_hub *hub, const char *repo, const char *commit, const char *variant,
                           hk_cache_finding_fn fn, void *ud, size_t *failed) {
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = repo;
    s.revision = commit;
    s.variant = variant;
    s.trust_remote_code = 1; /* its publisher was checked when it was first pulled */
    /* every byte hashed again: a receipt vouches for stat identity, which media rot or a forged
     * receipt leaves unchanged while the content is not */
    if (hk_cache_receipt_forget(hk_hub_cache_root(hub), repo, commit, variant) != HK_OK) hk_clear_error();
    hk_pull_result *r = NULL;
    if (hk_hub_pull(&r, hub, &s) != HK_OK) {
        say(fn, ud, HK_CACHE_PROBLEM, "PROBLEM: ", repo, commit, variant, "build/%s at %.8s could not be repaired: %s",
            variant, commit, hk_last_error());
        hk_clear_error();
        (*failed)++;
        return;
    }
    size_t files = hk_pull_result_files_downloaded(r);
    if (files > 0)
        say(fn, ud, HK_CACHE_NOTE, "repaired ", repo, commit, variant, "build/%s at %.8s: %zu file%s (%llu bytes) "
            "fetched again", variant, commit, files, files == 1 ? "" : "s",
            (unsigned long long)hk_pull_result_bytes_downloaded(r));
    hk_pull_result_free(r);
}

int cli_cache_repair(const char *root, const char *repo_id, const char *endpoint, hk_cache_finding_fn fn, void *ud,
                     size_t *failed) {
    *failed = 0;
    char *doc = NULL;
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_id = repo_id;
    o.json = 1;
    o.line_fn = cli_cache_keep_doc;
    o.line_userdata = &doc;
    if (hk_cache_ls(NULL, &o) != HK_OK) return cli_report_error(NULL);
    cJSON *j = doc ? cJSON_Parse(doc) : NULL;
    free(doc);
    hk_hub_options ho = HK_HUB_OPTIONS_INIT;
    ho.cache_dir = root;
    ho.endpoint = endpoint;
    hk_hub *hub = NULL;
    int status = 0;
    if (hk_hub_new(&hub, &ho) != HK_OK) status = cli_report_error(NULL);
    else if (hk_hub_is_offline(hub))
        status = cli_fail(1, "HK_ERR_OFFLINE", "--repair fetches damaged files from the Hub; it cannot run offline "
                          "(HF_HUB_OFFLINE is set)");
    const cJSON *r, *repos = status ? NULL : cJSON_GetObjectItem(j, "repos");
    cJSON_ArrayForEach(r, repos) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(r, "repo_type"));
        const char *repo = cJSON_GetStringValue(cJSON_GetObjectItem(r, "repo_id"));
        if (!type || !repo || strcmp(type, "kernel") != 0) continue; /* only kernel repos are pulled */
        const cJSON *snap;
        cJSON_ArrayForEach(snap, cJSON_GetObjectItem(r, "snapshots")) {
            const char *commit = cJSON_GetStringValue(cJSON_GetObjectItem(snap, "commit"));
            const cJSON *v;
            cJSON_ArrayForEach(v, cJSON_GetObjectItem(snap, "variants")) {
                if (commit && cJSON_GetStringValue(v))
                    repair_variant(hub, repo, commit, cJSON_GetStringValue(v), fn, ud, failed);
            }
        }
    }
    hk_hub_free(hub);
    cJSON_Delete(j);
    return status;
}
