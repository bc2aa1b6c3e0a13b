/* Read side of the store: repos, revisions, snapshot listings and files, for any cache in the
 * huggingface_hub layout (written by hubkern publish/pull or by Python).
 *
 * Metadata comes from blob names: a blob named by 64 hex is an LFS file whose etag is its sha256
 * (its git oid is the sha1 of its LFS pointer); 40 hex is a git-stored file whose etag and oid are
 * that name. Anything else (no-symlink caches, invented etags) is hashed once and remembered. */
#include "util/text.h"
#include "server/srv_internal.h"
#include "util/vec.h"
#include "server/srv_upstream.h"

#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HASH_CACHE_MAX 4096
#define LISTING_CACHE_MAX 16
#define LISTING_TTL_MS 5000
#define LISTING_CACHE_ENTRIES 100000 /* about 20 MB of entries kept, or the newest listing alone if larger */
static long listing_ttl_ms = LISTING_TTL_MS; /* LISTING_TTL_MS, or a test's (srv_store_test_hooks) */

/* A listing shared by the requests that need it within LISTING_TTL_MS (tree pages follow each other
 * quickly; a snapshot that a client is still filling shows new files after the TTL). */
typedef struct cached_listing {
    char *key; /* repo_dir "\n" commit */
    uint64_t at_ms; /* hk__now_ms() when listed */
    int refs;  /* the cache's own reference + one per caller */
    srv_listing l;
} cached_listing;

typedef struct hash_memo {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool lfs;
    char etag[65];
} hash_memo;

/* "this name under the root is a folder", proven by fstatat() at a watch generation (a repo is
 * made or removed by an entry of the root, which moves it). Direct-mapped: a collision only costs
 * the stat. */
#define DIR_VERDICT_SLOTS 32u
typedef struct dir_verdicts {
    pthread_mutex_t mu;
    struct {
        char name[256];
        uint64_t gen; /* 0: empty */
    } slot[DIR_VERDICT_SLOTS];
} dir_verdicts;

static size_t verdict_slot(const char *name) {
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    return h & (DIR_VERDICT_SLOTS - 1);
}

static bool dir_verdict_holds(dir_verdicts *d, const char *name, uint64_t gen) {
    size_t i = verdict_slot(name);
    pthread_mutex_lock(&d->mu);
    bool ok = d->slot[i].gen == gen && strcmp(d->slot[i].name, name) == 0;
    pthread_mutex_unlock(&d->mu);
    return ok;
}

static void dir_verdict_keep(dir_verdicts *d, const char *name, uint64_t gen) {
    size_t n = strlen(name), i = verdict_slot(name);
    if (n >= sizeof d->slot[0].name) return;
    pthread_mutex_lock(&d->mu);
    memcpy(d->slot[i].name, name, n + 1);
    d->slot[i].gen = gen;
    pthread_mutex_unlock(&d->mu);
}

struct srv_store {
    char *root; /* realpath */
    int root_fd; /* root kept open: a repo folder is checked by its one name under it, not the whole path */
    uint64_t lfs_threshold;
    pthread_mutex_t mu;
    hash_memo *memo;
    size_t n_memo, next_evict;
    cached_listing *lcache[LISTING_CACHE_MAX];
    srv_snap_cache *snaps; /* kept snapshot folders (store_linked.c) */
    srv_watch *watch;      /* NULL: every folder verdict by its stat() (store_watch.c) */
    bool root_watched;
    dir_verdicts *dirs;    /* repo folders proven folders, by name under the root */
};

