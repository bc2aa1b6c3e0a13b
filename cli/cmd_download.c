/* hubkern download --lock FILE: prefetch every kernel pinned in a kernels.lock (either format) at
 * its locked commit into the cache, verified, so that hk_load_locked works offline; with hf
 * download's --include/--exclude, --local-dir and --dry-run. */
#include "cli/cli.h"
#include "cli/local_dir.h"
#include "cli/progress.h"

#include <hubkern.h>

#include "internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "lock", 0, "FILE", "the kernels.lock to prefetch (required)", NULL, NULL},
    {HK_OPT_FLAG, "all-variants", 0, NULL, "every variant instead of the one this machine's loader would load", NULL, NULL},
    {HK_OPT_VALUE, "backend", 0, "B", "choose the variants for this backend", NULL, "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_VALUE, "max-workers", 0, "N", "at most N files in transfer at once (1-64; default 8, as hf download)", NULL,
     NULL},
    {HK_OPT_FLAG, "force-download", 0, NULL, "fetch every file again, even if cached and intact (each replaced "
     "atomically)", NULL, NULL},
    {HK_OPT_LIST, "include", 0, "PATTERN", "only the files of the chosen variant(s) whose repo path matches PATTERN "
     "(a glob, '*' also matches '/'; repeatable; as hf download)", NULL, NULL},
    {HK_OPT_LIST, "exclude", 0, "PATTERN", "leave out the files whose repo path matches PATTERN (repeatable)", NULL,
     NULL},
    {HK_OPT_VALUE, "local-dir", 0, "DIR", "also put the files, as real files in the repo's layout, under DIR (with "
     "hf's .cache/huggingface/download metadata)", NULL, NULL},
    {HK_OPT_FLAG, "dry-run", 0, NULL, "print what would be downloaded (each file, its size, whether it is cached) "
     "and write nothing", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print what was downloaded (or the error) as JSON on stdout", NULL, NULL},
    {HK_OPT_VALUE, "progress", 0, "MODE", "auto (a bar on a terminal), bar, plain (a line every 2 s) or none", NULL,
     "auto|bar|plain|none"},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_download = {
    .name = "download",
    .summary = "prefetch the kernels pinned in a kernels.lock",
    .synopsis = "hubkern download --lock kernels.lock [--all-variants] [--backend B] [--max-workers N]\n"
                "          [--include PATTERN]... [--exclude PATTERN]... [--local-dir DIR] [--dry-run] [...]\n"
                "       hubkern download PROJECT_DIR [--all-variants] [...]   (PROJECT_DIR/kernels.lock, as\n"
                "                        `kernels download PROJECT_DIR`)",
    .description =
        "Downloads each locked kernel at its locked commit: the variant this machine's C loader\n"
        "would load (tvm-ffi, or torch builds next to libtorch), or every variant with\n"
        "--all-variants. Old-format locks (per-variant sha256 hashes) are checked against the\n"
        "downloaded files. Afterwards hk_load_locked / `hubkern load --lock` need no network.\n"
        "A locked commit whose kernel-status.toml redirects elsewhere is refused (HK_ERR_LOCKFILE):\n"
        "`hubkern lock` pins the destination, which is what gets downloaded and loaded.\n"
        "HF_HUB_OFFLINE=1 checks that everything is in the cache instead.\n"
        "--include/--exclude choose among the files of the chosen variant(s) (the\n"
        "variant choice comes first), matched against repo paths such as\n"
        "build/<variant>/_ops.so as `hf download` matches them: a file is taken\n"
        "when it matches an --include (if any) and no --exclude. Of a variant\n"
        "with any file taken, metadata.json and metadata.json.sigstore are always\n"
        "fetched and the signature checked, and each file taken is checked\n"
        "against the metadata.json digest; a variant with none is skipped. Such a\n"
        "variant is complete in the cache only when every file was taken (a\n"
        "locked load needs all of them: download again without patterns).\n"
        "Old-format lock hashes cover whole variants and are not checked for a\n"
        "pattern download.\n"
        "--local-dir DIR: after the verified pull into the cache, each file is\n"
        "copied to DIR/<repo path> through a temp file, hashed and renamed, never\n"
        "left partial; one already there with the right hash is kept. The temp\n"
        "files of a killed run are removed by the next one, never a live run's\n"
        "(each is guarded by the flock of its blob's .lock file).\n"
        "DIR/.cache/huggingface/download/<path>.metadata is written as hf does,\n"
        "so `hf download --local-dir DIR` reuses the files.\n"
        "--dry-run: the listing requests only; prints each file that would be\n"
        "downloaded, its size and whether it is cached intact (hashed) and, with\n"
        "--local-dir, already in DIR; exit 0.\n",
    .tables = {k_opts, cli_hub_opts_online},
    .table_titles = k_titles,
    .json = 1,
};

/* A lock pins what is loaded: `hubkern lock` pins the end of a kernel-status.toml redirect chain,
 * and hk_load_locked reads only the pinned repo's snapshot. If the pinned commit itself redirects
 * (a lock written by hand or by an older hubkern), downloading the destination would leave the
 * locked load without its files; fail with HK_ERR_LOCKFILE and say how to fix the lock instead.
 * Non-zero when it failed (last error set). */
/* The variant this process's loader would load among those at repo_id@commit (NULL *out and
 * non-zero, last error set, when none). */
static int loader_variant(char **out, hk_hub *hub, const char *repo_id, const char *commit,
                          const char *backend) {
    char **names = NULL;
    size_t n = 0;
    int rc = hk_hub_list_variants(&names, &n, hub, repo_id, commit);
    if (rc) return rc;
    hk_get_kernel_options ko = HK_GET_KERNEL_OPTIONS_INIT;
    ko.repo_id = repo_id;
    ko.backend = backend;
    rc = hk_kernel_choose_variant(out, &ko, (const char *const *)names, n);
    hk_hub_strv_free(names);
    return rc;
}

static int refuse_redirected(hk_hub *hub, const hk_lock_entry *e, const char *lockpath) {
    const char *repo_id = hk_lock_entry_repo_id(e), *locked = hk_lock_entry_commit(e);
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = repo_id;
    s.revision = locked;
    s.trust_remote_code = 1; /* only looks; the pull below checks the publisher */
    char *repo = NULL, *rev = NULL, *commit = NULL;
    int rc = hk_hub_resolve_spec(&repo, &rev, &commit, hub, &s);
    if (rc == HK_OK && strcmp(repo, repo_id) != 0)
        rc = hk__fail(HK_ERR_LOCKFILE,
                     "%s pins %s at %.12s, but kernel-status.toml there redirects to %s@%s, which a locked "
                     "load would not find: re-run `hubkern lock` for %s to pin %s",
                     lockpath, repo_id, locked, repo, rev, repo_id, repo);
    hk_free(repo);
    hk_free(rev);
    hk_free(commit);
    return rc;
}

/* Every kernel-depends of a downloaded variant must be pinned by the lock too (a lock written before
 * the dependency existed would leave the locked load without it): HK_ERR_LOCKFILE saying to
 * re-lock. */
static int check_deps_locked(const hk_lockfile *lock, const char *variant_dir, const char *repo_id,
                             const char *lockpath) {
    hk_kernel_metadata *md = NULL;
    if (hk_kernel_metadata_read(&md, variant_dir) != HK_OK) {
        hk_clear_error(); /* a damaged variant is the load's to report */
        return HK_OK;
    }
    int rc = HK_OK;
    for (size_t d = 0; d < hk_kernel_metadata_dependency_count(md) && rc == HK_OK; d++) {
        const char *dep = NULL, *rev = NULL;
        int ver = HK_VERSION_UNSET;
        hk_kernel_metadata_dependency(md, d, &dep, &ver, &rev);
        bool found = false;
        for (size_t i = 0; i < hk_lockfile_count(lock) && !found; i++) {
            const hk_lock_entry *e = hk_lockfile_entry(lock, i);
            const char *er = hk_lock_entry_revision(e);
            found = strcmp(hk_lock_entry_repo_id(e), dep) == 0 &&
                    (rev ? er && strcmp(er, rev) == 0 : !er && hk_lock_entry_version(e) == ver);
        }
        char want[80];
        if (rev) snprintf(want, sizeof want, "revision %.60s", rev);
        else snprintf(want, sizeof want, "version %d", ver);
        if (!found)
            rc = hk__fail(HK_ERR_LOCKFILE, "%s -> %s: dependency %s (%s) is not locked in %s; re-lock with "
                         "`hubkern lock` (or `kernels lock`)", repo_id, dep, dep, want, lockpath);
    }
    hk_kernel_metadata_free(md);
    return rc;
}

/* --max-workers N: 1..64 concurrent transfers (0 in *out when not given). 0, or 2 after a usage
 * error. */
static int max_workers_arg(int *out, const char *v) {
    *out = 0;
    if (!v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 1 || n > 64)
        return cli_usage_error("--max-workers takes a number of transfers from 1 to 64, got '%s'", v);
    *out = (int)n;
    return 0;
}

/* hf's _format_size: 1000-based, one decimal ("4.1k", "3.1G"). */
static void human_size(char buf[24], uint64_t n) {
    static const char *const units[] = {"", "k", "M", "G", "T", "P"};
    double x = (double)n;
    size_t u = 0;
    while (x >= 1000.0 && u + 1 < sizeof units / sizeof *units) x /= 1000.0, u++;
    snprintf(buf, 24, "%.1f%s", x, units[u]);
}

/* What a download run does with the pulled (or, dry, the planned) files: --local-dir, --dry-run,
 * and the totals for the summary. */
typedef struct dl_run {
    const char *local_dir;
    bool dry;
    size_t files, download_files, local_copied, local_reused;
    uint64_t download_bytes;
} dl_run;

/* The files of variant v of r: with --local-dir put into the folder (or, dry, checked there);
 * listed in the kernel's JSON entry (k may be NULL) or, dry, as a table on stdout. 0, or the exit
 * status after the error was reported. */
static int variant_files(dl_run *run, const hk_pull_result *r, size_t v, cJSON *k) {
    const char *name = hk_pull_result_variant(r, v);
    size_t pl = strlen(name) + 6;
    cJSON *jf = k ? cJSON_AddArrayToObject(k, "files") : NULL;
    if (run->dry && !k)
        printf("[dry-run] %s %.12s %s\n", hk_pull_result_repo(r), hk_pull_result_commit(r), name);
    for (size_t i = 0; i < hk_pull_result_file_count(r); i++) {
        const char *path = hk_pull_result_file(r, i);
        if (strncmp(path, "build/", 6) != 0 || strncmp(path + 6, name, pl - 6) != 0 || path[pl] != '/') continue;
        uint64_t size = hk_pull_result_file_size(r, i);
        bool cached = hk_pull_result_file_cached(r, i) != 0, in_dir = false;
        run->files++;
        if (!cached) run->download_files++, run->download_bytes += size;
        if (run->local_dir && run->dry) {
            in_dir = cli_local_file_ok(run->local_dir, path, hk_pull_result_file_blob(r, i), size);
        } else if (run->local_dir) {
            if (cli_local_put(&in_dir, run->local_dir, r, i) != HK_OK) {
                bool cancelled = hk_last_error_code() == HK_ERR_CANCELLED;
                int rc = cli_report_error(path);
                return cancelled ? cli_interrupt_status(rc) : rc; /* 130 SIGINT, 143 SIGTERM */
            }
            if (in_dir) run->local_reused++;
            else run->local_copied++;
        }
        if (jf) {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "path", path);
            cJSON_AddNumberToObject(f, "size", (double)size);
            cJSON_AddBoolToObject(f, "cached", cached);
            cJSON_AddBoolToObject(f, "download", !cached);
            if (run->local_dir) cJSON_AddBoolToObject(f, "in_local_dir", in_dir);
            else cJSON_AddNullToObject(f, "in_local_dir");
            cJSON_AddItemToArray(jf, f);
        } else if (run->dry) {
            char hs[24];
            human_size(hs, size);
            printf("  %-9s %8s  %s%s\n", cached ? "cached" : "download", hs, path,
                   run->local_dir && in_dir ? "  (in local dir)" : "");
        }
    }
    return 0;
}

