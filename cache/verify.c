/* hubkern cache verify: every blob against its name, every snapshot link, every ref, every
 * variant's entries and (complete variants) content against its metadata.json digest. Reads only:
 * it creates, changes and deletes nothing (repairs are `cache verify --repair`, in the CLI, which
 * pulls what is damaged again). */
#include "cache/maint_internal.h"
#include "util/strmap.h"
#include "util/vec.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct vctx {
    hk_cache_report *rep;
    const char *repo_dir;
    const char *label;
    const hk_cache_sink *sink;
    const char *root;
    /* what the blob walk found, for the link and digest checks of the same repo: every blob file
     * (a link to one of them needs no stat), and the SHA-256-named ones whose bytes matched their
     * name in this run (the digest check need not hash them again) */
    char **names;
    size_t nnames, cap_names;
    hk_strmap blobs;
    const char **good;
    size_t ngood, cap_good;
    int canonical_dirs; /* snapshots/ and blobs/ are real folders: -1 not asked yet */
} vctx;

/* a problem with the entry dir/rel of the repo: reported and counted */
#define PROBLEM(c, dir, rel, ...) \
    (hk__cache_finding((c)->sink, HK_CACHE_PROBLEM, NULL, (c)->label, dir, rel, __VA_ARGS__), (c)->rep->problems++)
#define NOTE(c, dir, rel, ...) hk__cache_finding((c)->sink, HK_CACHE_NOTE, NULL, (c)->label, dir, rel, __VA_ARGS__)

static void vctx_blobs_free(vctx *c) {
    hk__strmap_free(&c->blobs);
    for (size_t i = 0; i < c->nnames; i++) free(c->names[i]);
    free(c->names);
    free(c->good);
}

/* Record a blob file by name; *out_name: the stored copy (NULL when out of memory: the checks that
 * would use it fall back to asking the file system). */
static const char *remember_blob(vctx *c, const char *rel) {
    char *copy = hk__strdup(rel);
    if (!copy || HK_VEC_RESERVE(c->names, c->cap_names, c->nnames + 1) || hk__strmap_put(&c->blobs, copy, c->nnames)) {
        free(copy);
        hk_clear_error();
        return NULL;
    }
    c->names[c->nnames++] = copy;
    return copy;
}

/* The entries of blobs/ and snapshots/ are looked at through their folder's descriptor (e->dirfd):
 * no path walk from the cache root for each. */
static int verify_blob(void *p, const hk_walk_entry *e, int post) {
    vctx *c = p;
    const char *rel = e->rel;
    const struct stat *st = &e->st;
    (void)post;
    if (S_ISDIR(st->st_mode)) return HK_WALK_CONTINUE;
    if (hk__str_ends_with(rel, ".incomplete") || hk__str_ends_with(rel, ".tmp")) {
        NOTE(c, "blobs", rel, "leftover temp file blobs/%s (prune removes it unless an unfinished pull will resume it)",
             rel);
        return HK_OK;
    }
    if (!S_ISREG(st->st_mode)) {
        PROBLEM(c, "blobs", rel, "blobs/%s is not a regular file", rel);
        return HK_OK;
    }
    c->rep->blobs++;
    const char *name = strchr(rel, '/') ? NULL : remember_blob(c, rel);
    char actual[129];
    bool checkable = false;
    uint64_t bytes = 0;
    int hrc = hk__cache_hash_blob_at(actual, &checkable, &bytes, e->dirfd, e->name, rel);
    struct stat full; /* the walk gives only the type: the size comes from the hash, else lstat */
    if (hrc == HK_OK && !checkable && fstatat(e->dirfd, e->name, &full, AT_SYMLINK_NOFOLLOW) == 0)
        bytes = (uint64_t)full.st_size;
    c->rep->bytes += bytes;
    if (hrc != HK_OK) {
        PROBLEM(c, "blobs", rel, "cannot read blobs/%s: %s", rel, hk_last_error());
        hk_clear_error();
    } else if (!checkable) {
        NOTE(c, "blobs", rel, "blobs/%s is not named by a content hash; not verifiable", rel);
    } else if (strcmp(actual, rel) != 0) {
        PROBLEM(c, "blobs", rel,
                "blobs/%s content hash is %s (corrupt blob; `hubkern cache verify --repair` fetches it again)", rel,
                actual);
    } else if (name && strlen(name) == 64 && HK_VEC_RESERVE(c->good, c->cap_good, c->ngood + 1) == HK_OK) {
        c->good[c->ngood++] = name;
    }
    hk_clear_error();
    return HK_OK;
}

