/* The common file request without realpath(): snapshots/<commit>/<path> walked one folder at a
 * time with openat(O_NOFOLLOW), the entry a symlink whose target is exactly "../"×(depth+2) +
 * "blobs/<etag>" (what huggingface_hub and hubkern write), and the blob opened from the repo's
 * blobs/ folder, itself opened with O_NOFOLLOW. No step follows a link the store did not write in
 * that shape, so no symlink can lead the request out of the repo; anything else (a regular file in
 * the snapshot, another link shape, a linked folder) is for store.c's realpath() checks.
 *
 * A commit's snapshot never changes, so its folder and the repo's blobs/ are opened once and kept
 * (a small LRU of handles, counted so that eviction never closes a descriptor in use): a request
 * is then one openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) of the entry itself (O_PATH: the link),
 * its readlink, and the blob's open, instead of opening and closing every folder (24 syscalls per
 * small-file request became 13; issue 25). A handle whose folder was removed (nlink 0: the repo
 * deleted or re-pulled) is dropped when a lookup through it fails, and the lookup redone. */
#define _GNU_SOURCE /* O_PATH: a descriptor of the link itself */
#include "server/srv_internal.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SNAP_CACHE_MAX 64

/* A folder kept open with its identity when it was checked. */
typedef struct seen_dir {
    int fd;
    dev_t dev;
    ino_t ino;
    struct timespec mtime, ctime;
} seen_dir;

typedef struct snap_handle {
    char *repo_dir;
    char commit[65];
    int snap, blobs; /* snapshots/<commit>/ and blobs/ (-1: the repo has none yet) */
    /* the proof that the commit names this snapshot and no ref (srv_snap_commit_prove): refs/ and
     * snapshots/ as they were when refs/<commit> was absent and snapshots/<commit> there (refs_dir
     * the repo folder itself when it had no refs/); fd -1: none. Read and replaced under the
     * cache's lock. */
    seen_dir refs_dir, snaps_dir;
    bool watched;       /* both folders of the proof are watched (store_watch.c) */
    uint64_t proof_gen; /* the watch generation the proof last passed its fstat()s at; 0: none */
    unsigned refs;   /* the cache's own reference counts while the handle is in a slot */
    uint64_t used;
} snap_handle;

struct srv_snap_cache {
    pthread_mutex_t mu;
    srv_watch *watch; /* NULL: every proof by its fstat()s */
    uint64_t tick;
    snap_handle *slot[SNAP_CACHE_MAX];
};

static void handle_close(snap_handle *h) {
    if (h->snap >= 0) close(h->snap);
    if (h->blobs >= 0) close(h->blobs);
    if (h->refs_dir.fd >= 0) close(h->refs_dir.fd);
    if (h->snaps_dir.fd >= 0) close(h->snaps_dir.fd);
    free(h->repo_dir);
    free(h);
}

static void unref_locked(snap_handle *h) {
    if (--h->refs == 0) handle_close(h);
}

int srv_snap_cache_new(srv_snap_cache **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    return HK_OK;
}

void srv_snap_cache_use_watch(srv_snap_cache *c, srv_watch *w) { c->watch = w; }

