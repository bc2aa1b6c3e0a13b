/* hubkern cache ls | verify | prune | rm: inspect and repair the shared cache. */
#include "cli/cache_cmds.h"
#include "cli/cache_json.h"
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "revision", 0, "REV", "rm: one snapshot (a ref or commit) instead of the whole repo", NULL, NULL},
    {HK_OPT_FLAG, "dry-run", 0, NULL, "prune, rm: say what would be removed, remove nothing", NULL, NULL},
    {HK_OPT_FLAG, "detached", 0, NULL, "prune: also snapshots no ref names (and their receipts)", NULL, NULL},
    {HK_OPT_FLAG, "repair", 0, NULL, "verify: pull every damaged variant again at its commit (online), then verify",
     NULL, NULL},
    {HK_OPT_VALUE, "endpoint", 0, "URL", "verify --repair: the Hub or mirror to fetch from (default HF_ENDPOINT)", NULL,
     NULL},
    {HK_OPT_FLAG, "yes", 'y', NULL, "prune, rm: remove without asking (required when stdin is not a terminal)", NULL,
     NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as one JSON object on stdout", NULL, NULL},
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "the cache (default: KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub, ...)", "cache",
     NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

const cli_spec cli_spec_cache = {
    .name = "cache",
    .summary = "inspect, verify, prune or remove entries of the local cache",
    .synopsis = "hubkern cache ls [REPO] [--json] [--cache-dir DIR]\n"
                "hubkern cache verify [REPO] [--repair [--endpoint URL]] [--json] [--cache-dir DIR]\n"
                "hubkern cache prune [--detached] [--dry-run] [-y] [--json] [--cache-dir DIR]\n"
                "hubkern cache rm REPO [--revision REV] [--dry-run] [-y] [--json] [--cache-dir DIR]",
    .description =
        "ls      repos in the cache with their size, refs and snapshots\n"
        "verify  re-hash every blob against its name (sha256 / git blob sha1), check every snapshot link,\n"
        "        every ref and the metadata.json digest of complete variants; exit 1 on any problem.\n"
        "        It writes nothing. --repair pulls each damaged kernel variant again at its commit (only\n"
        "        the damaged or missing files are fetched, each replaced atomically), says what it\n"
        "        repaired, then verifies again (exit 1 when problems remain)\n"
        "prune   remove temp files (*.incomplete, *.tmp) no live download holds, broken links,\n"
        "        blobs no snapshot uses, empty directories and verification receipts of\n"
        "        snapshots, variants or repos no longer cached; --detached also removes\n"
        "        snapshots no ref names (and their receipts). Kept: the downloaded blobs and\n"
        "        resumable <etag>.incomplete files of an unfinished pull (interrupted; its plan\n"
        "        is in .locks/<repo folder>/hubkern-pulls/) for 7 days\n"
        "rm      remove a whole repo, or with --revision one snapshot, the refs naming it and\n"
        "        the blobs left unused; with either, the verification receipts of what goes\n"
        "        (in .locks/<repo folder>/hubkern-receipts/ or HUBKERN_RECEIPTS_DIR; lock files\n"
        "        stay)\n"
        "prune and rm list what would go and ask first, unless -y/--yes; without -y and\n"
        "without a terminal on stdin (or with --json) they refuse (exit 2).\n"
        "REPO is org/name, or kernel/org/name as `cache ls` (and `hf cache ls`) print it.\n"
        "The cache is --cache-dir DIR, else KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub,\n"
        "~/.cache/huggingface/hub.\n",
    .tables = {k_opts},
    .subcommands = "ls verify prune rm",
    .json = 1,
};

/* the library's report lines: printed (text) or collected (JSON) */
typedef struct lines {
    cJSON *arr;
    char *doc; /* ls --json: the one document */
} lines;

static void on_finding(void *ud, const hk_cache_finding *f) {
    lines *l = ud;
    if (l->arr) cJSON_AddItemToArray(l->arr, cli_cache_finding_json(f)); /* structured: docs/json.md */
    else printf("%s\n", f->line);
}

static void on_ls_doc(void *ud, const char *doc) {
    lines *l = ud;
    free(l->doc);
    l->doc = strdup(doc);
}

static void print_ls_table(const cJSON *doc) {
    const cJSON *repos = cJSON_GetObjectItem(doc, "repos"), *r;
    size_t w_id = 4, w_refs = 4;
    char id[400], refs[1024];
    if (cJSON_GetArraySize(repos) == 0) return;
    /* two passes: widths, then rows (aligned columns, as `hf cache ls`) */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) printf("%-*s  %9s  %-*s  %s\n", (int)w_id, "REPO", "SIZE", (int)w_refs, "REFS", "SNAPSHOTS");
        cJSON_ArrayForEach(r, repos) {
            const char *rid = cJSON_GetStringValue(cJSON_GetObjectItem(r, "id")); /* kernel/org/name, as hf */
            snprintf(id, sizeof id, "%s", rid ? rid : "?");
            refs[0] = '\0';
            const cJSON *ref;
            cJSON_ArrayForEach(ref, cJSON_GetObjectItem(r, "refs")) {
                size_t n = strlen(refs);
                snprintf(refs + n, sizeof refs - n, "%s%s=%.8s", n ? " " : "", ref->string, ref->valuestring);
            }
            if (!refs[0]) snprintf(refs, sizeof refs, "-");
            if (pass == 0) {
                if (strlen(id) > w_id) w_id = strlen(id);
                if (strlen(refs) > w_refs) w_refs = strlen(refs);
                continue;
            }
            char size[32], snaps[600] = "";
            snprintf(size, sizeof size, "%.1f MB", cJSON_GetNumberValue(cJSON_GetObjectItem(r, "size")) / 1e6);
            const cJSON *s;
            cJSON_ArrayForEach(s, cJSON_GetObjectItem(r, "snapshots")) {
                size_t n = strlen(snaps);
                snprintf(snaps + n, sizeof snaps - n, "%s%.8s", n ? " " : "",
                         cJSON_GetStringValue(cJSON_GetObjectItem(s, "commit")));
            }
            printf("%-*s  %9s  %-*s  %s\n", (int)w_id, id, size, (int)w_refs, refs, snaps[0] ? snaps : "-");
        }
    }
}

