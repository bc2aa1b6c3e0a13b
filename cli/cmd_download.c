/* hubkern download --lock FILE: prefetch every kernel pinned in a kernels.lock (either format) at
 * its locked commit into the cache, verified, so that hk_load_locked works offline. */
#include "cli/cli.h"

#include <hubkern.h>

#include "internal.h"
#include "kernel/kernel_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: hubkern download --lock kernels.lock [--all-variants] [--backend B]\n"
            "                        [--endpoint URL] [--cache DIR] [--trust-remote-code]\n\n"
            "Downloads each locked kernel at its locked commit: the variant this machine's C loader\n"
            "would load (tvm-ffi, or torch builds next to libtorch), or every variant with\n"
            "--all-variants. Old-format locks (per-variant sha256 hashes) are checked against the\n"
            "downloaded files. Afterwards hk_load_locked / `hubkern load --lock` need no network.\n"
            "A locked commit whose kernel-status.toml redirects elsewhere is refused (HK_ERR_LOCKFILE):\n"
            "`hubkern lock` pins the destination, which is what gets downloaded and loaded.\n");
}

/* A lock pins what is loaded: `hubkern lock` pins the end of a kernel-status.toml redirect chain,
 * and hk_load_locked reads only the pinned repo's snapshot. If the pinned commit itself redirects
 * (a lock written by hand or by an older hubkern), downloading the destination would leave the
 * locked load without its files; fail with HK_ERR_LOCKFILE and say how to fix the lock instead.
 * Non-zero when it failed (last error set). */
static int refuse_redirected(hk_hub *hub, const hk_lock_entry *e, const char *lockpath) {
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = e->repo_id;
    s.revision = e->commit;
    s.trust_remote_code = 1; /* only looks; the pull below checks the publisher */
    char *repo = NULL, *rev = NULL, *commit = NULL;
    int rc = hk_hub_resolve_spec(&repo, &rev, &commit, hub, &s);
    if (rc == HK_OK && strcmp(repo, e->repo_id) != 0)
        rc = hk_fail(HK_ERR_LOCKFILE,
                     "%s pins %s at %.12s, but kernel-status.toml there redirects to %s@%s, which a locked "
                     "load would not find: re-run `hubkern lock` for %s to pin %s",
                     lockpath, e->repo_id, e->commit, repo, rev, e->repo_id, repo);
    hk_free(repo);
    hk_free(rev);
    hk_free(commit);
    return rc;
}

int hk_cmd_download(int argc, char **argv);
int hk_cmd_download(int argc, char **argv) {
    hk_cli_hub_args ha = {0}; /* --endpoint, --cache; never --offline (HF_HUB_OFFLINE decides) */
    const char *lockpath = NULL, *backend = NULL;
    int all = 0, trust = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--lock") == 0 && i + 1 < argc) lockpath = argv[++i];
        else if (strcmp(a, "--endpoint") == 0 && i + 1 < argc) ha.endpoint = argv[++i];
        else if (strcmp(a, "--cache") == 0 && i + 1 < argc) ha.cache = argv[++i];
        else if (strcmp(a, "--backend") == 0 && i + 1 < argc) backend = argv[++i];
        else if (strcmp(a, "--all-variants") == 0) all = 1;
        else if (strcmp(a, "--trust-remote-code") == 0) trust = 1;
        else {
            fprintf(stderr, "hubkern download: unexpected argument '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!lockpath) {
        usage(stderr);
        return 2;
    }
    hk_lockfile *lock = NULL;
    if (hk_lockfile_read(&lock, lockpath)) return hk_cli_report_error("download");
    hk_hub *hub = NULL;
    if (hk_cli_hub_open(&hub, &ha, NULL, NULL)) {
        hk_lockfile_free(lock);
        return hk_cli_report_error("download");
    }
    int rc = 0;
    for (size_t i = 0; i < lock->count && rc == 0; i++) {
        const hk_lock_entry *e = &lock->entries[i];
        if (!hk_hub_is_offline(hub) && refuse_redirected(hub, e, lockpath)) {
            rc = hk_cli_report_error(e->repo_id);
            break;
        }
        char *variant = NULL;
        if (!all && hk_loader_pick_variant(&variant, hub, e->repo_id, e->commit, backend) != HK_OK) {
            rc = hk_cli_report_error(e->repo_id);
            break;
        }
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = e->repo_id;
        s.revision = e->commit;
        s.variant = variant;
        s.all_variants = all;
        s.trust_remote_code = trust;
        s.backend = backend;
        hk_pull_result *r = NULL;
        if (hk_hub_pull(&r, hub, &s) != HK_OK) {
            rc = hk_cli_report_error(e->repo_id);
            free(variant);
            break;
        }
        for (size_t v = 0; v < hk_pull_result_variant_count(r) && rc == 0; v++) {
            const char *name = hk_pull_result_variant(r, v);
            for (size_t h = 0; h < e->num_variants; h++) {
                if (strcmp(e->variant_names[h], name) != 0) continue;
                char got[72];
                if (hk_variant_hash_from_cache(got, hk_pull_result_variant_path(r, v)) != HK_OK) {
                    rc = hk_cli_report_error(name);
                } else if (strcmp(got, e->variant_hashes[h]) != 0) {
                    fprintf(stderr, "hubkern download: %s %s hashes to %s but the lock says %s\n",
                            e->repo_id, name, got, e->variant_hashes[h]);
                    rc = 1;
                }
            }
            if (rc == 0)
                printf("%s %.12s %s %s\n", e->repo_id, e->commit, name, hk_pull_result_variant_path(r, v));
        }
        hk_pull_result_free(r);
        free(variant);
    }
    hk_hub_free(hub);
    hk_lockfile_free(lock);
    return rc;
}