int srv_store_open(srv_store **out, const char *root, uint64_t lfs_threshold) {
    *out = NULL;
    char real[PATH_MAX];
    if (!realpath(root, real)) return hk__fail(hk__errno_code(errno), "cannot open the store %s: %s", root, strerror(errno));
    if (!hk__is_dir(real)) return hk__fail(HK_ERR_NOT_FOUND, "the store %s is not a directory", root);
    srv_store *s = calloc(1, sizeof *s);
    if (!s || !(s->root = hk__strdup(real)) || !(s->memo = calloc(HASH_CACHE_MAX, sizeof *s->memo)) ||
        srv_snap_cache_new(&s->snaps) != HK_OK) {
        if (s) {
            free(s->root);
            free(s->memo);
        }
        free(s);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    s->lfs_threshold = lfs_threshold ? lfs_threshold : HK_LFS_THRESHOLD_DEFAULT;
    s->root_fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* -1: every check by path */
    pthread_mutex_init(&s->mu, NULL);
    if (srv_watch_new(&s->watch, s->root_fd) != HK_OK || (s->watch && !(s->dirs = calloc(1, sizeof *s->dirs)))) {
        srv_store_close(s);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (s->dirs) pthread_mutex_init(&s->dirs->mu, NULL);
    s->root_watched = s->dirs && srv_watch_dir(s->watch, s->root_fd);
    srv_snap_cache_use_watch(s->snaps, s->watch);
    *out = s;
    return HK_OK;
}

static void cached_unref(cached_listing *c) {
    if (--c->refs > 0) return;
    srv_listing_free(&c->l);
    free(c->key);
    free(c);
}

void srv_store_close(srv_store *s) {
    if (!s) return;
    for (size_t i = 0; i < LISTING_CACHE_MAX; i++)
        if (s->lcache[i]) cached_unref(s->lcache[i]);
    srv_snap_cache_free(s->snaps);
    srv_watch_free(s->watch);
    if (s->dirs) pthread_mutex_destroy(&s->dirs->mu);
    free(s->dirs);
    pthread_mutex_destroy(&s->mu);
    if (s->root_fd >= 0) close(s->root_fd);
    free(s->memo);
    free(s->root);
    free(s);
}

const char *srv_store_root(const srv_store *s) { return s->root; }

srv_watch *srv_store_watch(const srv_store *s) { return s ? s->watch : NULL; }

char *srv_store_repo_path(const srv_store *s, hk_repo_type type, const char *repo_id) {
    /* the one place a repo folder's name is made: an id that is not a Hub id ("x/../../y", "..")
     * gets none, so no folder can be named outside the root or with ".." in it */
    if (!hk_repo_id_valid(repo_id)) {
        hk__fail(HK_ERR_INVALID_ARG, "invalid repo id");
        return NULL;
    }
    return hk_cache_repo_dir(s->root, type, repo_id);
}

char *srv_store_repo_dir(const srv_store *s, hk_repo_type type, const char *repo_id) {
    char *dir = srv_store_repo_path(s, type, repo_id);
    if (!dir) {
        hk_clear_error();
        return NULL;
    }
    struct stat st;
    /* the repo folder itself must be a real directory, not a link out of the store. By its name
     * under the kept root first (one lookup instead of the whole path's); when that fails (say the
     * store folder was replaced since the start) the path decides */
    size_t rl = strlen(s->root);
    bool under = s->root_fd >= 0 && strncmp(dir, s->root, rl) == 0 && dir[rl] == '/';
    /* no entry of the root changed since the last stat said "folder": that verdict still holds */
    uint64_t gen = under && s->root_watched ? srv_watch_gen(s->watch) : 0;
    bool kept = gen && dir_verdict_holds(s->dirs, dir + rl + 1, gen);
    if (!kept && under) {
        kept = fstatat(s->root_fd, dir + rl + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (kept && gen) dir_verdict_keep(s->dirs, dir + rl + 1, gen);
    }
    if (!kept && (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        free(dir);
        return NULL;
    }
    return dir;
}

static bool is_lower_hex(const char *s, size_t n) { return strlen(s) == n && hk__is_hex(s, n); }

int srv_store_resolve_rev(char out_commit[65], const char *repo_dir, const char *rev) {
    out_commit[0] = '\0';
    const char *candidates[2] = {rev, NULL};
    if (hk__str_starts_with(rev, "refs/heads/")) candidates[1] = rev + strlen("refs/heads/");
    else if (hk__str_starts_with(rev, "refs/tags/")) candidates[1] = rev + strlen("refs/tags/");
    for (int i = 0; i < 2 && candidates[i]; i++) {
        const char *r = candidates[i];
        char *ref = hk_cache_ref_path(repo_dir, r); /* NULL for a name that would leave refs/ */
        if (!ref) {
            if (hk_last_error_code() == HK_ERR_NOMEM) return HK_ERR_NOMEM;
            hk_clear_error();
            continue;
        }
        int rc = srv_refs_resolve(out_commit, repo_dir, r, ref); /* kept while the file is unchanged */
        free(ref);
        if (rc == HK_OK) return HK_OK;
        if (rc == HK_ERR_NOMEM) return rc;
        hk_clear_error();
    }
    if (is_lower_hex(rev, 40) || is_lower_hex(rev, 64)) {
        char *snap = hk_cache_snapshot_path(repo_dir, rev, NULL);
        if (!snap) return hk_last_error_code();
        struct stat st;
        bool ok = lstat(snap, &st) == 0 && S_ISDIR(st.st_mode);
        free(snap);
        if (ok) {
            memcpy(out_commit, rev, strlen(rev) + 1); /* 40 or 64 hex digits: checked above */
            return HK_OK;
        }
    }
    out_commit[0] = '\0';
    return hk__fail(HK_ERR_REVISION_NOT_FOUND, "revision '%s' not found", rev);
}

int srv_store_resolve_rev_kept(char out_commit[65], srv_store *s, const char *repo_dir, const char *rev) {
    bool hex = is_lower_hex(rev, 40) || is_lower_hex(rev, 64);
    if (hex && srv_snap_commit_kept(s->snaps, repo_dir, rev)) {
        memcpy(out_commit, rev, strlen(rev) + 1);
        return HK_OK;
    }
    int rc = srv_store_resolve_rev(out_commit, repo_dir, rev);
    if (rc == HK_OK && hex && strcmp(out_commit, rev) == 0) srv_snap_commit_prove(s->snaps, repo_dir, rev);
    return rc;
}

/* Content hash for a blob whose name is not an etag, memoised by identity and mtime. */
static int etag_by_content(srv_store *s, char etag[65], bool *lfs, const char *real, const struct stat *st) {
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_memo; i++) {
        hash_memo *m = &s->memo[i];
        if (m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
            m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec) {
            memcpy(etag, m->etag, 65);
            *lfs = m->lfs;
            pthread_mutex_unlock(&s->mu);
            return HK_OK;
        }
    }
    pthread_mutex_unlock(&s->mu);
    uint64_t size = 0;
    int rc = srv_classify_file(etag, lfs, &size, real, s->lfs_threshold);
    if (rc) return rc;
    hk__log(HK_LOG_DEBUG, "hashed %s (its name is not an etag): %s", real, etag);
    pthread_mutex_lock(&s->mu);
    size_t slot;
    if (s->n_memo < HASH_CACHE_MAX) slot = s->n_memo++;
    else slot = s->next_evict++ % HASH_CACHE_MAX;
    hash_memo *m = &s->memo[slot];
    m->dev = st->st_dev;
    m->ino = st->st_ino;
    m->size = st->st_size;
    m->mtime = st->st_mtim;
    m->lfs = *lfs;
    memcpy(m->etag, etag, 65);
    pthread_mutex_unlock(&s->mu);
    return HK_OK;
}

/* Resolve snapshot entry `full` (absolute path inside snapshots/<commit>/) to a regular file that
 * lies in the repo's blobs/ or in that snapshot itself; fill etag/lfs/size and the real path. */
static int resolve_entry(srv_store *s, char real[PATH_MAX], struct stat *st, char etag[65], bool *lfs,
                         const char *repo_dir, const char *commit, const char *full, bool warn) {
    if (!realpath(full, real)) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "no such file");
    char repo_real[PATH_MAX];
    if (!realpath(repo_dir, repo_real)) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "no such repo");
    /* the two folders an entry may resolve into, '/'-terminated for the prefix test */
    char *bdir = hk_cache_repo_part(repo_real, "blobs"), *sdir = hk_cache_snapshot_path(repo_real, commit, NULL);
    char *blobs = bdir ? hk__asprintf("%s/", bdir) : NULL, *snap = sdir ? hk__asprintf("%s/", sdir) : NULL;
    hk_free(bdir);
    hk_free(sdir);
    if (!blobs || !snap) {
        free(blobs);
        free(snap);
        return hk_last_error_code() ? hk_last_error_code() : hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    bool in_blobs = hk__str_starts_with(real, blobs) && !strchr(real + strlen(blobs), '/');
    bool in_snap = hk__str_starts_with(real, snap);
    free(blobs);
    free(snap);
    if (!in_blobs && !in_snap) {
        hk__log(warn ? HK_LOG_WARN : HK_LOG_DEBUG, "refusing %s: it leads out of the repo folder (to %s)", full, real);
        return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "no such file");
    }
    if (stat(real, st) != 0 || !S_ISREG(st->st_mode)) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "not a file");
    const char *base = strrchr(real, '/') + 1;
    if (in_blobs && (is_lower_hex(base, 40) || is_lower_hex(base, 64))) {
        snprintf(etag, 65, "%s", base);
        *lfs = strlen(base) == 64;
        return HK_OK;
    }
    return etag_by_content(s, etag, lfs, real, st);
}

