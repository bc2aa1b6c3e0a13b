/* hubkern lock: pin kernels (org/name at a version or revision) to commits in a kernels.lock of
 * the current (dependency/lock) format, as kernels 0.17 writes it. */
#include "cli/cli.h"

#include <hubkern.h>

#include "cache/cache.h"
#include "kernel/kernel_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern lock [-o kernels.lock] [--endpoint URL] [--cache DIR] [--trust-remote-code]\n"
            "                    ORG/NAME=N | ORG/NAME@REVISION ...\n\n"
            "Resolves each kernel's version N (branch vN) or revision to a commit on the Hub and writes\n"
            "them, sorted, to a kernels.lock in the format of kernels 0.17:\n"
            "  [{\"dependency\": {\"repo-id\": ..., \"version\": N}, \"lock\": {\"commit\": ...}}, ...]\n"
            "Publisher trust is checked unless --trust-remote-code. Prefetch with\n"
            "`hubkern download --lock FILE`; load with hk_load_locked or `hubkern load --lock FILE`.\n");
}

int hk_cmd_lock(int argc, char **argv);
int hk_cmd_lock(int argc, char **argv) {
    const char *out = "kernels.lock", *endpoint = NULL, *cache = NULL;
    int trust = 0;
    size_t n = 0;
    hk_lock_entry *e = calloc((size_t)argc, sizeof *e);
    char **owned = calloc((size_t)argc * 3, sizeof *owned);
    size_t nowned = 0;
    int rc = 2;
    if (!e || !owned) goto done;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            rc = 0;
            goto done;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) out = argv[++i];
        else if (strcmp(a, "--endpoint") == 0 && i + 1 < argc) endpoint = argv[++i];
        else if (strcmp(a, "--cache") == 0 && i + 1 < argc) cache = argv[++i];
        else if (strcmp(a, "--trust-remote-code") == 0) trust = 1;
        else if (a[0] != '-') {
            char *spec = strdup(a);
            owned[nowned++] = spec;
            char *eq = strchr(spec, '='), *at = strchr(spec, '@');
            hk_lock_entry *x = &e[n];
            x->version = HK_VERSION_UNSET;
            if (eq && !at) {
                *eq = '\0';
                char *end;
                long v = strtol(eq + 1, &end, 10);
                if (!eq[1] || *end || v < 0 || v > 1000000) {
                    fprintf(stderr, "hubkern lock: '%s': the version must be a non-negative integer\n", a);
                    goto done;
                }
                x->version = (int)v;
            } else if (at && !eq && at[1]) {
                *at = '\0';
                x->revision = at + 1;
            } else {
                fprintf(stderr, "hubkern lock: '%s' is not ORG/NAME=N or ORG/NAME@REVISION\n", a);
                goto done;
            }
            if (!hk_repo_id_valid(spec)) {
                fprintf(stderr, "hubkern lock: '%s' is not a valid repo id\n", spec);
                goto done;
            }
            x->repo_id = spec;
            n++;
        } else {
            fprintf(stderr, "hubkern lock: unexpected argument '%s'\n\n", a);
            usage(stderr);
            goto done;
        }
    }
    if (n == 0) {
        usage(stderr);
        goto done;
    }
    hk_hub_options ho;
    hk_hub_options_init(&ho);
    ho.endpoint = endpoint;
    ho.cache_dir = cache;
    ho.offline = 0;
    hk_hub *hub = NULL;
    if (hk_hub_new(&hub, &ho)) {
        rc = hk_cli_report_error("lock");
        goto done;
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!trust) {
            char org[256];
            const char *slash = strchr(e[i].repo_id, '/');
            snprintf(org, sizeof org, "%.*s", slash ? (int)(slash - e[i].repo_id) : 0, e[i].repo_id);
            int trusted = 0;
            if (!slash || hk_hub_check_trust(&trusted, hub, org) != HK_OK) {
                rc = hk_cli_report_error(e[i].repo_id);
                break;
            }
            if (!trusted) {
                fprintf(stderr, "hubkern lock: %s is not a trusted kernel publisher; pass "
                        "--trust-remote-code if you trust it\n", org);
                rc = 1;
                break;
            }
        }
        char commit[65];
        if (hk_hub_resolve(commit, hub, e[i].repo_id, e[i].version, e[i].revision) != HK_OK) {
            rc = hk_cli_report_error(e[i].repo_id);
            break;
        }
        e[i].commit = owned[nowned++] = strdup(commit);
        if (e[i].revision)
            fprintf(stderr, "%s@%s -> %s\n", e[i].repo_id, e[i].revision, commit);
        else
            fprintf(stderr, "%s v%d -> %s\n", e[i].repo_id, e[i].version, commit);
    }
    hk_hub_free(hub);
    if (rc == 0 && hk_lockfile_write(out, e, n) != HK_OK) rc = hk_cli_report_error("lock");
    if (rc == 0) printf("%s\n", out);
done:
    for (size_t i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(e);
    return rc;
}
