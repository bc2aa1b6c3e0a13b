/* hubkern bundle: carry cached repos to machines without network access. */
#include "cli/cli.h"

#include <hubkern.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern bundle create OUT.tar[.gz|.zst] REPO [REPO...] [--cache DIR] [--repo-type T]\n"
            "       hubkern bundle extract IN.tar[.gz|.zst] [--cache DIR]\n"
            "       hubkern bundle list IN.tar[.gz|.zst]\n"
            "\n"
            "Moves cached repos (blobs, snapshots, refs) between machines, e.g. from a node that can\n"
            "reach the Hub to an air-gapped fleet. REPO is org/name (of --repo-type, default kernel) or a\n"
            "cache folder name such as kernels--org--name. extract verifies every blob against its\n"
            "name (sha256 or git sha1), accepts nothing outside the cache layout, and writes refs last.\n"
            "\n"
            "options:\n"
            "  --cache DIR       cache root (default: KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub, ...)\n"
            "  --repo-type T     model, dataset, space or kernel (default kernel)\n"
            "  -h, --help        this help\n");
}

static void print_entry(void *ud, const char *path, char kind, uint64_t size, const char *target) {
    if (kind == 'l') printf("l %12s %s -> %s\n", "", path, target ? target : "?");
    else printf("%c %12llu %s\n", kind, (unsigned long long)size, path);
}

int hk_cmd_bundle(int argc, char **argv); /* called through the table in main.c */
int hk_cmd_bundle(int argc, char **argv) {
    const char *cache = NULL, *type_s = "kernel";
    static const struct option opts[] = {{"cache", required_argument, 0, 'c'},
                                         {"repo-type", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cache = optarg; break;
        case 't': type_s = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int nargs = argc - optind;
    char **args = argv + optind;
    if (nargs < 2) {
        usage(stderr);
        return 2;
    }
    hk_repo_type type;
    if (hk_repo_type_parse(&type, type_s)) return hk_cli_report_error("bundle");
    const char *verb = args[0], *file = args[1];
    if (strcmp(verb, "list") == 0) {
        return hk_bundle_list(file, print_entry, NULL) ? hk_cli_report_error("bundle list") : 0;
    }
    char *root = NULL;
    if (hk_cache_root(&root, cache, type)) return hk_cli_report_error("bundle");
    hk_bundle_options o = HK_BUNDLE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_type = type;
    hk_bundle_report *st = NULL;
    int rc;
    if (strcmp(verb, "create") == 0 && nargs >= 3) {
        rc = hk_bundle_create(&st, file, (const char *const *)(args + 2), (size_t)(nargs - 2), &o);
        if (rc == HK_OK)
            printf("bundled %u repo(s): %u blobs (%llu bytes), %u snapshot files, %u refs into %s\n",
                   hk_bundle_report_repos(st), hk_bundle_report_blobs_added(st),
                   (unsigned long long)hk_bundle_report_bytes(st), hk_bundle_report_links(st), hk_bundle_report_refs(st),
                   file);
    } else if (strcmp(verb, "extract") == 0 && nargs == 2) {
        rc = hk_bundle_extract(&st, file, &o);
        if (rc == HK_OK)
            printf("imported %u repo(s) into %s: %u new blobs, %u already present (%llu bytes verified), "
                   "%u snapshot files, %u refs\n",
                   hk_bundle_report_repos(st), root, hk_bundle_report_blobs_added(st), hk_bundle_report_blobs_present(st),
                   (unsigned long long)hk_bundle_report_bytes(st), hk_bundle_report_links(st), hk_bundle_report_refs(st));
    } else {
        free(root);
        usage(stderr);
        return 2;
    }
    hk_bundle_report_free(st);
    free(root);
    return rc ? hk_cli_report_error("bundle") : 0;
}