/* One piece: a command's main reads its options and goes through the lock's entries in order,
 * going on past a kernel without a fitting variant as kernels does; split, each part would take
 * the arguments, the client and the running exit status. */
int cli_cmd_download(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_download, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_download);
        cli_args_free(&a);
        return rc;
    }
    cli_hub_args ha; /* --endpoint, --cache-dir, --token; never --offline (HF_HUB_OFFLINE decides) */
    cli_hub_args_get(&ha, &a);
    const char *lockpath = cli_str(&a, "lock"), *backend = cli_str(&a, "backend");
    int all = cli_count(&a, "all-variants") > 0, trust = cli_count(&a, "trust-remote-code") > 0;
    int force = cli_count(&a, "force-download") > 0;
    dl_run run = {cli_str(&a, "local-dir"), cli_count(&a, "dry-run") > 0, 0, 0, 0, 0, 0};
    const char **include = NULL, **exclude = NULL;
    rc = cli_pattern_lists(&include, &exclude, &a);
    bool patterns = include || exclude;
    cli_progress prog;
    const char *project = a.npos == 1 && !lockpath ? a.pos[0] : NULL;
    if (rc) { /* a pattern's usage error, reported */
    } else if (a.npos > 1 || (a.npos && lockpath))
        rc = cli_usage_error("unexpected argument '%s' (give --lock FILE or one PROJECT_DIR)", a.pos[a.npos - 1]);
    else if (!lockpath && !project) rc = cli_usage_error("--lock FILE or PROJECT_DIR is required");
    else if (run.local_dir && !run.local_dir[0]) rc = cli_usage_error("--local-dir needs a directory");
    else if (run.local_dir && hk__path_exists(run.local_dir) && !hk__is_dir(run.local_dir))
        rc = cli_usage_error("--local-dir %s exists and is not a directory", run.local_dir);
    else if (!(rc = max_workers_arg(&ha.max_workers, cli_str(&a, "max-workers"))) && !(rc = cli_check_backend(backend)))
        rc = cli_progress_init(&prog, run.dry ? "none" : cli_str(&a, "progress"));
    cli_args_free(&a); /* the strings above live in argv */
    char *project_lock = NULL;
    hk_lockfile *lock = NULL;
    hk_hub *hub = NULL;
    cJSON *j = NULL, *jk = NULL;
    if (rc) goto out;
    if (project) { /* kernels download PROJECT_DIR: its kernels.lock */
        project_lock = hk__path_join(project, "kernels.lock");
        if (!project_lock || !hk__path_exists(project_lock)) {
            rc = cli_fail(1, "HK_ERR_NOT_FOUND", "No kernels.lock file found in: %s", project);
            goto out;
        }
        lockpath = project_lock;
    }
    if (hk_lockfile_read(&lock, lockpath)) {
        rc = cli_report_error(NULL);
        goto out;
    }
    cli_catch_interrupt();
    if (cli_hub_open(&hub, &ha, cli_progress_cb, &prog)) {
        rc = cli_report_error(NULL);
        goto out;
    }
    if (run.dry) hk_hub_set_read_only(hub, 1); /* nothing of the run is remembered on disk */
    size_t swept = run.local_dir && !run.dry ? cli_local_sweep(run.local_dir) : 0; /* killed runs' temp files */
    if (swept && !cli_quiet())
        fprintf(stderr, "hubkern download: %s: removed %zu temp file%s an interrupted run left\n", run.local_dir, swept,
                swept == 1 ? "" : "s");
    j = cli_json() ? cJSON_CreateObject() : NULL;
    if (j) {
        cJSON_AddStringToObject(j, "lock", lockpath);
        cJSON_AddStringToObject(j, "cache", hk_hub_cache_root(hub));
        cJSON_AddBoolToObject(j, "dry_run", run.dry);
        if (run.local_dir) cJSON_AddStringToObject(j, "local_dir", run.local_dir);
        else cJSON_AddNullToObject(j, "local_dir");
        jk = cJSON_AddArrayToObject(j, "kernels");
    }
    int no_variant = 0;
    size_t matched = 0; /* kernels with a file the patterns chose */
    for (size_t i = 0; i < hk_lockfile_count(lock) && rc == 0; i++) {
        const hk_lock_entry *e = hk_lockfile_entry(lock, i);
        const char *repo_id = hk_lock_entry_repo_id(e), *commit = hk_lock_entry_commit(e);
        if (!hk_hub_is_offline(hub) && refuse_redirected(hub, e, lockpath)) {
            rc = cli_report_error(repo_id);
            break;
        }
        char *variant = NULL;
        if (!all && loader_variant(&variant, hub, repo_id, commit, backend) != HK_OK) {
            /* kernels download: an entry without a variant for this machine (FileNotFoundError) is
             * reported and the next one downloaded; the exit status says one failed */
            bool next = hk_last_error_code() == HK_ERR_NO_VARIANT;
            rc = cli_report_error(repo_id);
            if (!next) break;
            no_variant = rc;
            rc = 0;
            continue;
        }
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = repo_id;
        s.revision = commit;
        s.variant = variant;
        s.all_variants = all;
        s.trust_remote_code = trust;
        s.force_download = force;
        s.backend = backend;
        s.include = include;
        s.exclude = exclude;
        s.dry_run = run.dry;
        hk_pull_result *r = NULL;
        int prc = hk_hub_pull(&r, hub, &s);
        cli_progress_done(&prog);
        if (prc != HK_OK) {
            bool cancelled = hk_last_error_code() == HK_ERR_CANCELLED;
            rc = cli_report_error(repo_id);
            if (cancelled) rc = cli_interrupt_status(rc); /* 130 SIGINT, 143 SIGTERM */
            hk_free(variant);
            break;
        }
        if (hk_pull_result_variant_count(r) == 0 && !cli_quiet())
            fprintf(stderr, "hubkern download: note: no file of %s at %.12s matches the --include/--exclude "
                    "patterns; nothing downloaded for it\n", repo_id, commit);
        matched += hk_pull_result_variant_count(r) > 0;
        for (size_t v = 0; v < hk_pull_result_variant_count(r) && rc == 0; v++) {
            const char *name = hk_pull_result_variant(r, v);
            /* an old-format lock hashes whole variants: a pattern download has only part of one */
            for (size_t h = 0; !run.dry && !patterns && h < hk_lock_entry_variant_count(e); h++) {
                if (strcmp(hk_lock_entry_variant_name(e, h), name) != 0) continue;
                const char *want = hk_lock_entry_variant_hash(e, h);
                char *got = NULL;
                if (hk_variant_hash_from_cache(&got, hk_pull_result_variant_path(r, v)) != HK_OK) {
                    rc = cli_report_error(name);
                } else if (strcmp(got, want) != 0) {
                    rc = cli_fail(1, "HK_ERR_LOCKFILE", "%s %s hashes to %s but the lock says %s", repo_id, name,
                                     got, want);
                }
                hk_free(got);
            }
            if (rc == 0 && !run.dry && hk_lockfile_format(lock) == HK_LOCK_NEW &&
                check_deps_locked(lock, hk_pull_result_variant_path(r, v), repo_id, lockpath) != HK_OK)
                rc = cli_report_error(repo_id);
            cJSON *k = NULL;
            if (rc == 0 && jk) {
                k = cJSON_CreateObject();
                cJSON_AddStringToObject(k, "repo_id", repo_id);
                cJSON_AddStringToObject(k, "commit", commit);
                cJSON_AddStringToObject(k, "variant", name);
                cJSON_AddStringToObject(k, "path", hk_pull_result_variant_path(r, v));
                cJSON_AddItemToArray(jk, k);
            } else if (rc == 0 && !run.dry) {
                printf("%s %.12s %s %s\n", repo_id, commit, name, hk_pull_result_variant_path(r, v));
            }
            if (rc == 0) rc = variant_files(&run, r, v, k);
        }
        hk_pull_result_free(r);
        hk_free(variant);
    }
    if (rc == 0 && patterns && matched == 0 && hk_lockfile_count(lock) > 0 && !no_variant)
        rc = cli_fail(1, "HK_ERR_NOT_FOUND", "no file of any kernel in %s matches the --include/--exclude patterns",
                      lockpath);
    if (rc == 0) rc = no_variant;
    if (rc == 0 && run.dry && !j) {
        char hs[24];
        human_size(hs, run.download_bytes);
        printf("[dry-run] will download %zu of %zu files (%s)\n", run.download_files, run.files, hs);
    } else if (rc == 0 && run.local_dir && !j && !cli_quiet()) {
        fprintf(stderr, "hubkern download: %s: %zu file%s copied, %zu already there\n", run.local_dir,
                run.local_copied, run.local_copied == 1 ? "" : "s", run.local_reused);
    }
    if (j && rc == 0) {
        cJSON_AddNumberToObject(j, "download_files", (double)run.download_files);
        cJSON_AddNumberToObject(j, "download_bytes", (double)run.download_bytes);
        cli_print_json(j);
        j = NULL;
    }
out:
    cJSON_Delete(j);
    hk_hub_free(hub);
    hk_lockfile_free(lock);
    free(project_lock);
    free(include);
    free(exclude);
    return rc;
}