int srv_store_open_file(srv_sfile *out, srv_store *s, const char *repo_dir, const char *commit, const char *path) {
    return srv_store_open_file_proved(out, NULL, s, repo_dir, commit, path);
}

bool srv_store_file_unchanged(srv_store *s, const char *repo_dir, const char *commit, const char *path,
                              const char *etag, const srv_file_proof *proof) {
    return proof->ok && hk__path_is_safe_relative(path) &&
           srv_store_linked_unchanged(s->snaps, repo_dir, commit, path, etag, proof);
}

int srv_store_open_file_proved(srv_sfile *out, srv_file_proof *proof, srv_store *s, const char *repo_dir,
                               const char *commit, const char *path) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (proof) memset(proof, 0, sizeof *proof); /* the general resolution below proves nothing */
    if (!hk__path_is_safe_relative(path)) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "invalid path");
    if (srv_store_open_linked(out, proof, s->snaps, repo_dir, commit, path)) return HK_OK; /* no realpath() */
    out->fd = -1;
    char *full = hk_cache_snapshot_path(repo_dir, commit, path);
    if (!full) return hk_last_error_code() == HK_ERR_NOMEM ? HK_ERR_NOMEM : hk__fail(HK_ERR_ENTRY_NOT_FOUND, "invalid path");
    char real[PATH_MAX];
    struct stat st;
    int rc = resolve_entry(s, real, &st, out->etag, &out->lfs, repo_dir, commit, full, true);
    free(full);
    if (rc) return rc;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "cannot open: %s", strerror(errno));
    struct stat st2;
    if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
        close(fd);
        return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "file changed while opening");
    }
    out->fd = fd;
    out->size = (uint64_t)st2.st_size;
    return HK_OK;
}

