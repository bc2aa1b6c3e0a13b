/* hubkern pull: resolve a kernel version or revision, choose the variant for this machine and
 * download it into the shared cache, verified; then every kernel of its dependency tree
 * (metadata.json kernel-depends), each node pulled with the same checks. */
#include "cli/cli.h"
#include "cli/progress.h"

#include <hubkern.h>
#include <hubkern/sys/cache.h> /* a dependency's declared ref, as a load records it */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "version", 0, "N", "the kernel's major version N (branch vN)", NULL, NULL},
    {HK_OPT_VALUE, "revision", 0, "REV", "a branch, tag or commit instead of --version", NULL, NULL},
    {HK_OPT_VALUE, "variant", 0, "V", "this exact build variant instead of the one chosen for this machine", NULL, NULL},
    {HK_OPT_FLAG, "all-variants", 0, NULL, "every variant under build/", NULL, NULL},
    {HK_OPT_VALUE, "signature", 0, "MODE", "the metadata.json.sigstore check (docs/sigstore.md): require, warn or off; "
     "default: require for orgs a signing policy covers, warn for others (HUBKERN_SIGNATURE)", NULL, "require|warn|off"},
    {HK_OPT_VALUE, "backend", 0, "B", "choose the variant for this backend (cpu, cuda, rocm, ...)", NULL,
     "cpu|cuda|rocm|xpu|cann|metal|neuron|tpu"},
    {HK_OPT_FLAG, "trust-remote-code", 0, NULL, "skip the publisher trust check", NULL, NULL},
    {HK_OPT_FLAG, "force-download", 0, NULL, "fetch every file of the variant again, even if cached and intact "
     "(each replaced atomically)", NULL, NULL},
    {HK_OPT_LIST, "include", 0, "PATTERN", "only the files of the chosen variant(s) whose repo path matches PATTERN "
     "(a glob, '*' also matches '/'; repeatable; as download and hf download)", NULL, NULL},
    {HK_OPT_LIST, "exclude", 0, "PATTERN", "leave out the files whose repo path matches PATTERN (repeatable)", NULL,
     NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as one JSON object on stdout", NULL, NULL},
    {HK_OPT_VALUE, "progress", 0, "MODE", "auto (a bar on a terminal), bar, plain (a line every 2 s) or none", NULL,
     "auto|bar|plain|none"},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_pull = {
    .name = "pull",
    .summary = "download a kernel variant into the cache, verified",
    .synopsis = "hubkern pull ORG/NAME (--version N | --revision REV) [--variant V | --all-variants] [options]",
    .description =
        "Downloads build/<variant>/ of a kernel into the huggingface_hub cache (KERNELS_CACHE, HF_HUB_CACHE,\n"
        "HF_HOME/hub), checking every file's size and hash and the metadata.json digest, and writes\n"
        "refs/vN so that offline use works. Prints the variant directory (or JSON with --json).\n"
        "Online, kernel-status.toml redirects are followed: the destination repo is pulled (a note on\n"
        "stderr says so; --json adds \"redirected_from\"), with its publisher checked too.\n"
        "A cached variant is re-checked against its digest on every use; files that its verification\n"
        "receipt shows unchanged since they were hashed (same inode, size, mtime, ctime) are not read\n"
        "again (HUBKERN_VERIFY=always: hash everything).\n"
        "The kernels the pulled variant depends on (kernel-depends, followed to the leaves) are pulled\n"
        "too, each resolved, publisher-checked and verified the same way (the variant this machine\n"
        "would load; with --all-variants every variant of every node, following every variant's\n"
        "kernel-depends as `kernels lock` does); a failure names the path from the root\n"
        "(org/root -> org/dep: ...). --json lists the nodes under \"dependency_tree\".\n"
        "A cached file whose bytes no longer match its hash is downloaded again and replaced atomically;\n"
        "--force-download replaces every file of the variant that way.\n"
        "Ctrl-C (SIGINT) or SIGTERM stops the download at once and says how many files were complete\n"
        "(they stay in the cache) and how many partial bytes were kept (the next pull resumes them);\n"
        "exit 130 (SIGINT) or 143 (SIGTERM).\n"
        "--include/--exclude choose among the files of the chosen variant(s), as\n"
        "`hubkern download` does (the variant choice comes first; repo paths such\n"
        "as build/<variant>/_ops.so; a file is taken when it matches an --include,\n"
        "if any, and no --exclude). metadata.json and metadata.json.sigstore\n"
        "always come, the signature checked, and each file taken is checked\n"
        "against the metadata.json digest. No file taken: exit 1\n"
        "(HK_ERR_NOT_FOUND). The variant is complete in the cache only when every\n"
        "file was taken, so its dependencies are left for the pull without\n"
        "patterns that completes it. Offline, the patterns choose among the\n"
        "files the cached metadata.json lists: each one chosen must be cached.\n"
        "Environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT,\n"
        "HF_HUB_DISABLE_PROGRESS_BARS, HUBKERN_VERIFY, HUBKERN_RECEIPTS_DIR.\n",
    .tables = {k_opts, cli_hub_opts},
    .table_titles = k_titles,
    .conflicts = "version,revision;variant,all-variants",
    .json = 1,
};

static const char *result_file(void *r, size_t i) { return hk_pull_result_file(r, i); }

static void print_json(hk_pull_result *r, hk_hub *hub, const char *asked, bool moved, cJSON *tree) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "repo_id", hk_pull_result_repo(r));
    if (moved) cJSON_AddStringToObject(j, "redirected_from", asked);
    else cJSON_AddNullToObject(j, "redirected_from");
    cJSON_AddStringToObject(j, "revision", hk_pull_result_revision(r));
    cJSON_AddStringToObject(j, "commit", hk_pull_result_commit(r));
    cJSON_AddStringToObject(j, "snapshot", hk_pull_result_snapshot(r));
    cJSON_AddStringToObject(j, "cache", hk_hub_cache_root(hub));
    cJSON_AddBoolToObject(j, "offline", hk_pull_result_offline(r));
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) {
        cJSON *v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "name", hk_pull_result_variant(r, i));
        cJSON_AddStringToObject(v, "path", hk_pull_result_variant_path(r, i));
        cJSON_AddItemToArray(vs, v);
    }
    cJSON_AddRawToObject(j, "files", CLI_JSON_STREAMED); /* printed from r as it goes */
    cJSON_AddNumberToObject(j, "files_downloaded", (double)hk_pull_result_files_downloaded(r));
    cJSON_AddNumberToObject(j, "bytes_downloaded", (double)hk_pull_result_bytes_downloaded(r));
    cJSON_AddNumberToObject(j, "bytes_resumed", (double)hk_pull_result_bytes_resumed(r));
    cJSON_AddNumberToObject(j, "bytes_verified", (double)hk_pull_result_bytes_verified(r));
    cJSON_AddNumberToObject(j, "bytes_trusted", (double)hk_pull_result_bytes_trusted(r));
    cJSON_AddItemToObject(j, "dependency_tree", tree);
    cli_print_json_strings(j, hk_pull_result_file_count(r), result_file, r);
}

