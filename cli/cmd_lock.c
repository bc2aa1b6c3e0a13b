/* hubkern lock: pin kernels (org/name at a version or revision) to commits in a kernels.lock of
 * the current (dependency/lock) format, as kernels 0.17 writes it. */
#include "cli/cli.h"

#include <hubkern.h>

#include "internal.h"
#include "util/toml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "output", 'o', "FILE", "the lock file to write (default kernels.lock)", NULL, NULL},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the lock written (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_lock = {
    .name = "lock",
    .summary = "pin kernels (org/name=N) to commits in a kernels.lock",
    .synopsis = "hubkern lock [-o kernels.lock] [--json] [hub options] ORG/NAME=N | ORG/NAME@REVISION ...\n"
                "       hubkern lock [hub options] PROJECT_DIR",
    .description =
        "PROJECT_DIR: reads pyproject.toml [tool.kernels.dependencies] (\"org/name\" = N) and writes\n"
        "PROJECT_DIR/kernels.lock exactly as `kernels lock PROJECT_DIR` does: every kernel of each\n"
        "dependency tree (kernel-depends of every variant), no redirects followed.\n\n"
        "Resolves each kernel's version N (branch vN) or revision to a commit on the Hub and writes\n"
        "them, sorted, to a kernels.lock in the format of kernels 0.17:\n"
        "  [{\"dependency\": {\"repo-id\": ..., \"version\": N}, \"lock\": {\"commit\": ...}}, ...]\n"
        "kernel-status.toml redirects are followed as `hubkern load` follows them: the lock pins what\n"
        "would be loaded, the destination repo at the redirect's revision and its commit (a note on\n"
        "stderr says so; load it by the destination's name). Publisher trust is checked at every\n"
        "hop unless --trust-remote-code. Prefetch with\n"
        "`hubkern download --lock FILE`; load with hk_load_locked or `hubkern load --lock FILE`.\n",
    .tables = {k_opts, cli_hub_opts_online},
    .table_titles = k_titles,
    .json = 1,
};

/* One kernel to pin, as asked and then as resolved. */
typedef struct pin {
    const char *repo_id;
    int version; /* HK_VERSION_UNSET when pinned by revision */
    const char *revision;
    const char *commit;
} pin;

/* Write the pins through an hk_lockfile (the library checks and sorts them). */
static int write_lock(const char *path, const pin *e, size_t n) {
    hk_lockfile *lf = NULL;
    int rc = hk_lockfile_new(&lf);
    for (size_t i = 0; i < n && rc == HK_OK; i++)
        rc = hk_lockfile_add(lf, e[i].repo_id, e[i].version, e[i].revision, e[i].commit);
    if (rc == HK_OK) rc = hk_lockfile_write(path, lf);
    hk_lockfile_free(lf);
    return rc;
}