static bool canonical_link(vctx *c, const char *rel, const char *target, const char **blob);

static void verify_snapshot_dir(vctx *c, const char *path, const char *rel);

static int verify_link(void *p, const hk_walk_entry *e, int post) {
    vctx *c = p;
    const char *path = e->path, *rel = e->rel;
    const struct stat *st = &e->st;
    if (S_ISDIR(st->st_mode)) {
        if (post) verify_snapshot_dir(c, path, rel);
        return HK_WALK_CONTINUE;
    }
    if (!strchr(rel, '/')) {
        if (rel[0] != '.') c->rep->snapshots++;
        PROBLEM(c, "snapshots", rel, "snapshots/%s is a file directly inside snapshots/", rel);
        return HK_OK;
    }
    if (S_ISREG(st->st_mode)) {
        if (hk__str_ends_with(rel, ".tmp")) NOTE(c, "snapshots", rel, "leftover temp file snapshots/%s", rel);
        return HK_OK; /* no-symlink ("degraded") caches hold plain files */
    }
    if (!S_ISLNK(st->st_mode)) return HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlinkat(e->dirfd, e->name, target, sizeof target - 1);
    if (n <= 0) {
        PROBLEM(c, "snapshots", rel, "cannot read link snapshots/%s", rel);
        return HK_OK;
    }
    target[n] = '\0';
    if (target[0] == '/') {
        PROBLEM(c, "snapshots", rel, "snapshots/%s is an absolute link (%s); caches must use relative links", rel,
                target);
        return HK_OK;
    }
    const char *blob = NULL;
    bool inside = canonical_link(c, rel, target, &blob);
    if (!inside) {
        char resolved[PATH_MAX], blobs[PATH_MAX];
        char *bdir = hk__path_join(c->repo_dir, "blobs");
        if (bdir && realpath(bdir, blobs) && realpath(path, resolved)) {
            size_t bl = strlen(blobs);
            inside = strncmp(resolved, blobs, bl) == 0 && resolved[bl] == '/' && !strchr(resolved + bl + 1, '/');
        }
        free(bdir);
    }
    /* a canonical link to a blob file the walk of blobs/ found is there: no stat */
    struct stat ts;
    bool present = (inside && blob && hk__strmap_get(&c->blobs, blob, NULL)) || fstatat(e->dirfd, e->name, &ts, 0) == 0;
    if (!present) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s: Blob missing", rel, target);
    } else if (!inside) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s points outside blobs/", rel, target);
    }
    return HK_OK;
}

/* Is target, the link at snapshots/<rel>, "../" x (the link's depth below the repo folder) +
 * "blobs/<name>" while snapshots/ and blobs/ are real folders (asked once a repo)? The walk reached
 * the link through real folders only (it follows no link), so then the link resolves into blobs/
 * without the two realpath() calls (about 15 syscalls each) that the general check costs per link.
 * *blob: the <name>. */
