/* hubkern cache prune: repair and trim a cache. Removes leftovers of killed processes (temp files,
 * temp links, receipt writers' temp files), broken links, snapshot entries a variant's digest does
 * not list, blobs no snapshot link uses, empty directories and stale verification receipts; with
 * --detached also snapshots no ref names. */
#include "cache/maint_internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int prune_snapshot_tmp(void *p, const char *path, const char *rel, const struct stat *st) {
    hk_prune_ctx *c = p;
    if (S_ISDIR(st->st_mode)) {
        /* post-order: remove empty directories below a commit (never the commit dir itself) */
        if (strchr(rel, '/') && rmdir(path) == 0)
            hk__cache_finding(c->sink, HK_CACHE_REMOVED, NULL, c->label, "snapshots", rel, "empty directory snapshots/%s",
                              rel);
        return HK_OK;
    }
    if (S_ISLNK(st->st_mode) && hk__str_ends_with(rel, ".tmp")) {
        char *what = hk__asprintf("leftover temp link snapshots/%s", rel);
        hk__cache_remove_path(c, path, what ? what : rel, 0);
        free(what);
    }
    return HK_OK;
}

static void prune_refs_tmp(hk_prune_ctx *c) {
    char *refs = hk__path_join(c->repo_dir, "refs");
    DIR *d = refs ? opendir(refs) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!hk__str_ends_with(de->d_name, ".tmp")) continue;
        char *p = hk__path_join(refs, de->d_name);
        char *what = hk__asprintf("leftover temp file refs/%s", de->d_name);
        if (p) hk__cache_remove_path(c, p, what ? what : de->d_name, 0);
        free(what);
        free(p);
    }
    if (d) closedir(d);
    free(refs);
}

/* A temp file of hk__write_file_atomic writing a receipt: "<variant>.json.<8 lowercase hex>.tmp". */
static bool receipt_temp_name(const char *name) {
    static const char tail[] = ".json.01234567.tmp";
    size_t n = strlen(name), t = sizeof tail - 1;
    if (n <= t) return false; /* a variant name comes first */
    const char *p = name + n - t;
    if (strncmp(p, ".json.", 6) != 0 || strcmp(p + 14, ".tmp") != 0) return false;
    for (int i = 6; i < 14; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return false;
    return true;
}

/* A writer creates, fills, fsyncs and renames its temp file within moments: one older than this
 * was left by a writer that died (killed, crashed, disk full); a younger one may be live. */
#define HK_RECEIPT_TEMP_MIN_AGE_S 60

/* prune: leftover temp files of the receipt writer in one commit's receipt folder */
static void prune_receipt_temps(hk_prune_ctx *c, const char *rdir, const char *commit) {
    DIR *d = opendir(rdir);
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d)) != NULL) {
        if (!receipt_temp_name(de->d_name)) continue;
        char *p = hk__path_join(rdir, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > HK_RECEIPT_TEMP_MIN_AGE_S) {
            char *what = hk__asprintf("leftover temp file of a verification receipt %s/%s", commit, de->d_name);
            hk__cache_remove_path(c, p, what ? what : de->d_name, (uint64_t)st.st_size);
            free(what);
        }
        free(p);
    }
    if (d) closedir(d);
}

/* prune: receipts of commits whose snapshot is gone (or, with detached, goes now), of variants
 * no longer in their snapshot, and temp files a killed receipt writer left behind. */