/* `hubkern lock PROJECT_DIR`: kernels 0.17.2 cli/lock.py. */
static int lock_project(const char *dir, const char *endpoint, const char *cache, int trust) {
    char *py = hk__path_join(dir, "pyproject.toml");
    char *text = NULL;
    size_t len = 0;
    hk_toml *doc = NULL;
    hk_lockfile *lf = NULL;
    int rc = py ? hk__read_file(&text, &len, py, 4u << 20) : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__toml_parse(&doc, text, len, py);
    const hk_toml *deps = hk__toml_get(hk__toml_get(hk__toml_get(doc, "tool"), "kernels"), "dependencies");
    if (rc == HK_OK && (!deps || deps->kind != HK_TOML_TABLE || deps->n == 0))
        rc = hk__fail(HK_ERR_PARSE, "%s has no [tool.kernels.dependencies]: no kernels found to lock", py);
    for (size_t i = 0; rc == HK_OK && i < deps->n; i++) {
        const hk_toml *v = deps->items[i];
        if (v->kind != HK_TOML_INT || v->i < 0 || v->i > 1000000)
            rc = hk__fail(HK_ERR_PARSE, "%s: [tool.kernels.dependencies] \"%s\" must be a version number", py,
                         v->key);
        else if (!hk_repo_id_valid(v->key))
            rc = hk__fail(HK_ERR_PARSE, "%s: '%s' is not a valid repo id (org/name)", py, v->key);
    }
    if (rc == HK_OK) rc = hk_lockfile_new(&lf);
    for (size_t i = 0; rc == HK_OK && i < deps->n; i++) {
        hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
        o.repo_id = deps->items[i]->key;
        o.kernel_version = (int)deps->items[i]->i;
        o.hub_options.endpoint = endpoint;
        o.hub_options.cache_dir = cache;
        o.trust_remote_code = trust;
        rc = hk_lockfile_add_tree(lf, &o);
    }
    char *out = NULL;
    if (rc == HK_OK && !(out = hk__path_join(dir, "kernels.lock"))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk_lockfile_write(out, lf);
    if (rc == HK_OK && cli_json()) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "lock", out);
        cJSON *ks = cJSON_AddArrayToObject(j, "kernels");
        for (size_t i = 0; i < hk_lockfile_count(lf); i++) {
            const hk_lock_entry *e = hk_lockfile_entry(lf, i);
            cJSON *k = cJSON_CreateObject();
            cJSON_AddStringToObject(k, "repo_id", hk_lock_entry_repo_id(e));
            cJSON_AddStringToObject(k, "commit", hk_lock_entry_commit(e));
            cJSON_AddItemToArray(ks, k);
        }
        cli_print_json(j);
    } else if (rc == HK_OK) {
        for (size_t i = 0; i < hk_lockfile_count(lf); i++) {
            const hk_lock_entry *e = hk_lockfile_entry(lf, i);
            fprintf(stderr, "%s -> %s\n", hk_lock_entry_repo_id(e), hk_lock_entry_commit(e));
        }
        printf("%s\n", out);
    }
    free(out);
    hk_lockfile_free(lf);
    hk__toml_free(doc);
    free(text);
    free(py);
    return rc == HK_OK ? 0 : cli_report_error("lock");
}

/* One piece: a command's main reads its options, builds the lock in one pass over the project's
 * kernels and writes it; split, each part would take the arguments, the client and the lock being
 * built. */