/* Does the variant's metadata.json list kernel-depends? (An unreadable one: the load reports it.) */
static bool declares_deps(const char *variant_dir) {
    hk_kernel_metadata *md = NULL;
    bool yes = hk_kernel_metadata_read(&md, variant_dir) == HK_OK && hk_kernel_metadata_dependency_count(md) > 0;
    hk_kernel_metadata_free(md);
    hk_clear_error();
    return yes;
}

/* "org/root -> org/a -> org/b" for node i of the tree. */
static void node_path(char *buf, size_t cap, const hk_kernel_tree *t, size_t i) {
    int chain[HK_DEP_MAX_DEPTH + 2];
    size_t n = 0;
    for (int j = (int)i; j >= 0 && n < sizeof chain / sizeof *chain; j = hk_kernel_tree_parent(t, (size_t)j))
        chain[n++] = j;
    size_t len = 0;
    buf[0] = '\0';
    while (n-- > 0 && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? " -> " : "", hk_kernel_tree_repo_id(t, (size_t)chain[n]));
}

static cJSON *tree_node_json(const char *repo, int version, const char *revision, const char *commit,
                             const char *variant, int depth, int parent, const char *path) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "repo_id", repo);
    if (revision) cJSON_AddStringToObject(n, "revision", revision);
    else if (version >= 0) cJSON_AddNumberToObject(n, "version", version);
    cJSON_AddStringToObject(n, "commit", commit);
    cJSON_AddStringToObject(n, "variant", variant);
    if (depth >= 0) cJSON_AddNumberToObject(n, "depth", depth);
    if (depth >= 0) cJSON_AddNumberToObject(n, "parent", parent);
    if (path) cJSON_AddStringToObject(n, "path", path);
    return n;
}

/* Pull one dependency node (repo at commit, one variant or all); prints its variant paths, adds
 * them to `arr`. Errors are prefixed with `where` (the path from the root). */