static void prune_receipts(hk_prune_ctx *c, bool detached) {
    char *dirs[2];
    size_t n = hk__receipt_repo_dirs(dirs, c->root, hk__cache_folder_of(c->repo_dir));
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            const char *commit = de->d_name;
            if (commit[0] == '.') continue;
            char *rdir = hk__path_join(dirs[i], commit);
            char *snap = hk__asprintf("%s/snapshots/%s", c->repo_dir, commit);
            if (!rdir || !snap || !hk__is_dir(rdir)) {
                free(rdir);
                free(snap);
                continue;
            }
            if (!hk__is_dir(snap) || (detached && !hk__cache_commit_referenced(c->repo_dir, commit))) {
                char *what = hk__asprintf("verification receipts of %s (no snapshot)", commit);
                hk__cache_remove_path(c, rdir, what ? what : commit, 0);
                free(what);
            } else {
                DIR *vd = opendir(rdir);
                struct dirent *ve;
                while (vd && (ve = readdir(vd)) != NULL) {
                    if (ve->d_name[0] == '.' || !hk__str_ends_with(ve->d_name, ".json")) continue;
                    char *variant = hk__strndup(ve->d_name, strlen(ve->d_name) - 5);
                    char *vdir = variant ? hk__asprintf("%s/build/%s", snap, variant) : NULL;
                    char *rp = hk__path_join(rdir, ve->d_name);
                    if (vdir && rp && !hk__is_dir(vdir)) {
                        char *what = hk__asprintf("verification receipt of %s/%s (no such variant)", commit, variant);
                        hk__cache_remove_path(c, rp, what ? what : ve->d_name, 0);
                        free(what);
                    }
                    free(rp);
                    free(vdir);
                    free(variant);
                }
                if (vd) closedir(vd);
                prune_receipt_temps(c, rdir, commit);
            }
            free(snap);
            free(rdir);
        }
        if (d) closedir(d);
        free(dirs[i]);
    }
}

/* prune: receipts left of repo folders no longer in the cache (removed by hand, by huggingface_hub's
 * `hf cache rm`, or by an older hubkern), in .locks/ and in HUBKERN_RECEIPTS_DIR. */
static void prune_orphan_receipts(hk_cache_report *rep, const char *root, bool dry_run, const hk_cache_sink *sink) {
    char *bases[2] = {hk__path_join(root, ".locks"), hk__receipt_outside_root_dir(root)};
    for (int b = 0; b < 2; b++) {
        DIR *d = bases[b] ? opendir(bases[b]) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            const char *folder = de->d_name;
            if (folder[0] == '.') continue;
            char *repo_dir = hk__path_join(root, folder);
            char *rdir = b == 0 ? hk__asprintf("%s/%s/hubkern-receipts", bases[b], folder) : hk__path_join(bases[b], folder);
            if (repo_dir && rdir && hk__is_dir(rdir) && !hk__is_dir(repo_dir)) {
                /* named as every report names a repo (kernel/org/name), not by its folder */
                hk_repo_type type;
                char *id = NULL, *label = hk__cache_parse_folder(folder, &type, &id) ? hk__cache_repo_label(type, id) : NULL;
                if (!label) hk_clear_error(); /* named by its folder instead */
                hk_prune_ctx c = {rep, root, repo_dir, label ? label : folder, dry_run, sink, NULL, 0, 0, NULL, 0, 0};
                hk__cache_remove_path(&c, rdir, "verification receipts (repo not in the cache)", 0);
                free(label);
                free(id);
            }
            free(rdir);
            free(repo_dir);
        }
        if (d) closedir(d);
        free(bases[b]);
    }
}

/* ---- stray snapshot entries (strays.c finds them) ------------------------------------------- */
typedef struct stray_list {
    char **paths, **rels;
    bool *dirs;
    size_t n, cap_paths, cap_rels, cap_dirs;
    int rc;
} stray_list;

static void note_stray(void *p, const char *path, const char *rel, bool is_dir) {
    stray_list *l = p;
    if (l->rc) return;
    char *cp = hk__strdup(path), *cr = hk__strdup(rel);
    if (!cp || !cr || HK_VEC_RESERVE(l->paths, l->cap_paths, l->n + 1) || HK_VEC_RESERVE(l->rels, l->cap_rels, l->n + 1) ||
        HK_VEC_RESERVE(l->dirs, l->cap_dirs, l->n + 1)) {
        free(cp);
        free(cr);
        l->rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        return;
    }
    l->paths[l->n] = cp;
    l->rels[l->n] = cr;
    l->dirs[l->n] = is_dir;
    l->n++;
}

static void stray_list_free(stray_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->paths[i]);
        free(l->rels[i]);
    }
    free(l->paths);
    free(l->rels);
    free(l->dirs);
}

/* Remove the entries of one variant its digest does not list (found first, removed after the
 * directory scan), remember them as gone for the blob pass, and drop the variant's receipt. */