static bool canonical_link(vctx *c, const char *rel, const char *target, const char **blob) {
    size_t ups = 1; /* snapshots/ itself */
    for (const char *p = rel; *p; p++) ups += *p == '/';
    for (size_t i = 0; i < ups; i++) {
        if (strncmp(target, "../", 3) != 0) return false;
        target += 3;
    }
    if (strncmp(target, "blobs/", 6) != 0) return false;
    target += 6;
    if (!*target || strchr(target, '/') || strcmp(target, ".") == 0 || strcmp(target, "..") == 0) return false;
    if (c->canonical_dirs < 0) {
        struct stat st;
        char *snaps = hk__path_join(c->repo_dir, "snapshots");
        char *bdir = hk__path_join(c->repo_dir, "blobs");
        c->canonical_dirs = snaps && bdir && lstat(snaps, &st) == 0 && S_ISDIR(st.st_mode) && lstat(bdir, &st) == 0 &&
                            S_ISDIR(st.st_mode);
        free(snaps);
        free(bdir);
    }
    *blob = target;
    return c->canonical_dirs == 1;
}

typedef struct stray_ctx {
    vctx *c;
    const char *commit, *variant;
    const char *dir; /* "snapshots/<commit>/build/<variant>" */
} stray_ctx;

static void report_stray(void *p, const char *path, const char *rel, bool is_dir) {
    stray_ctx *s = p;
    if (is_dir)
        PROBLEM(s->c, s->dir, rel,
                "variant %s at %.8s: %s is a directory where the metadata.json digest lists a file (`hubkern cache "
                "prune` removes it)", s->variant, s->commit, rel);
    else
        PROBLEM(s->c, s->dir, rel,
                "variant %s at %.8s: stray file %s is not in the metadata.json digest (`hubkern cache prune` removes "
                "it)", s->variant, s->commit, rel);
}

/* A variant of a snapshot (snapshots/<commit>/build/<variant> at vdir): entries its digest lacks;
 * the digest itself for complete variants; incomplete ones (interrupted pulls) are only noted. */
static void verify_variant(vctx *c, const char *vdir, const char *commit, const char *variant) {
    char *meta = hk__path_join(vdir, "metadata.json");
    char *text = NULL;
    char *entry = hk__asprintf("snapshots/%s/build/%s", commit, variant);
    stray_ctx sc = {c, commit, variant, entry};
    cJSON *j = meta && hk__read_file(&text, NULL, meta, HK_METADATA_JSON_MAX) == HK_OK ? cJSON_Parse(text) : NULL;
    cJSON *files = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "digest"), "files");
    /* reads only: a receipt vouches for each file's stat identity, which a damaged file no
     * longer has, and the digest check of a load still finds entries the digest lacks */
    if (entry) (void)hk__cache_variant_strays_of(vdir, files, report_stray, &sc);
    if (j && files && entry) {
        /* every byte, once: receipts are neither read nor written here, and a file that links
         * to a blob this run hashed and found equal to its name is not hashed again */
        bool has = false;
        if (hk__verify_variant_digest_ex(&has, NULL, vdir, true, c->good, c->ngood) != HK_OK) {
            /* files not there at all: an interrupted pull, not damage */
            size_t missing = 0;
            cJSON *f;
            cJSON_ArrayForEach(f, files) {
                char *fp = hk__path_join(vdir, f->string);
                struct stat st;
                if (!fp || !hk__path_is_safe_relative(f->string) || stat(fp, &st) != 0) missing++;
                free(fp);
            }
            if (missing) {
                NOTE(c, entry, NULL, "variant %s at %.8s is incomplete (%zu file%s not pulled): pull it to complete it",
                     variant, commit, missing, missing == 1 ? "" : "s");
            } else {
                PROBLEM(c, entry, NULL, "%s (`hubkern cache verify --repair` fetches the damaged files again)",
                        hk_last_error());
            }
        }
    }
    cJSON_Delete(j);
    hk_clear_error();
    free(text);
    free(meta);
    free(entry);
}

/* A folder of snapshots/, after its entries (the walk's post-order call): a snapshot is counted;
 * a variant, <commit>/build/<variant>, is checked once its links have been. */