int cli_cmd_lock(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_lock, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_lock);
        cli_args_free(&a);
        return rc;
    }
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    const char *out = cli_str(&a, "output") ? cli_str(&a, "output") : "kernels.lock";
    int trust = cli_count(&a, "trust-remote-code") > 0;
    size_t n = 0;
    pin *e = calloc(a.npos + 1, sizeof *e);
    char **owned = calloc(a.npos * 4 + 1, sizeof *owned);
    size_t nowned = 0;
    rc = 2;
    if (!e || !owned) goto done;
    const char *project = NULL;
    for (size_t i = 0; i < a.npos; i++) {
        const char *arg = a.pos[i];
        if (!strchr(arg, '=') && !strchr(arg, '@') && hk__is_dir(arg)) {
            if (project) {
                rc = cli_usage_error("only one PROJECT_DIR can be locked at a time");
                goto done;
            }
            project = arg;
            continue;
        }
        char *spec = strdup(arg);
        owned[nowned++] = spec;
        char *eq = strchr(spec, '='), *at = strchr(spec, '@');
        pin *x = &e[n];
        x->version = HK_VERSION_UNSET;
        if (eq && !at) {
            *eq = '\0';
            char *end;
            long v = strtol(eq + 1, &end, 10);
            if (!eq[1] || *end || v < 0 || v > 1000000) {
                rc = cli_usage_error("'%s': the version must be a non-negative integer", arg);
                goto done;
            }
            x->version = (int)v;
        } else if (at && !eq && at[1]) {
            *at = '\0';
            x->revision = at + 1;
        } else {
            rc = cli_usage_error("'%s' is not ORG/NAME=N or ORG/NAME@REVISION", arg);
            goto done;
        }
        if (!hk_repo_id_valid(spec)) {
            rc = cli_usage_error("'%s' is not a valid repo id", spec);
            goto done;
        }
        x->repo_id = spec;
        n++;
    }
    if (project && n > 0) {
        rc = cli_usage_error("PROJECT_DIR and ORG/NAME=N arguments cannot be mixed");
        goto done;
    }
    if (project) {
        rc = lock_project(project, h.endpoint, h.cache, trust);
        goto done;
    }
    if (n == 0) {
        rc = cli_usage_error("missing ORG/NAME=N or ORG/NAME@REVISION (the kernels to pin)");
        goto done;
    }
    hk_hub_options ho = HK_HUB_OPTIONS_INIT;
    ho.endpoint = h.endpoint;
    ho.cache_dir = h.cache;
    ho.token = h.token;
    ho.offline = 0;
    hk_hub *hub = NULL;
    if (hk_hub_new(&hub, &ho)) {
        rc = cli_report_error(NULL);
        goto done;
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        /* resolve, then follow kernel-status.toml redirects exactly as hk_get_kernel does (publisher
         * checked at every hop unless --trust-remote-code): the lock pins what a load would load */
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = e[i].repo_id;
        s.kernel_version = e[i].revision ? -1 : e[i].version;
        s.revision = e[i].revision;
        s.trust_remote_code = trust;
        char *repo = NULL, *rev = NULL, commit[65], *resolved = NULL;
        if (hk_hub_resolve_spec(&repo, &rev, &resolved, hub, &s) != HK_OK) {
            rc = cli_report_error(e[i].repo_id);
            break;
        }
        snprintf(commit, sizeof commit, "%s", resolved);
        hk_free(resolved);
        char asked[320];
        if (e[i].revision) snprintf(asked, sizeof asked, "%s@%s", e[i].repo_id, e[i].revision);
        else snprintf(asked, sizeof asked, "%s v%d", e[i].repo_id, e[i].version);
        if (strcmp(repo, e[i].repo_id) != 0) {
            /* pin the destination at the revision the last redirect named ("vN" is version N) */
            char *what = hk__asprintf("the lock pins %s@%s (load it as %s)", repo, rev, repo);
            cli_note_redirect(e[i].repo_id, repo, what);
            free(what);
            e[i].repo_id = owned[nowned++] = strdup(repo);
            e[i].revision = NULL;
            e[i].version = HK_VERSION_UNSET;
            const char *d = rev[0] == 'v' ? rev + 1 : "";
            size_t nd = strspn(d, "0123456789");
            if (nd > 0 && nd < 8 && d[nd] == '\0' && (nd == 1 || d[0] != '0')) e[i].version = atoi(d);
            else e[i].revision = owned[nowned++] = strdup(rev);
            if (!cli_quiet()) fprintf(stderr, "%s -> %s@%s -> %s\n", asked, repo, rev, commit);
        } else if (!cli_quiet()) {
            fprintf(stderr, "%s -> %s\n", asked, commit);
        }
        hk_free(repo);
        hk_free(rev);
        e[i].commit = owned[nowned++] = strdup(commit);
    }
    /* two requests that end at the same kernel (org/a redirecting to org/b, and org/b) lock it once */
    size_t kept = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool dup = false;
        for (size_t j = 0; j < kept && !dup; j++)
            dup = strcmp(e[j].repo_id, e[i].repo_id) == 0 && strcmp(e[j].commit, e[i].commit) == 0 &&
                  (e[j].revision ? e[i].revision && strcmp(e[j].revision, e[i].revision) == 0
                                 : !e[i].revision && e[j].version == e[i].version);
        if (!dup) e[kept++] = e[i];
    }
    if (rc == 0) n = kept;
    hk_hub_free(hub);
    if (rc == 0 && write_lock(out, e, n) != HK_OK) rc = cli_report_error(NULL);
    if (rc == 0 && cli_json()) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "lock", out);
        cJSON *ks = cJSON_AddArrayToObject(j, "kernels");
        for (size_t i = 0; i < n; i++) {
            cJSON *k = cJSON_CreateObject();
            cJSON_AddStringToObject(k, "repo_id", e[i].repo_id);
            if (e[i].revision) cJSON_AddStringToObject(k, "revision", e[i].revision);
            else cJSON_AddNumberToObject(k, "version", e[i].version);
            cJSON_AddStringToObject(k, "commit", e[i].commit);
            cJSON_AddItemToArray(ks, k);
        }
        cli_print_json(j);
    } else if (rc == 0) {
        printf("%s\n", out);
    }
done:
    for (size_t i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(e);
    cli_args_free(&a);
    return rc;
}
