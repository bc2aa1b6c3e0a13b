/* hubkern publish: record a directory as a commit on a branch of a repo in a store. */
#include "cli/cli.h"

#include "internal.h"
#include "server/server.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int hk_cmd_publish(int argc, char **argv);

#ifdef HK_HAVE_SERVER
static void publish_usage(FILE *f) {
    fprintf(f,
            "usage: hubkern publish SRC_DIR ORG/NAME --branch BRANCH [options]\n"
            "\n"
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
            "  - __pycache__/, *.pyc and .git/ are skipped; symlinks must stay inside SRC_DIR.\n"
            "\n"
            "options:\n"
            "  --branch BRANCH        branch to create or move, e.g. v1 or main (required)\n"
            "  -m, --message TEXT     commit message (default \"Publish BRANCH\")\n"
            "  --cache DIR            the store (default: the hub cache, as HF_HUB_CACHE/HF_HOME resolve it)\n"
            "  --repo-type TYPE       kernel (default), model, dataset or space\n"
            "  --lfs-threshold BYTES  files at least this large are stored as LFS files (default %llu)\n"
            "  -v, --verbose          more log output\n"
            "  -h, --help             this text\n",
            (unsigned long long)HK_LFS_THRESHOLD_DEFAULT);
}

int hk_cmd_publish(int argc, char **argv) {
    enum { O_BRANCH = 1000, O_CACHE, O_TYPE, O_LFS_T };
    static const struct option opts[] = {
        {"branch", required_argument, NULL, O_BRANCH},
        {"message", required_argument, NULL, 'm'},
        {"cache", required_argument, NULL, O_CACHE},
        {"repo-type", required_argument, NULL, O_TYPE},
        {"lfs-threshold", required_argument, NULL, O_LFS_T},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    hk_publish_options o;
    memset(&o, 0, sizeof o);
    o.repo_type = HK_REPO_KERNEL;
    int verbose = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:vh", opts, NULL)) != -1) {
        switch (c) {
        case O_BRANCH: o.branch = optarg; break;
        case 'm': o.message = optarg; break;
        case O_CACHE: o.cache_dir = optarg; break;
        case O_TYPE:
            if (hk_repo_type_parse(&o.repo_type, optarg) != HK_OK) return hk_cli_report_error("publish");
            break;
        case O_LFS_T: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || v == 0 || optarg[0] == '-') {
                fprintf(stderr, "hubkern publish: --lfs-threshold expects a positive integer\n");
                return 2;
            }
            o.lfs_threshold = v;
            break;
        }
        case 'v': verbose++; break;
        case 'h': publish_usage(stdout); return 0;
        default: fprintf(stderr, "see 'hubkern publish --help'\n"); return 2;
        }
    }
    if (argc - optind != 2 || !o.branch) {
        fprintf(stderr, "hubkern publish: expected SRC_DIR ORG/NAME and --branch BRANCH\nsee 'hubkern publish --help'\n");
        return 2;
    }
    if (verbose) hk_cli_install_logger(verbose);
    o.src_dir = argv[optind];
    o.repo_id = argv[optind + 1];
    hk_publish_result r;
    if (hk_publish(&r, &o) != HK_OK) return hk_cli_report_error("publish");
    printf("%s\n", r.commit);
    if (r.changed)
        fprintf(stderr, "published %s@%s: commit %s (%s%s), %zu files (%zu LFS), %llu bytes\n", o.repo_id, o.branch,
                r.commit, r.parent[0] ? "parent " : "new branch", r.parent, r.files, r.lfs_files,
                (unsigned long long)r.bytes);
    else
        fprintf(stderr, "unchanged: %s@%s already holds this tree (commit %s)\n", o.repo_id, o.branch, r.commit);
    return 0;
}

#else
int hk_cmd_publish(int argc, char **argv) {
    fprintf(stderr, "hubkern publish: this hubkern was built without the server (HK_BUILD_SERVER=OFF)\n");
    return 1;
}
#endif