static int pull_node(hk_hub *hub, const hk_pull_spec *root, int signature, const char *repo, const char *commit,
                     const char *variant, const char *where, cJSON *arr,
                     cJSON *(*mk)(void *, const char *, const char *), void *ud) {
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = repo;
    s.revision = commit;
    s.variant = variant;
    s.all_variants = variant == NULL;
    s.backend = root->backend;
    s.signature = signature; /* the tree's: inherited from the root, never lowered */
    s.trust_remote_code = 1; /* the publisher was checked while resolving the tree */
    hk_pull_result *r = NULL;
    if (hk_hub_pull(&r, hub, &s) != HK_OK) return cli_report_error(where);
    for (size_t v = 0; v < hk_pull_result_variant_count(r); v++) {
        if (arr) cJSON_AddItemToArray(arr, mk(ud, hk_pull_result_variant(r, v), hk_pull_result_variant_path(r, v)));
        else printf("%s\n", hk_pull_result_variant_path(r, v));
    }
    if (!cli_quiet() && !arr)
        fprintf(stderr, "%s: %s -> %.12s: %zu file%s, %zu downloaded, all verified\n", where, repo, commit,
                hk_pull_result_file_count(r), hk_pull_result_file_count(r) == 1 ? "" : "s",
                hk_pull_result_files_downloaded(r));
    hk_pull_result_free(r);
    return 0;
}

typedef struct tree_mk {
    const hk_kernel_tree *t;
    size_t i;
} tree_mk;

static cJSON *mk_tree_node(void *ud, const char *variant, const char *path) {
    const tree_mk *m = ud;
    return tree_node_json(hk_kernel_tree_repo_id(m->t, m->i), hk_kernel_tree_version(m->t, m->i),
                          hk_kernel_tree_revision(m->t, m->i), hk_kernel_tree_commit(m->t, m->i), variant,
                          hk_kernel_tree_depth(m->t, m->i), hk_kernel_tree_parent(m->t, m->i), path);
}

static cJSON *mk_lock_node(void *ud, const char *variant, const char *path) {
    const hk_lock_entry *e = ud;
    return tree_node_json(hk_lock_entry_repo_id(e), hk_lock_entry_version(e), hk_lock_entry_revision(e),
                          hk_lock_entry_commit(e), variant, -1, -1, path);
}

/* The options of a dependency-tree walk from repo at commit: the pull's trust answer, signature
 * mode and client (its endpoint, token, cache, offline mode and memo). */
static hk_get_kernel_options tree_options(const hk_pull_spec *spec, hk_hub *hub, const char *repo,
                                          const char *commit) {
    hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
    o.repo_id = repo;
    o.revision = commit;
    o.trust_remote_code = spec->trust_remote_code;
    o.signature = spec->signature;
    o.hub = hub;
    return o;
}

/* The dependencies of the pulled root (repo at commit, variant `root_variant`): the tree this
 * machine would load, resolved by the library (per node: publisher, commit, variant, archs), each
 * node pulled once. */
/* Node i's declared branch or version as a ref to the commit it resolved to, so that the same tree
 * resolves offline later (what a load records too); a commit or a lock pins no ref. */
static int record_declared_ref(hk_hub *hub, const hk_kernel_tree *t, size_t i) {
    const char *rev = hk_kernel_tree_revision(t, i);
    char label[32];
    if (!rev) {
        snprintf(label, sizeof label, "v%d", hk_kernel_tree_version(t, i));
        rev = label;
    }
    const char *commit = hk_kernel_tree_commit(t, i);
    if (strcmp(rev, commit) == 0) return 0;
    char *dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, hk_kernel_tree_repo_id(t, i));
    int rc = dir ? hk_cache_write_ref(dir, rev, commit) : hk_last_error_code();
    hk_free(dir);
    return rc ? cli_report_error("recording the ref of a dependency") : 0;
}