static int run_sub(const char *sub, const cli_args *a) {
    bool json = cli_json(), dry = cli_count(a, "dry-run") > 0, detached = cli_count(a, "detached") > 0;
    bool repair = cli_count(a, "repair") > 0, yes = cli_count(a, "yes") > 0;
    const char *revision = cli_str(a, "revision");
    bool ls = !strcmp(sub, "ls"), verify = !strcmp(sub, "verify"), prune = !strcmp(sub, "prune"), rm = !strcmp(sub, "rm");
    if (repair && !verify) return cli_usage_error("--repair is an option of 'cache verify'");
    if (cli_str(a, "endpoint") && !repair) return cli_usage_error("--endpoint is an option of 'cache verify --repair'");
    if (yes && !rm && !prune) return cli_usage_error("-y/--yes is an option of 'cache prune' and 'cache rm'");
    if (revision && !rm) return cli_usage_error("--revision is an option of 'cache rm'");
    if (detached && !prune) return cli_usage_error("--detached is an option of 'cache prune'");
    if (dry && !prune && !rm) return cli_usage_error("--dry-run is an option of 'cache prune' and 'cache rm'");
    if (a->npos > (prune ? 0u : 1u)) return cli_usage_error("unexpected argument '%s'", a->pos[prune ? 0 : 1]);
    if (rm && a->npos == 0) return cli_usage_error("missing REPO (org/name or kernel/org/name) to remove");
    char repo[512];
    if (a->npos) cli_repo_arg(repo, sizeof repo, a->pos[0]);
    char *root = NULL;
    if (hk_cache_root(&root, cli_str(a, "cache-dir"), HK_REPO_KERNEL)) return cli_report_error(NULL);
    lines l = {json ? cJSON_CreateArray() : NULL, NULL};
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_id = a->npos ? repo : NULL;
    o.revision = revision;
    o.dry_run = dry;
    o.detached = detached;
    o.json = ls; /* ls: the CLI formats the table itself */
    if (ls) {
        o.line_fn = on_ls_doc;
        o.line_userdata = &l;
    } else {
        o.finding_fn = on_finding;
        o.finding_userdata = &l;
    }
    hk_cache_report *rep = NULL;
    int rc = HK_OK, status = 0;
    char what[600];
    snprintf(what, sizeof what, rm ? "remove %s" : "prune %s", rm ? repo : root);
    if ((rm || prune) && !dry && !yes && (status = cli_cache_confirm(rm ? hk_cache_rm : hk_cache_prune, &o, what))) {
        cJSON_Delete(l.arr);
        free(root);
        return status == 3 ? 1 : status; /* 3: the user said no */
    }
    if (verify && repair) {
        size_t failed = 0;
        if ((status = cli_cache_repair(root, o.repo_id, cli_str(a, "endpoint"), on_finding, &l, &failed))) {
            cJSON_Delete(l.arr);
            free(root);
            return status;
        }
        if (failed) status = 1;
    }
    rc = ls ? hk_cache_ls(&rep, &o) : verify ? hk_cache_verify(&rep, &o) : prune ? hk_cache_prune(&rep, &o)
                                                                       : hk_cache_rm(&rep, &o);
    if (rc) {
        status = cli_report_error(NULL);
    } else if (ls) {
        cJSON *doc = l.doc ? cJSON_Parse(l.doc) : NULL;
        if (!doc) {
            status = cli_fail(1, "HK_ERR_INTERNAL", "the cache listing was not JSON");
        } else if (json) {
            cli_print_json(doc);
            doc = NULL;
        } else {
            size_t repos = hk_cache_report_repos(rep);
            print_ls_table(doc);
            printf("%zu repo%s, %.1f MB in %s\n", repos, repos == 1 ? "" : "s", hk_cache_report_bytes(rep) / 1e6, root);
        }
        cJSON_Delete(doc);
    } else if (verify) {
        size_t repos = hk_cache_report_repos(rep), blobs = hk_cache_report_blobs(rep);
        size_t snaps = hk_cache_report_snapshots(rep), refs = hk_cache_report_refs(rep);
        size_t problems = hk_cache_report_problems(rep);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "cache", root);
            cJSON_AddBoolToObject(j, "clean", problems == 0);
            cJSON_AddNumberToObject(j, "repos", (double)repos);
            cJSON_AddNumberToObject(j, "blobs", (double)blobs);
            cJSON_AddNumberToObject(j, "bytes", (double)hk_cache_report_bytes(rep));
            cJSON_AddNumberToObject(j, "snapshots", (double)snaps);
            cJSON_AddNumberToObject(j, "refs", (double)refs);
            cJSON_AddNumberToObject(j, "problems", (double)problems);
            cJSON_AddItemToObject(j, "findings", l.arr);
            l.arr = NULL;
            cli_print_json(j);
        } else {
            printf("%s: %zu repo%s, %zu blob%s (%.1f MB), %zu snapshot%s, %zu ref%s: %zu problem%s\n",
                   problems ? "NOT CLEAN" : "clean", repos, repos == 1 ? "" : "s", blobs, blobs == 1 ? "" : "s",
                   hk_cache_report_bytes(rep) / 1e6, snaps, snaps == 1 ? "" : "s", refs, refs == 1 ? "" : "s",
                   problems, problems == 1 ? "" : "s");
        }
        status = problems || status ? 1 : 0;
    } else {
        size_t removed = hk_cache_report_removed(rep);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "cache", root);
            cJSON_AddBoolToObject(j, "dry_run", dry);
            cJSON_AddNumberToObject(j, "removed", (double)removed);
            cJSON_AddNumberToObject(j, "removed_bytes", (double)hk_cache_report_removed_bytes(rep));
            cJSON_AddItemToObject(j, "entries", l.arr);
            l.arr = NULL;
            cli_print_json(j);
        } else {
            printf("%s %zu entr%s (%.1f MB)\n", dry ? "would remove" : "removed", removed, removed == 1 ? "y" : "ies",
                   hk_cache_report_removed_bytes(rep) / 1e6);
        }
    }
    cJSON_Delete(l.arr);
    free(l.doc);
    hk_cache_report_free(rep);
    free(root);
    return status;
}