void srv_snap_cache_free(srv_snap_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < SNAP_CACHE_MAX; i++)
        if (c->slot[i]) unref_locked(c->slot[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* openat a folder without following a link in its last component; -1 when it is none. */
static int open_dir_at(int at, const char *name) {
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The blob name the link target points at: "../"×ups + "blobs/" + 40 or 64 hex; NULL otherwise. */
static const char *canonical_blob(const char *target, size_t ups) {
    for (size_t i = 0; i < ups; i++) {
        if (strncmp(target, "../", 3) != 0) return NULL;
        target += 3;
    }
    if (strncmp(target, "blobs/", 6) != 0) return NULL;
    target += 6;
    size_t n = strlen(target);
    return (n == 40 || n == 64) && hk__is_hex(target, n) ? target : NULL;
}

/* Walk the folders of rel (safe relative, checked by the caller) from the snapshot folder; *leaf
 * is rel's last component, *depth the folders walked. The fd of the entry's folder, or -1. */
static int walk_to_leaf(int snap_fd, const char *rel, const char **leaf, size_t *depth) {
    int dir = dup(snap_fd);
    *depth = 0;
    const char *p = rel;
    for (const char *slash; dir >= 0 && (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        char part[NAME_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n > NAME_MAX) {
            close(dir);
            return -1;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        int next = open_dir_at(dir, part);
        close(dir);
        dir = next;
        (*depth)++;
    }
    *leaf = p;
    return dir;
}

/* The handle of (repo_dir, commit), opened when not kept; NULL when the snapshot cannot be opened. */
static snap_handle *handle_get(srv_snap_cache *c, const char *repo_dir, const char *commit) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < SNAP_CACHE_MAX; i++) {
        snap_handle *h = c->slot[i];
        if (h && strcmp(h->commit, commit) == 0 && strcmp(h->repo_dir, repo_dir) == 0) {
            h->refs++;
            h->used = ++c->tick;
            pthread_mutex_unlock(&c->mu);
            return h;
        }
    }
    pthread_mutex_unlock(&c->mu);
    int repo = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the repo folder itself may be a link */
    int snaps = repo >= 0 ? open_dir_at(repo, "snapshots") : -1;
    int snap = snaps >= 0 ? open_dir_at(snaps, commit) : -1;
    int blobs = snap >= 0 ? open_dir_at(repo, "blobs") : -1;
    if (snaps >= 0) close(snaps);
    if (repo >= 0) close(repo);
    snap_handle *h = snap >= 0 ? calloc(1, sizeof *h) : NULL;
    if (h && !(h->repo_dir = hk__strdup(repo_dir))) {
        free(h);
        h = NULL;
    }
    if (!h) {
        if (snap >= 0) close(snap);
        if (blobs >= 0) close(blobs);
        return NULL;
    }
    memcpy(h->commit, commit, strlen(commit) + 1);
    h->snap = snap;
    h->blobs = blobs;
    h->refs_dir.fd = h->snaps_dir.fd = -1;
    h->refs = 2; /* the slot's and the caller's */
    pthread_mutex_lock(&c->mu);
    h->used = ++c->tick;
    size_t victim = 0;
    for (size_t i = 0; i < SNAP_CACHE_MAX; i++) {
        if (!c->slot[i]) {
            victim = i;
            break;
        }
        if (c->slot[i]->used < c->slot[victim]->used) victim = i;
    }
    if (c->slot[victim]) unref_locked(c->slot[victim]);
    c->slot[victim] = h;
    pthread_mutex_unlock(&c->mu);
    return h;
}

static void handle_put(srv_snap_cache *c, snap_handle *h, bool drop) {
    pthread_mutex_lock(&c->mu);
    unsigned drops = 1; /* the caller's reference, and the slot's when it is dropped */
    for (size_t i = 0; drop && i < SNAP_CACHE_MAX; i++)
        if (c->slot[i] == h) {
            c->slot[i] = NULL;
            drops++;
            break;
        }
    h->refs -= drops;
    if (h->refs == 0) handle_close(h);
    pthread_mutex_unlock(&c->mu);
}

static bool removed(int fd) {
    struct stat st;
    return fd < 0 || fstat(fd, &st) != 0 || st.st_nlink == 0;
}

/* The link at rel under the snapshot: its target in `target`, *depth the folders above it; the
 * link's own stat in *link_st when that is not NULL (*have_st says whether it was taken). */
static ssize_t read_entry_link(int snap, const char *rel, char *target, size_t cap, size_t *depth,
                               struct stat *link_st, bool *have_st) {
    *have_st = false;
    *depth = 0;
    for (const char *p = rel; *p; p++) *depth += *p == '/';
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, snap, rel, &how, sizeof how);
    if (fd >= 0) {
        ssize_t n = readlinkat(fd, "", target, cap); /* the O_PATH descriptor of the link itself */
        if (link_st && n > 0) *have_st = fstat(fd, link_st) == 0;
        close(fd);
        return n;
    }
    if (errno != ENOSYS) return -1;
    const char *leaf = NULL; /* a kernel before 5.6: one folder at a time */
    int dir = walk_to_leaf(snap, rel, &leaf, depth);
    ssize_t n = dir >= 0 ? readlinkat(dir, leaf, target, cap) : -1;
    if (link_st && n > 0) *have_st = fstatat(dir, leaf, link_st, AT_SYMLINK_NOFOLLOW) == 0;
    if (dir >= 0) close(dir);
    return n;
}

static long long ns_of(const struct timespec *t) { return (long long)t->tv_sec * 1000000000LL + t->tv_nsec; }

static void proof_fill(srv_file_proof *p, const struct stat *link, const struct stat *blob, long long now) {
    p->link_dev = (uint64_t)link->st_dev;
    p->link_ino = (uint64_t)link->st_ino;
    p->link_mtime = ns_of(&link->st_mtim);
    p->link_ctime = ns_of(&link->st_ctim);
    p->blob_dev = (uint64_t)blob->st_dev;
    p->blob_ino = (uint64_t)blob->st_ino;
    p->blob_size = (uint64_t)blob->st_size;
    p->blob_mtime = ns_of(&blob->st_mtim);
    p->blob_ctime = ns_of(&blob->st_ctim);
    p->ok = srv_refs_settled(link, now) && srv_refs_settled(blob, now);
}

bool srv_store_open_linked(srv_sfile *out, srv_file_proof *proof, srv_snap_cache *c, const char *repo_dir,
                           const char *commit, const char *rel) {
    size_t cl = strlen(commit);
    if (!((cl == 40 || cl == 64) && hk__is_hex(commit, cl))) return false; /* one folder name, never a path */
    /* the clock before the stats: a change after it is stamped later than what the proof keeps */
    long long now = proof ? srv_refs_clock_ns() : 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        snap_handle *h = handle_get(c, repo_dir, commit);
        if (!h) return false;
        char target[PATH_MAX];
        size_t depth = 0;
        struct stat lst;
        bool have_lst = false;
        ssize_t tn = read_entry_link(h->snap, rel, target, sizeof target - 1, &depth, proof ? &lst : NULL, &have_lst);
        const char *etag = NULL;
        if (tn > 0) {
            target[tn] = '\0';
            etag = canonical_blob(target, depth + 2);
        }
        int fd = etag && h->blobs >= 0 ? openat(h->blobs, etag, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            handle_put(c, h, false);
            out->fd = fd;
            out->size = (uint64_t)st.st_size;
            out->lfs = strlen(etag) == 64;
            memcpy(out->etag, etag, strlen(etag) + 1); /* 40 or 64 hex: fits */
            if (proof && have_lst) proof_fill(proof, &lst, &st, now);
            return true;
        }
        if (fd >= 0) close(fd);
        /* a kept folder that was removed since (or a blobs/ that did not exist then): open afresh */
        bool stale = removed(h->snap) || (etag && removed(h->blobs));
        handle_put(c, h, stale);
        if (!stale) return false;
    }
    return false;
}

static bool seen_same(const seen_dir *d, const struct stat *st) {
    return st->st_nlink > 0 && d->dev == st->st_dev && d->ino == st->st_ino &&
           d->mtime.tv_sec == st->st_mtim.tv_sec && d->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           d->ctime.tv_sec == st->st_ctim.tv_sec && d->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void seen_drop(seen_dir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

/* The proof is gone (or replaced): nothing proven at any generation. */
static void proof_drop(snap_handle *h) {
    seen_drop(&h->refs_dir);
    seen_drop(&h->snaps_dir);
    h->watched = false;
    h->proof_gen = 0;
}

/* The kept handle of (repo_dir, commit) without opening one; NULL when none is kept. */
static snap_handle *handle_find_locked(srv_snap_cache *c, const char *repo_dir, const char *commit) {
    for (size_t i = 0; i < SNAP_CACHE_MAX; i++) {
        snap_handle *h = c->slot[i];
        if (h && strcmp(h->commit, commit) == 0 && strcmp(h->repo_dir, repo_dir) == 0) {
            h->used = ++c->tick;
            return h;
        }
    }
    return NULL;
}

bool srv_snap_commit_kept(srv_snap_cache *c, const char *repo_dir, const char *commit) {
    pthread_mutex_lock(&c->mu); /* the fstat()s under the lock: the proof's descriptors stay open */
    snap_handle *h = handle_find_locked(c, repo_dir, commit);
    bool ok = false;
    /* drained before the fstat()s below: a change after it shows in them or moves the generation */
    uint64_t gen = h && h->watched ? srv_watch_gen(c->watch) : 0;
    if (h && h->refs_dir.fd >= 0 && gen && h->proof_gen == gen) {
        ok = true; /* neither folder changed since their fstat()s last passed */
    } else if (h && h->refs_dir.fd >= 0) {
        struct stat a, b;
        ok = fstat(h->refs_dir.fd, &a) == 0 && seen_same(&h->refs_dir, &a) && fstat(h->snaps_dir.fd, &b) == 0 &&
             seen_same(&h->snaps_dir, &b);
        if (ok) h->proof_gen = gen;
        else proof_drop(h); /* something changed in refs/ or snapshots/: the path lookup answers, and proves again */
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static int open_seen(seen_dir *d, int at, const char *name, long long now) {
    d->fd = open_dir_at(at, name);
    struct stat st;
    if (d->fd < 0 || fstat(d->fd, &st) != 0 || !srv_refs_settled(&st, now)) {
        seen_drop(d);
        return -1;
    }
    d->dev = st.st_dev;
    d->ino = st.st_ino;
    d->mtime = st.st_mtim;
    d->ctime = st.st_ctim;
    return 0;
}

void srv_snap_commit_prove(srv_snap_cache *c, const char *repo_dir, const char *commit) {
    size_t cl = strlen(commit);
    if (!((cl == 40 || cl == 64) && hk__is_hex(commit, cl))) return;
    snap_handle *h = handle_get(c, repo_dir, commit); /* opened now if not kept: the file request needs it */
    if (!h) return;
    /* the folders' stamps first, then their entries: a change after the stamps shows in them */
    long long now = srv_refs_clock_ns();
    int repo = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    seen_dir refs = {.fd = -1}, snaps = {.fd = -1};
    struct stat st, snap_st;
    bool ok = repo >= 0, have_refs = ok && open_seen(&refs, repo, "refs", now) == 0;
    /* no refs/ at all (a store an edge filled by commit only): the repo folder's own stamps stand in
     * for refs/'s, since making refs/ changes them */
    if (ok && !have_refs) ok = open_seen(&refs, repo, ".", now) == 0;
    ok = ok && open_seen(&snaps, repo, "snapshots", now) == 0 &&
         fstatat(have_refs ? refs.fd : repo, have_refs ? commit : "refs", &st, AT_SYMLINK_NOFOLLOW) != 0 &&
         errno == ENOENT && fstatat(snaps.fd, commit, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
         fstat(h->snap, &snap_st) == 0 && snap_st.st_ino == st.st_ino && snap_st.st_dev == st.st_dev;
    if (repo >= 0) close(repo);
    pthread_mutex_lock(&c->mu);
    if (ok && h->refs_dir.fd < 0) { /* else another request proved it first */
        h->refs_dir = refs;
        h->snaps_dir = snaps;
        refs.fd = snaps.fd = -1;
        /* watched before any check may pass on a generation (only srv_snap_commit_kept's fstat()s
         * stamp one), so that every change after such a check raises an event */
        h->watched = srv_watch_dir(c->watch, h->refs_dir.fd) && srv_watch_dir(c->watch, h->snaps_dir.fd);
        h->proof_gen = 0;
    }
    pthread_mutex_unlock(&c->mu);
    seen_drop(&refs);
    seen_drop(&snaps);
    handle_put(c, h, false);
}

bool srv_store_linked_unchanged(srv_snap_cache *c, const char *repo_dir, const char *commit, const char *rel,
                                const char *etag, const srv_file_proof *p) {
    size_t cl = strlen(commit);
    if (!((cl == 40 || cl == 64) && hk__is_hex(commit, cl))) return false;
    snap_handle *h = handle_get(c, repo_dir, commit);
    if (!h) return false;
    /* by name under the kept folders: an entry or blob replaced (rename: a new inode), rewritten in
     * place (new stamps) or removed fails; the same inode and stamps are the bytes the proof saw */
    struct stat a, b;
    bool same = h->blobs >= 0 && fstatat(h->snap, rel, &a, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(a.st_mode) &&
                (uint64_t)a.st_dev == p->link_dev && (uint64_t)a.st_ino == p->link_ino &&
                ns_of(&a.st_mtim) == p->link_mtime && ns_of(&a.st_ctim) == p->link_ctime &&
                fstatat(h->blobs, etag, &b, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(b.st_mode) &&
                (uint64_t)b.st_dev == p->blob_dev && (uint64_t)b.st_ino == p->blob_ino &&
                (uint64_t)b.st_size == p->blob_size && ns_of(&b.st_mtim) == p->blob_mtime &&
                ns_of(&b.st_ctim) == p->blob_ctime;
    handle_put(c, h, false);
    return same;
}
