/* hubkern cache ls | verify | prune | rm: inspect and repair the shared cache. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern cache ls [ORG/NAME] [--json] [--cache DIR]\n"
            "       hubkern cache verify [ORG/NAME] [--cache DIR]\n"
            "       hubkern cache prune [--detached] [--dry-run] [--cache DIR]\n"
            "       hubkern cache rm ORG/NAME [--revision REV] [--dry-run] [--cache DIR]\n\n"
            "ls      repos in the cache with their refs, snapshots and size\n"
            "verify  re-hash every blob against its name (sha256 / git blob sha1), check every snapshot link,\n"
            "        every ref and the metadata.json digest of complete variants; exit 1 on any problem\n"
            "prune   remove temp files (*.incomplete, *.tmp) no live download holds, broken links, blobs no\n"
            "        snapshot uses, empty directories and verification receipts of snapshots, variants or\n"
            "        repos no longer cached; --detached also removes snapshots no ref names (and their receipts)\n"
            "rm      remove a whole repo, or with --revision one snapshot, the refs naming it and the blobs\n"
            "        left unused; with either, the verification receipts of what goes (in .locks/<repo\n"
            "        folder>/hubkern-receipts/ or HUBKERN_RECEIPTS_DIR; lock files stay)\n"
            "The cache is --cache DIR, else KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub.\n");
}

static void print_line(void *ud, const char *line) {
    FILE *f = ud;
    fprintf(f, "%s\n", line);
}

int hk_cmd_cache(int argc, char **argv);
int hk_cmd_cache(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    const char *cache = NULL, *repo = NULL, *revision = NULL;
    bool json = false, dry = false, detached = false;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(o, "--cache") == 0 && i + 1 < argc) cache = argv[++i];
        else if (strcmp(o, "--revision") == 0 && i + 1 < argc) revision = argv[++i];
        else if (strcmp(o, "--json") == 0) json = true;
        else if (strcmp(o, "--dry-run") == 0) dry = true;
        else if (strcmp(o, "--detached") == 0) detached = true;
        else if (o[0] != '-' && !repo) repo = o;
        else {
            usage(stderr);
            return 2;
        }
    }
    char *root = NULL;
    if (hk_cache_root(&root, cache, HK_REPO_KERNEL)) return hk_cli_report_error("cache");
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_id = repo;
    o.revision = revision;
    o.dry_run = dry;
    o.detached = detached;
    o.json = json;
    o.line_fn = print_line;
    o.line_userdata = stdout;
    hk_cache_report *rep = NULL;
    int rc;
    if (strcmp(sub, "ls") == 0) {
        rc = hk_cache_ls(&rep, &o);
        size_t repos = hk_cache_report_repos(rep);
        if (rc == 0 && !json)
            printf("%zu repo%s, %.1f MB in %s\n", repos, repos == 1 ? "" : "s", hk_cache_report_bytes(rep) / 1e6, root);
    } else if (strcmp(sub, "verify") == 0) {
        rc = hk_cache_verify(&rep, &o);
        if (rc == 0) {
            size_t repos = hk_cache_report_repos(rep), blobs = hk_cache_report_blobs(rep);
            size_t snaps = hk_cache_report_snapshots(rep), refs = hk_cache_report_refs(rep);
            size_t problems = hk_cache_report_problems(rep);
            printf("%s: %zu repo%s, %zu blob%s (%.1f MB), %zu snapshot%s, %zu ref%s: %zu problem%s\n",
                   problems ? "NOT CLEAN" : "clean", repos, repos == 1 ? "" : "s", blobs, blobs == 1 ? "" : "s",
                   hk_cache_report_bytes(rep) / 1e6, snaps, snaps == 1 ? "" : "s", refs, refs == 1 ? "" : "s",
                   problems, problems == 1 ? "" : "s");
            if (problems) {
                hk_cache_report_free(rep);
                free(root);
                return 1;
            }
        }
    } else if (strcmp(sub, "prune") == 0 || strcmp(sub, "rm") == 0) {
        if (sub[0] == 'r' && !repo) {
            usage(stderr);
            free(root);
            return 2;
        }
        rc = sub[0] == 'p' ? hk_cache_prune(&rep, &o) : hk_cache_rm(&rep, &o);
        size_t removed = hk_cache_report_removed(rep);
        if (rc == 0)
            printf("%s %zu entr%s (%.1f MB)\n", dry ? "would remove" : "removed", removed, removed == 1 ? "y" : "ies",
                   hk_cache_report_removed_bytes(rep) / 1e6);
    } else {
        fprintf(stderr, "hubkern cache: unknown subcommand '%s'\n\n", sub);
        usage(stderr);
        free(root);
        return 2;
    }
    hk_cache_report_free(rep);
    free(root);
    return rc ? hk_cli_report_error("cache") : 0;
}