int cli_cmd_cache(int argc, char **argv) {
    static const char *const subs[] = {"ls", "verify", "prune", "rm"};
    if (argc < 2 || argv[1][0] == '-') { /* options before the subcommand: only --help makes sense */
        cli_args a;
        int rc = cli_parse(&a, &cli_spec_cache, argc, argv);
        if (!rc && a.help) rc = cli_print_help(&cli_spec_cache);
        else if (!rc) rc = cli_usage_error("missing subcommand (ls, verify, prune or rm)");
        cli_args_free(&a);
        return rc;
    }
    const char *sub = NULL;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strcmp(argv[1], subs[i]) == 0) sub = subs[i];
    if (!sub) {
        const char *best = NULL;
        for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
            if (cli_edit_distance(argv[1], subs[i]) <= (strlen(subs[i]) > 2 ? 2u : 1u)) best = subs[i];
        if (best) return cli_usage_error("unknown subcommand '%s' (did you mean '%s'?)", argv[1], best);
        return cli_usage_error("unknown subcommand '%s' (ls, verify, prune or rm)", argv[1]);
    }
    static char name[32];
    snprintf(name, sizeof name, "cache %s", sub);
    cli_set_command(name);
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_cache, argc - 1, argv + 1);
    if (!rc && a.help) rc = cli_print_help(&cli_spec_cache);
    else if (!rc) rc = run_sub(sub, &a);
    cli_args_free(&a);
    return rc;
}