static int pull_tree(hk_hub *hub, const hk_pull_spec *spec, const cli_hub_args *h, const char *repo,
                     const char *commit, const char *root_variant, const char *root_path, cJSON *arr) {
    hk_get_kernel_options o = tree_options(spec, hub, repo, commit);
    o.variant = root_variant;
    o.backend = spec->backend;
    /* archs are the load's check when a variant was named (it may be for another machine) */
    o.skip_arch_check = spec->variant != NULL;
    hk_kernel_tree *t = NULL;
    if (hk_kernel_tree_resolve(&t, &o, NULL) != HK_OK) return cli_report_error(NULL);
    int rc = 0;
    if (arr) {
        tree_mk m = {t, 0};
        cJSON_AddItemToArray(arr, mk_tree_node(&m, root_variant, root_path));
    }
    for (size_t i = 1; i < hk_kernel_tree_count(t) && rc == 0; i++) {
        bool seen = false; /* a node shared by two dependents is pulled once */
        for (size_t j = 1; j < i && !seen; j++)
            seen = strcmp(hk_kernel_tree_repo_id(t, i), hk_kernel_tree_repo_id(t, j)) == 0 &&
                   strcmp(hk_kernel_tree_commit(t, i), hk_kernel_tree_commit(t, j)) == 0 &&
                   strcmp(hk_kernel_tree_variant(t, i), hk_kernel_tree_variant(t, j)) == 0;
        char where[1024];
        node_path(where, sizeof where, t, i);
        tree_mk m = {t, i};
        if (seen && arr) cJSON_AddItemToArray(arr, mk_tree_node(&m, hk_kernel_tree_variant(t, i), NULL));
        else if (!seen)
            rc = pull_node(hub, spec, hk_kernel_tree_signature(t, i), hk_kernel_tree_repo_id(t, i), hk_kernel_tree_commit(t, i),
                           hk_kernel_tree_variant(t, i), where, arr, mk_tree_node, &m);
        if (!seen && rc == 0 && !hk_hub_is_offline(hub)) rc = record_declared_ref(hub, t, i);
    }
    hk_kernel_tree_free(t);
    return rc;
}

/* --all-variants: every node that any variant's kernel-depends reaches (kernels' lock_kernel_tree),
 * each with all of its variants. */
static int pull_all_tree(hk_hub *hub, const hk_pull_spec *spec, const cli_hub_args *h, const char *repo,
                         const char *commit, cJSON *arr) {
    hk_get_kernel_options o = tree_options(spec, hub, repo, commit);
    hk_lockfile *lf = NULL;
    int rc = hk_lockfile_new(&lf);
    if (rc == HK_OK) rc = hk_lockfile_add_tree(lf, &o);
    if (rc != HK_OK) {
        hk_lockfile_free(lf);
        return cli_report_error(NULL);
    }
    for (size_t i = 0; i < hk_lockfile_count(lf) && rc == 0; i++) {
        const hk_lock_entry *e = hk_lockfile_entry(lf, i);
        if (strcmp(hk_lock_entry_repo_id(e), repo) == 0 && strcmp(hk_lock_entry_commit(e), commit) == 0) continue;
        char where[512];
        snprintf(where, sizeof where, "%s -> ... -> %s", repo, hk_lock_entry_repo_id(e));
        rc = pull_node(hub, spec, spec->signature, hk_lock_entry_repo_id(e), hk_lock_entry_commit(e), NULL, where, arr, mk_lock_node,
                       (void *)e);
    }
    hk_lockfile_free(lf);
    return rc;
}