int srv_store_open_blob(srv_sfile *out, srv_store *s, const char *repo_dir, const char *sha256) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (!is_lower_hex(sha256, 64)) return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "not a sha256");
    char *p = hk_cache_blob_path(repo_dir, sha256);
    if (!p) return hk_last_error_code();
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(p);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "no such blob");
    }
    out->fd = fd;
    out->size = (uint64_t)st.st_size;
    out->lfs = true;
    snprintf(out->etag, sizeof out->etag, "%s", sha256);
    (void)s;
    return HK_OK;
}

/* Names that are not UTF-8 cannot be put into the JSON the clients parse: such files are not listed
 * (a client could still not name them in a Hub URL). */
static bool utf8_valid(const char *s) { return hk__utf8_valid(s, strlen(s)); }

typedef struct walk_ctx {
    srv_listing *l;
    srv_store *s;
    const char *repo_dir;
    const char *commit;
    bool blobs_is_dir; /* <repo>/blobs is a real directory: links into it can be trusted by name */
} walk_ctx;

/* The common case, without realpath(): a link whose target is exactly "../"×(depth+2) + "blobs/<etag>"
 * (what huggingface_hub and hubkern write) names the blob directly. */
static bool fast_blob(walk_ctx *w, const char *abs, const char *rel, struct stat *st, char etag[65]) {
    if (!w->blobs_is_dir) return false;
    char target[PATH_MAX];
    ssize_t n = readlink(abs, target, sizeof target - 1);
    if (n <= 0) return false;
    target[n] = '\0';
    size_t depth = 0;
    for (const char *p = rel; *p; p++) depth += *p == '/';
    const char *t = target;
    for (size_t i = 0; i < depth + 2; i++) {
        if (strncmp(t, "../", 3) != 0) return false;
        t += 3;
    }
    if (strncmp(t, "blobs/", 6) != 0) return false;
    t += 6;
    if (!is_lower_hex(t, 40) && !is_lower_hex(t, 64)) return false;
    char *blob = hk_cache_blob_path(w->repo_dir, t);
    bool ok = blob && lstat(blob, st) == 0 && S_ISREG(st->st_mode);
    if (!blob) hk_clear_error();
    hk_free(blob);
    if (ok) snprintf(etag, 65, "%s", t);
    return ok;
}

