/* hubkern publish: record a directory as a commit on a branch of a repo in a store. */
#include "cli/cli.h"

#include "internal.h"
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef HK_HAVE_SERVER
static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "branch", 0, "BRANCH", "branch to create or move, e.g. v1 or main (required)", NULL, NULL},
    {HK_OPT_VALUE, "message", 'm', "TEXT", "commit message (default \"Publish BRANCH\")", NULL, NULL},
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "the store (default: the hub cache, as HF_HUB_CACHE/HF_HOME resolve it)", "cache",
     NULL},
    {HK_OPT_VALUE, "repo-type", 0, "TYPE", "kernel (default), model, dataset or space", NULL, "kernel|model|dataset|space"},
    {HK_OPT_VALUE, "lfs-threshold", 0, "BYTES", "files at least this large are stored as LFS files (default 10000000)",
     NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the commit and counts (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

const cli_spec cli_spec_publish = {
    .name = "publish",
    .summary = "record a directory as a commit on a branch of a repo in a store",
    .synopsis = "hubkern publish SRC_DIR ORG/NAME --branch BRANCH [options]",
    .description =
        "Record SRC_DIR as a new commit on BRANCH of repo ORG/NAME in a huggingface_hub-layout store,\n"
        "ready for `hubkern serve`. SRC_DIR becomes the repo root: publishing a kernel's build output\n"
        "directory SRC (holding build/<variant>/...) stores build/<variant>/... in the repo.\n"
        "Prints the branch's commit id on stdout (and a summary on stderr).\n"
        "\n"
        "  - every file becomes a blob named by its etag: the git blob sha1 for text files smaller than\n"
        "    the LFS threshold, the sha256 for binary files (a NUL byte in the first 8000 bytes, git's\n"
        "    rule) and large files, which the Hub keeps in LFS;\n"
        "  - the commit id is the git commit object id of (tree, parent = the branch's previous head,\n"
        "    message) with a fixed author and date: the same tree on the same parent gives the same id;\n"
        "  - publishing the tree the branch already holds changes nothing; older commits stay servable;\n"
        "  - __pycache__/, *.pyc and .git/ are skipped; symlinks must stay inside SRC_DIR.\n",
    .tables = {k_opts},
    .json = 1,
};

int cli_cmd_publish(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_publish, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_publish);
        cli_args_free(&a);
        return rc;
    }
    srv_publish_options o;
    memset(&o, 0, sizeof o);
    o.repo_type = HK_REPO_KERNEL;
    o.branch = cli_str(&a, "branch");
    o.message = cli_str(&a, "message");
    o.cache_dir = cli_str(&a, "cache-dir");
    const char *t = cli_str(&a, "repo-type"), *lfs = cli_str(&a, "lfs-threshold");
    if (t && hk_repo_type_parse(&o.repo_type, t) != HK_OK) rc = cli_usage_error("%s", hk_last_error());
    if (!rc && lfs) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(lfs, &end, 10);
        if (errno || end == lfs || *end || v == 0 || lfs[0] == '-')
            rc = cli_usage_error("--lfs-threshold expects a positive integer, got '%s'", lfs);
        o.lfs_threshold = v;
    }
    if (!rc && a.npos < 2) rc = cli_usage_error("missing %s", a.npos ? "ORG/NAME" : "SRC_DIR and ORG/NAME");
    else if (!rc && a.npos > 2) rc = cli_usage_error("unexpected argument '%s'", a.pos[2]);
    else if (!rc && !o.branch) rc = cli_usage_error("--branch BRANCH is required");
    char *src = a.npos > 0 ? a.pos[0] : NULL, *repo = a.npos > 1 ? a.pos[1] : NULL;
    cli_args_free(&a); /* the strings above live in argv */
    if (rc) return rc;
    o.src_dir = src;
    o.repo_id = repo;
    srv_publish_result r;
    if (srv_publish(&r, &o) != HK_OK) return cli_report_error(NULL);
    if (cli_json()) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "repo_id", o.repo_id);
        cJSON_AddStringToObject(j, "branch", o.branch);
        cJSON_AddStringToObject(j, "commit", r.commit);
        if (r.parent[0]) cJSON_AddStringToObject(j, "parent", r.parent);
        else cJSON_AddNullToObject(j, "parent");
        cJSON_AddBoolToObject(j, "changed", r.changed);
        cJSON_AddNumberToObject(j, "files", (double)r.files);
        cJSON_AddNumberToObject(j, "lfs_files", (double)r.lfs_files);
        cJSON_AddNumberToObject(j, "bytes", (double)r.bytes);
        cli_print_json(j);
    } else {
        printf("%s\n", r.commit);
    }
    if (cli_quiet()) return 0;
    if (r.changed)
        fprintf(stderr, "published %s@%s: commit %s (%s%s), %zu files (%zu LFS), %llu bytes\n", o.repo_id, o.branch,
                r.commit, r.parent[0] ? "parent " : "new branch", r.parent, r.files, r.lfs_files,
                (unsigned long long)r.bytes);
    else
        fprintf(stderr, "unchanged: %s@%s already holds this tree (commit %s)\n", o.repo_id, o.branch, r.commit);
    return 0;
}

#else
const cli_spec cli_spec_publish = {.name = "publish", .summary = "record a directory as a commit (not in this build)",
                                     .synopsis = "hubkern publish SRC_DIR ORG/NAME --branch BRANCH"};
int cli_cmd_publish(int argc, char **argv) {
    fprintf(stderr, "hubkern publish: this hubkern was built without the server (HK_BUILD_SERVER=OFF)\n");
    return 1;
}
#endif