static void verify_snapshot_dir(vctx *c, const char *path, const char *rel) {
    if (rel[0] == '.') return;
    const char *s1 = strchr(rel, '/');
    if (!s1) {
        c->rep->snapshots++;
        return;
    }
    const char *s2 = strchr(s1 + 1, '/');
    if (!s2 || strchr(s2 + 1, '/') || (size_t)(s2 - s1 - 1) != 5 || strncmp(s1 + 1, "build", 5) != 0 || s2[1] == '.')
        return;
    char *commit = hk__strndup(rel, (size_t)(s1 - rel));
    if (commit) verify_variant(c, path, commit, s2 + 1);
    free(commit);
}

int hk__cache_run_verify(hk_cache_report *rep, const char *root, const hk_cache_options *o) {
    const hk_cache_sink sink = hk__cache_sink_of(o);
    const char *repo_id = o->repo_id;
    hk_cache_repos repos;
    int rc = hk__cache_list_repos(&repos, root, repo_id);
    if (rc) return rc;
    if (repo_id && repos.n == 0) {
        hk__cache_repos_free(&repos);
        return hk__fail(HK_ERR_NOT_FOUND, "%s is not in the cache %s", repo_id, root);
    }
    for (size_t i = 0; i < repos.n && rc == HK_OK; i++) {
        const char *dir = repos.dirs[i];
        char *label = hk__cache_repo_label(repos.types[i], repos.ids[i]);
        vctx c = {rep, dir, label ? label : repos.ids[i], &sink, root, .canonical_dirs = -1};
        hk__strmap_init(&c.blobs);
        rep->repos++;
        char *blobs = hk__path_join(dir, "blobs");
        char *snaps = hk__path_join(dir, "snapshots");
        if (!hk__is_dir(snaps)) {
            PROBLEM(&c, "snapshots", NULL, "no snapshots/ directory");
        }
        if (blobs) rc = hk__cache_walk_entries(blobs, verify_blob, &c, 0);
        /* links, then (after its links) each variant, in one walk */
        if (rc == HK_OK && snaps) rc = hk__cache_walk_entries(snaps, verify_link, &c, HK_WALK_POSTORDER);
        /* refs */
        char *refs = hk__path_join(dir, "refs");
        struct dirent *de;
        if (refs) {
            DIR *rd = opendir(refs);
            while (rd && (de = readdir(rd)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char *rp = hk__path_join(refs, de->d_name);
                if (rp && hk__is_dir(rp)) {
                    free(rp);
                    continue; /* nested refs (refs/pr/N) are read by Python the same way; skip */
                }
                char *data = NULL;
                size_t len = 0;
                rep->refs++;
                if (hk__str_ends_with(de->d_name, ".tmp")) {
                    NOTE(&c, "refs", de->d_name, "leftover temp file refs/%s", de->d_name);
                } else if (!rp || hk__read_file(&data, &len, rp, 256) != HK_OK) {
                    PROBLEM(&c, "refs", de->d_name, "cannot read refs/%s", de->d_name);
                } else if (!((len == 40 || len == 64) && hk__is_hex(data, len))) {
                    PROBLEM(&c, "refs", de->d_name, "refs/%s does not hold exactly a commit id (Python would misread it)",
                            de->d_name);
                } else {
                    char *sd = hk__asprintf("%s/%s", snaps, data);
                    if (!sd || !hk__is_dir(sd)) {
                        PROBLEM(&c, "refs", de->d_name, "refs/%s names %s but snapshots/%s is missing", de->d_name, data,
                                data);
                    }
                    free(sd);
                }
                hk_clear_error();
                free(data);
                free(rp);
            }
            if (rd) closedir(rd);
        }
        free(refs);
        free(blobs);
        free(snaps);
        free(label);
        vctx_blobs_free(&c);
    }
    hk__cache_repos_free(&repos);
    return rc;
}