/* ABS/NAME and REL/NAME (NAME alone when REL is ""), for the directory walks below; on failure
 * both are NULL and HK_ERR_NOMEM is returned. */
static int child_paths(char **abs_out, char **rel_out, const char *abs, const char *rel, const char *name) {
    *abs_out = hk__path_join(abs, name);
    *rel_out = *rel ? hk__asprintf("%s/%s", rel, name) : hk__strdup(name);
    if (*abs_out && *rel_out) return HK_OK;
    free(*abs_out);
    free(*rel_out);
    *abs_out = *rel_out = NULL;
    return hk__fail(HK_ERR_NOMEM, "out of memory");
}

static int walk(walk_ctx *w, const char *abs, const char *rel, int depth) {
    if (depth > 64) return HK_OK;
    DIR *d = opendir(abs);
    if (!d) return hk__fail(hk__errno_code(errno), "cannot list %s: %s", abs, strerror(errno));
    int rc = HK_OK;
    struct dirent *de;
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        char *child_abs, *child_rel;
        rc = child_paths(&child_abs, &child_rel, abs, rel, name);
        if (rc) break;
        struct stat lst;
        if (lstat(child_abs, &lst) != 0 || !hk__path_is_safe_relative(child_rel) || !utf8_valid(name)) {
            /* vanished, or a name no client could ask for */
        } else if (S_ISDIR(lst.st_mode)) {
            rc = walk(w, child_abs, child_rel, depth + 1);
        } else if (S_ISLNK(lst.st_mode) || S_ISREG(lst.st_mode)) {
            char real[PATH_MAX];
            struct stat st;
            char etag[65];
            bool lfs = false, found = false;
            if (S_ISLNK(lst.st_mode) && fast_blob(w, child_abs, child_rel, &st, etag)) {
                lfs = strlen(etag) == 64;
                found = true;
            } else if (resolve_entry(w->s, real, &st, etag, &lfs, w->repo_dir, w->commit, child_abs, false) == HK_OK) {
                found = true;
            } else {
                hk_clear_error();
            }
            if (found) {
                rc = srv_listing_add_file(w->l, child_rel, (uint64_t)st.st_size, etag, lfs);
                if (rc == HK_OK) child_rel = NULL; /* owned by the listing */
            }
        }
        free(child_abs);
        free(child_rel);
    }
    closedir(d);
    return rc;
}