static int prune_variant_strays(hk_prune_ctx *c, const char *vdir, const char *commit, const char *variant) {
    stray_list l = {0};
    hk__cache_variant_strays(vdir, note_stray, &l);
    int rc = l.rc;
    for (size_t i = 0; rc == HK_OK && i < l.n; i++) {
        if ((rc = HK_VEC_RESERVE(c->gone, c->capgone, c->ngone + 1)) != HK_OK) break;
        c->gone[c->ngone++] = l.paths[i];
        l.paths[i] = NULL;
        char *what = hk__asprintf(l.dirs[i] ? "directory snapshots/%s/build/%s/%s where the metadata.json digest lists a file"
                                           : "stray file snapshots/%s/build/%s/%s (not in the metadata.json digest)",
                                 commit, variant, l.rels[i]);
        hk__cache_remove_path(c, c->gone[c->ngone - 1], what ? what : l.rels[i], 0);
        free(what);
    }
    if (rc == HK_OK && l.n && !c->dry_run) {
        char *rp = hk__receipt_path(c->root, c->repo_dir, commit, variant);
        hk__receipt_remove(rp);
        free(rp);
    }
    stray_list_free(&l);
    return rc;
}

static int prune_strays(hk_prune_ctx *c, const char *snaps) {
    DIR *d = opendir(snaps);
    struct dirent *de;
    int rc = HK_OK;
    while (rc == HK_OK && d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *build = hk__asprintf("%s/%s/build", snaps, de->d_name);
        DIR *bd = build ? opendir(build) : NULL;
        struct dirent *ve;
        while (rc == HK_OK && bd && (ve = readdir(bd)) != NULL) {
            if (ve->d_name[0] == '.') continue;
            char *vdir = hk__path_join(build, ve->d_name);
            if (vdir && hk__is_dir(vdir)) rc = prune_variant_strays(c, vdir, de->d_name, ve->d_name);
            free(vdir);
        }
        if (bd) closedir(bd);
        free(build);
    }
    if (d) closedir(d);
    return rc;
}

static int prune_repo(hk_prune_ctx *c, bool detached) {
    char *snaps = hk__path_join(c->repo_dir, "snapshots");
    if (!snaps) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (detached) {
        DIR *d = opendir(snaps);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.' || hk__cache_commit_referenced(c->repo_dir, de->d_name)) continue;
            char *p = hk__path_join(snaps, de->d_name);
            char *what = hk__asprintf("snapshot %s (no ref names it)", de->d_name);
            if (p) hk__cache_remove_path(c, p, what ? what : de->d_name, 0);
            free(what);
            free(p);
        }
        if (d) closedir(d);
    }
    prune_receipts(c, detached);
    int rc = prune_strays(c, snaps);
    if (rc == HK_OK) rc = hk__cache_walk(snaps, prune_snapshot_tmp, c, true);
    if (rc == HK_OK) rc = hk__cache_walk(snaps, hk__cache_collect_used, c, false);
    free(snaps);
    if (rc) return rc;
    hk__cache_prune_blobs(c);
    prune_refs_tmp(c);
    hk__prune_ctx_free(c);
    return HK_OK;
}

int hk__cache_run_prune(hk_cache_report *rep, const char *root, const hk_cache_options *o) {
    const hk_cache_sink sink = hk__cache_sink_of(o);
    bool detached = o->detached != 0, dry_run = o->dry_run != 0;
    hk_cache_repos repos;
    int rc = hk__cache_list_repos(&repos, root, NULL);
    for (size_t i = 0; rc == HK_OK && i < repos.n; i++) {
        char *label = hk__cache_repo_label(repos.types[i], repos.ids[i]);
        hk_prune_ctx c = {rep, root, repos.dirs[i], label ? label : repos.ids[i], dry_run, &sink, NULL, 0, 0, NULL, 0, 0};
        rep->repos++;
        rc = prune_repo(&c, detached);
        hk__prune_ctx_free(&c);
        free(label);
    }
    hk__cache_repos_free(&repos);
    if (rc == HK_OK) prune_orphan_receipts(rep, root, dry_run, &sink);
    return rc;
}