int cli_cmd_pull(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_pull, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_pull);
        cli_args_free(&a);
        return rc;
    }
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    s.revision = cli_str(&a, "revision");
    s.variant = cli_str(&a, "variant");
    s.backend = cli_str(&a, "backend");
    s.all_variants = cli_count(&a, "all-variants") > 0;
    s.trust_remote_code = cli_count(&a, "trust-remote-code") > 0;
    s.force_download = cli_count(&a, "force-download") > 0;
    const char **include = NULL, **exclude = NULL;
    cli_progress prog;
    if ((rc = cli_pattern_lists(&include, &exclude, &a))) goto out;
    s.include = include;
    s.exclude = exclude;
    bool patterns = include || exclude;
    if ((rc = cli_int(&a, "version", 1000000, &s.kernel_version))) goto out;
    const char *sig = cli_str(&a, "signature");
    if (sig && hk_signature_mode_parse(&s.signature, sig)) {
        rc = cli_usage_error("--signature: %s", hk_last_error());
        goto out;
    }
    if (a.npos == 0) {
        rc = cli_usage_error("missing ORG/NAME (the kernel repo to pull)");
        goto out;
    }
    if (a.npos > 1) {
        rc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
        goto out;
    }
    s.repo_id = a.pos[0];
    if (s.kernel_version < 0 && !s.revision) {
        rc = cli_usage_error("--version N or --revision REV is required");
        goto out;
    }
    if ((rc = cli_check_backend(s.backend)) || (rc = cli_progress_init(&prog, cli_str(&a, "progress"))))
        goto out;
    cli_catch_interrupt();
    hk_hub *hub = NULL;
    if (cli_hub_open(&hub, &h, cli_progress_cb, &prog)) {
        rc = cli_report_error(NULL);
        goto out;
    }
    hk_pull_result *r = NULL;
    int prc = hk_hub_pull(&r, hub, &s);
    cli_progress_done(&prog);
    if (prc) {
        int cancelled = hk_last_error_code() == HK_ERR_CANCELLED;
        rc = cli_report_error(NULL); /* the library's message counts complete files and kept partial bytes */
        if (cancelled) {
            rc = cli_interrupt_status(rc);
            int signo = cli_interrupted();
            fprintf(stderr, "hubkern pull: interrupted%s: complete files stay in %s; run the same command to "
                    "resume\n", signo == SIGTERM ? " by SIGTERM" : signo == SIGINT ? " by SIGINT" : "",
                    hk_hub_cache_root(hub));
        }
        hk_hub_free(hub);
        goto out;
    }
    if (cli_interrupted()) { /* the signal came after the last transfer: say so, do not go on silently */
        fprintf(stderr, "hubkern pull: interrupted by %s after %s was complete in %s; its dependencies were "
                "not pulled\n", cli_interrupted() == SIGTERM ? "SIGTERM" : "SIGINT", hk_pull_result_snapshot(r),
                hk_hub_cache_root(hub));
        rc = cli_interrupt_status(1);
        hk_pull_result_free(r);
        hk_hub_free(hub);
        goto out;
    }
    if (hk_pull_result_variant_count(r) == 0) { /* the library's result when the patterns took nothing */
        rc = cli_fail(1, "HK_ERR_NOT_FOUND", "no file of %s at %.12s matches the --include/--exclude patterns",
                      hk_pull_result_repo(r), hk_pull_result_commit(r));
        hk_pull_result_free(r);
        hk_hub_free(hub);
        goto out;
    }
    bool moved = cli_note_redirect(s.repo_id, hk_pull_result_repo(r), NULL);
    if (!cli_json()) {
        if (!cli_quiet()) {
            char resumed[64] = ""; /* bytes an interrupted pull kept are not counted as transferred */
            if (hk_pull_result_bytes_resumed(r))
                snprintf(resumed, sizeof resumed, " transferred, %.1f MB resumed", hk_pull_result_bytes_resumed(r) / 1e6);
            fprintf(stderr, "%s %s -> %.12s: %zu file%s, %zu downloaded (%.1f MB%s), all verified\n",
                    hk_pull_result_repo(r), hk_pull_result_revision(r), hk_pull_result_commit(r),
                    hk_pull_result_file_count(r), hk_pull_result_file_count(r) == 1 ? "" : "s",
                    hk_pull_result_files_downloaded(r), hk_pull_result_bytes_downloaded(r) / 1e6, resumed);
        }
        for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) printf("%s\n", hk_pull_result_variant_path(r, i));
    }
    /* the dependency tree: of each pulled variant, or every node and variant with --all-variants;
     * a variant without kernel-depends costs no request; a pattern pull leaves its variant
     * incomplete (not loadable), so the tree waits for the pull that completes it */
    cJSON *tree = cli_json() ? cJSON_CreateArray() : NULL;
    bool any_deps = false;
    for (size_t i = 0; i < hk_pull_result_variant_count(r); i++) {
        bool d = !patterns && declares_deps(hk_pull_result_variant_path(r, i));
        any_deps = any_deps || d;
        if (patterns && !cli_quiet() && declares_deps(hk_pull_result_variant_path(r, i)))
            fprintf(stderr, "hubkern pull: note: the dependencies of build/%s are not pulled with "
                    "--include/--exclude; pull without patterns to complete the variant and its tree\n",
                    hk_pull_result_variant(r, i));
        if (tree && (!d || s.all_variants))
            cJSON_AddItemToArray(tree, tree_node_json(hk_pull_result_repo(r), s.revision ? -1 : s.kernel_version,
                                                      s.revision, hk_pull_result_commit(r), hk_pull_result_variant(r, i),
                                                      0, -1, hk_pull_result_variant_path(r, i)));
    }
    if (s.all_variants && any_deps && !hk_hub_is_offline(hub))
        rc = pull_all_tree(hub, &s, &h, hk_pull_result_repo(r), hk_pull_result_commit(r), tree);
    for (size_t i = 0; !s.all_variants && !patterns && rc == 0 && i < hk_pull_result_variant_count(r); i++)
        if (declares_deps(hk_pull_result_variant_path(r, i)))
            rc = pull_tree(hub, &s, &h, hk_pull_result_repo(r), hk_pull_result_commit(r), hk_pull_result_variant(r, i),
                           hk_pull_result_variant_path(r, i), tree);
    if (rc == 0 && tree) print_json(r, hub, s.repo_id, moved, tree);
    else cJSON_Delete(tree);
    hk_pull_result_free(r);
    hk_hub_free(hub);
out:
    cli_args_free(&a);
    free(include);
    free(exclude);
    return rc;
}