int srv_store_list(srv_listing *out, srv_store *s, const char *repo_dir, const char *commit) {
    memset(out, 0, sizeof *out);
    char *snap = hk_cache_snapshot_path(repo_dir, commit, NULL);
    char *blobs = snap ? hk_cache_repo_part(repo_dir, "blobs") : NULL;
    if (!snap || !blobs) {
        free(snap);
        free(blobs);
        return hk_last_error_code() ? hk_last_error_code() : hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    int rc = HK_OK;
    struct stat st;
    walk_ctx w = {.l = out, .s = s, .repo_dir = repo_dir, .commit = commit};
    w.blobs_is_dir = lstat(blobs, &st) == 0 && S_ISDIR(st.st_mode);
    /* a commit fetched from upstream lists what upstream promised (manifest.c), fetched or not */
    if (srv_manifest_exists(s->root, repo_dir, commit)) rc = srv_manifest_read(out, s->root, repo_dir, commit);
    else if (lstat(snap, &st) == 0 && S_ISDIR(st.st_mode)) rc = walk(&w, snap, "", 0);
    free(snap);
    free(blobs);
    if (rc == HK_OK) rc = srv_listing_finish(out);
    if (rc) srv_listing_free(out);
    return rc;
}

bool srv_store_has_namespace(const srv_store *s, const char *org) {
    if (!hk_repo_id_valid(org)) return false;
    DIR *d = opendir(s->root);
    if (!d) return false;
    bool found = false;
    struct dirent *de;
    for (int t = 0; t < 4 && !found; t++) {
        char *prefix = hk__asprintf("%s--%s--", hk_repo_type_plural((hk_repo_type)t), org);
        if (!prefix) break;
        rewinddir(d);
        while (!found && (de = readdir(d)) != NULL)
            if (hk__str_starts_with(de->d_name, prefix) && !strstr(de->d_name + strlen(prefix), "--")) found = true;
        free(prefix);
    }
    closedir(d);
    return found;
}

static long ms_since(uint64_t at_ms) { return (long)(hk__now_ms() - at_ms); }

int srv_store_list_shared(const srv_listing **out, srv_store *s, const char *repo_dir, const char *commit) {
    *out = NULL;
    char *key = hk__concat(repo_dir, "\n", commit, (char *)NULL);
    if (!key) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < LISTING_CACHE_MAX; i++) {
        cached_listing *c = s->lcache[i];
        if (!c || strcmp(c->key, key) != 0) continue;
        if (ms_since(c->at_ms) > listing_ttl_ms) {
            s->lcache[i] = NULL;
            cached_unref(c);
            continue;
        }
        c->refs++;
        *out = &c->l;
        pthread_mutex_unlock(&s->mu);
        free(key);
        return HK_OK;
    }
    pthread_mutex_unlock(&s->mu);
    cached_listing *c = calloc(1, sizeof *c);
    if (!c) {
        free(key);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    int rc = srv_store_list(&c->l, s, repo_dir, commit);
    if (rc) {
        free(c);
        free(key);
        return rc;
    }
    c->key = key;
    c->refs = 2;
    static _Atomic uint64_t gens; /* what answers kept from this listing are keyed on (http_api.c) */
    c->l.gen = atomic_fetch_add(&gens, 1) + 1;
    c->at_ms = hk__now_ms();
    pthread_mutex_lock(&s->mu);
    size_t slot = 0;
    for (size_t i = 0; i < LISTING_CACHE_MAX; i++) {
        if (!s->lcache[i]) {
            slot = i;
            break;
        }
        if (ms_since(s->lcache[i]->at_ms) > ms_since(s->lcache[slot]->at_ms)) slot = i; /* oldest */
    }
    if (s->lcache[slot]) cached_unref(s->lcache[slot]);
    s->lcache[slot] = c;
    /* bound the memory kept: drop the oldest listings past the entry budget, but never the new one:
     * a listing over the budget by itself, dropped at once, was built again for each of its pages
     * (a 100k-file tree in 101 pages: 101 walks of the snapshot, 114 s of CPU instead of ~1 s) */
    for (;;) {
        size_t total = 0, oldest = LISTING_CACHE_MAX;
        for (size_t i = 0; i < LISTING_CACHE_MAX; i++) {
            if (!s->lcache[i]) continue;
            total += s->lcache[i]->l.n;
            if (i != slot && (oldest == LISTING_CACHE_MAX || ms_since(s->lcache[i]->at_ms) > ms_since(s->lcache[oldest]->at_ms)))
                oldest = i;
        }
        if (total <= LISTING_CACHE_ENTRIES || oldest == LISTING_CACHE_MAX) break; /* (the new one alone) */
        cached_unref(s->lcache[oldest]);
        s->lcache[oldest] = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    *out = &c->l;
    return HK_OK;
}

void srv_store_list_release(srv_store *s, const srv_listing *l) {
    if (!l) return;
    cached_listing *c = (cached_listing *)(void *)((char *)(uintptr_t)l - offsetof(cached_listing, l));
    pthread_mutex_lock(&s->mu);
    cached_unref(c);
    pthread_mutex_unlock(&s->mu);
}

void srv_store_forget_listing(srv_store *s, const char *repo_dir, const char *commit) {
    char *key = hk__concat(repo_dir, "\n", commit, (char *)NULL);
    if (!key) return;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < LISTING_CACHE_MAX; i++)
        if (s->lcache[i] && strcmp(s->lcache[i]->key, key) == 0) {
            cached_unref(s->lcache[i]); /* callers holding it keep their reference */
            s->lcache[i] = NULL;
        }
    pthread_mutex_unlock(&s->mu);
    free(key);
}

#ifdef HK_TEST_HOOKS
void srv_store_test_hooks(unsigned listing_ttl) { listing_ttl_ms = (long)listing_ttl; }
#endif
