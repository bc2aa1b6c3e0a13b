/* The store's refs, kept in memory and checked against the files on every use (issue 25).
 *
 * Resolving a branch was lstat + open + read + read + close of refs/<rev> per request, and the
 * refs listing a folder walk with two lstats and a read per ref. Both now keep what they read
 * with the identity of the files read (device, inode, size, mtime, ctime) and reuse it while one
 * lstat per file (and per folder, for the listing) still shows the same identity:
 *  - hubkern publish (this process or another) and hk_cache_write_ref move a new file into place
 *    by rename: a new inode;
 *  - huggingface_hub rewrites a ref in place: a new mtime and ctime;
 *  - a ref added or removed changes its folder's mtime (what the listing checks).
 * A file changed twice within one timestamp tick could keep its mtime, so an answer is kept only
 * when every file it came from was last changed more than RACY_NS before it was read (git's
 * "racy" rule): any later write is then stamped later than what was kept. Nothing here is timed
 * otherwise: a stale answer after a write is never given. */
#include "server/srv_internal.h"

#include "internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define REF_MEMO_MAX 1024 /* refs resolved by name */
#define VIEW_MAX 64       /* repos whose listing is kept */
#define RACY_NS 2000000000LL

static long long racy_ns = RACY_NS;
static unsigned long long ref_reads; /* ref files read (the memo's misses), for the tests */

typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} file_id;

typedef struct ref_memo {
    char *path; /* <repo>/refs/<rev> */
    file_id id;
    char commit[65];
} ref_memo;

typedef struct checked_path {
    char *path; /* a folder of refs/ or a ref file, as lstat'ed */
    file_id id;
} checked_path;

/* One repo's refs listing and every path it was read from. */
typedef struct ref_view {
    char *repo_dir;
    srv_ref *refs;
    size_t n;
    checked_path *paths;
    size_t n_paths;
    uint64_t used;
    uint64_t gen; /* unique to this reading of the refs: what an answer made from it is kept under */
} ref_view;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ref_memo memo[REF_MEMO_MAX];
static size_t memo_next;
static ref_view views[VIEW_MAX];
static uint64_t tick;
static uint64_t gen_next;

static void id_of(file_id *id, const struct stat *st) {
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->size = st->st_size;
    id->mtime = st->st_mtim;
    id->ctime = st->st_ctim;
}

static bool same_id(const file_id *a, const struct stat *st) {
    return a->dev == st->st_dev && a->ino == st->st_ino && a->size == st->st_size &&
           a->mtime.tv_sec == st->st_mtim.tv_sec && a->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           a->ctime.tv_sec == st->st_ctim.tv_sec && a->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static long long ns_of(const struct timespec *t) { return (long long)t->tv_sec * 1000000000LL + t->tv_nsec; }

/* Changed too recently (against `now`, taken before the read) for its stamp to tell a later write. */
static bool racy(const file_id *id, long long now) {
    long long m = ns_of(&id->mtime), c = ns_of(&id->ctime);
    return now - (m > c ? m : c) < racy_ns;
}

long long srv_refs_clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ns_of(&t);
}

bool srv_refs_settled(const struct stat *st, long long now) {
    file_id id;
    id_of(&id, st);
    return !racy(&id, now);
}

static long long now_ns(void) {
    return srv_refs_clock_ns();
}

/* refs/<rev> → commit through the cache layer's reader. */
static int read_ref(char out_commit[65], const char *repo_dir, const char *rev) {
    char *commit = NULL;
    out_commit[0] = '\0';
    __atomic_add_fetch(&ref_reads, 1, __ATOMIC_RELAXED);
    int rc = hk_cache_resolve_ref(&commit, repo_dir, rev);
    if (rc == HK_OK) snprintf(out_commit, 65, "%s", commit);
    hk_free(commit);
    return rc;
}

int srv_refs_resolve(char out_commit[65], const char *repo_dir, const char *rev, const char *ref_path) {
    out_commit[0] = '\0';
    struct stat st;
    if (lstat(ref_path, &st) != 0 || !S_ISREG(st.st_mode)) return hk__fail(HK_ERR_REVISION_NOT_FOUND, "no such ref");
    pthread_mutex_lock(&mu);
    bool hit = false;
    for (size_t i = 0; i < REF_MEMO_MAX && memo[i].path; i++) {
        if (strcmp(memo[i].path, ref_path) != 0) continue;
        hit = same_id(&memo[i].id, &st);
        if (hit) memcpy(out_commit, memo[i].commit, 65);
        break; /* changed: read again below, the slot replaced */
    }
    pthread_mutex_unlock(&mu); /* once: a changed entry used to unlock twice (TSan) */
    if (hit) return HK_OK;
    long long now = now_ns();
    int rc = read_ref(out_commit, repo_dir, rev);
    if (rc) return rc;
    file_id id;
    id_of(&id, &st);
    if (racy(&id, now)) return HK_OK; /* answered, not kept */
    char *path = hk__strdup(ref_path);
    if (!path) return HK_OK;
    pthread_mutex_lock(&mu);
    size_t slot = REF_MEMO_MAX;
    for (size_t i = 0; i < REF_MEMO_MAX && slot == REF_MEMO_MAX; i++)
        if (!memo[i].path || strcmp(memo[i].path, ref_path) == 0) slot = i;
    if (slot == REF_MEMO_MAX) slot = memo_next++ % REF_MEMO_MAX;
    free(memo[slot].path);
    memo[slot].path = path;
    memo[slot].id = id;
    memcpy(memo[slot].commit, out_commit, 65);
    pthread_mutex_unlock(&mu);
    return HK_OK;
}

typedef struct walk_out {
    srv_ref *v;
    size_t n, cap;
    checked_path *p;
    size_t n_p, cap_p;
} walk_out;

static int note_path(walk_out *w, const char *path, const struct stat *st) {
    int rc = hk__vec_reserve((void **)&w->p, &w->cap_p, w->n_p + 1, sizeof *w->p);
    char *copy = rc == HK_OK ? hk__strdup(path) : NULL;
    if (!copy) return hk__fail(HK_ERR_NOMEM, "out of memory");
    w->p[w->n_p].path = copy;
    id_of(&w->p[w->n_p].id, st);
    w->n_p++;
    return HK_OK;
}

static int walk(walk_out *w, const char *repo_dir, const char *abs, const char *rel, int depth) {
    if (depth > 8) return HK_OK;
    struct stat dst;
    if (lstat(abs, &dst) != 0 || !S_ISDIR(dst.st_mode)) return depth == 0 ? note_path(w, abs, &(struct stat){0}) : HK_OK;
    int rc = note_path(w, abs, &dst); /* before reading it: an entry added later changes its stamp */
    DIR *d = rc == HK_OK ? opendir(abs) : NULL;
    if (!d) return rc;
    struct dirent *de;
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.' || hk__str_ends_with(name, ".tmp") || hk__str_ends_with(name, ".lock")) continue;
        char *child_abs = hk__path_join(abs, name);
        char *child_rel = *rel ? hk__asprintf("%s/%s", rel, name) : hk__strdup(name);
        struct stat st;
        if (!child_abs || !child_rel) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        } else if (lstat(child_abs, &st) != 0) {
            /* vanished */
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(w, repo_dir, child_abs, child_rel, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            char commit[65];
            if (read_ref(commit, repo_dir, child_rel) == HK_OK) {
                rc = hk__vec_reserve((void **)&w->v, &w->cap, w->n + 1, sizeof *w->v);
                if (rc == HK_OK) rc = note_path(w, child_abs, &st);
                if (rc == HK_OK) {
                    w->v[w->n].name = child_rel;
                    memcpy(w->v[w->n].commit, commit, 65);
                    w->n++;
                    child_rel = NULL;
                }
            } else {
                hk_clear_error();
            }
        }
        free(child_abs);
        free(child_rel);
    }
    closedir(d);
    return rc;
}

static int ref_cmp(const void *a, const void *b) { return strcmp(((const srv_ref *)a)->name, ((const srv_ref *)b)->name); }

static void view_clear(ref_view *v) {
    free(v->repo_dir);
    srv_refs_free(v->refs, v->n);
    for (size_t i = 0; i < v->n_paths; i++) free(v->paths[i].path);
    free(v->paths);
    memset(v, 0, sizeof *v);
}

/* A copy of n refs (the caller's to free). */
static int copy_refs(srv_ref **out, const srv_ref *refs, size_t n) {
    *out = n ? calloc(n, sizeof **out) : NULL;
    if (n && !*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!((*out)[i].name = hk__strdup(refs[i].name))) {
            srv_refs_free(*out, i);
            *out = NULL;
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        memcpy((*out)[i].commit, refs[i].commit, 65);
    }
    return HK_OK;
}

/* Does every path the view was read from still show the identity it had? */
static bool view_current(const ref_view *v) {
    for (size_t i = 0; i < v->n_paths; i++) {
        struct stat st;
        bool absent = v->paths[i].id.ino == 0 && v->paths[i].id.dev == 0; /* refs/ was missing */
        if (lstat(v->paths[i].path, &st) != 0) {
            if (!absent) return false;
        } else if (absent || !same_id(&v->paths[i].id, &st)) {
            return false;
        }
    }
    return true;
}

uint64_t srv_store_refs_gen(const char *repo_dir) {
    uint64_t gen = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < VIEW_MAX; i++) {
        ref_view *v = &views[i];
        if (!v->repo_dir || strcmp(v->repo_dir, repo_dir) != 0) continue;
        if (view_current(v)) {
            v->used = ++tick;
            gen = v->gen;
        }
        break;
    }
    pthread_mutex_unlock(&mu);
    return gen;
}

int srv_store_list_refs(srv_ref **out, size_t *n, const char *repo_dir) {
    return srv_store_list_refs_gen(out, n, NULL, repo_dir);
}

int srv_store_list_refs_gen(srv_ref **out, size_t *n, uint64_t *gen, const char *repo_dir) {
    *out = NULL;
    *n = 0;
    if (gen) *gen = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < VIEW_MAX; i++) {
        ref_view *v = &views[i];
        if (!v->repo_dir || strcmp(v->repo_dir, repo_dir) != 0) continue;
        /* checked under the lock: a handful of lstats, and no two requests rebuild the same view */
        if (!view_current(v)) {
            view_clear(v);
            break;
        }
        v->used = ++tick;
        int rc = copy_refs(out, v->refs, v->n);
        if (rc == HK_OK) *n = v->n;
        if (rc == HK_OK && gen) *gen = v->gen;
        pthread_mutex_unlock(&mu);
        return rc;
    }
    pthread_mutex_unlock(&mu);
    long long now = now_ns();
    walk_out w = {0};
    char *refs = hk__path_join(repo_dir, "refs");
    int rc = refs ? walk(&w, repo_dir, refs, "", 0) : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(refs);
    if (rc == HK_OK && w.n) qsort(w.v, w.n, sizeof *w.v, ref_cmp);
    ref_view nv = {.refs = w.v, .n = w.n, .paths = w.p, .n_paths = w.n_p};
    bool keep = rc == HK_OK;
    for (size_t i = 0; keep && i < nv.n_paths; i++)
        if (nv.paths[i].id.ino != 0 && racy(&nv.paths[i].id, now)) keep = false;
    if (rc == HK_OK) rc = copy_refs(out, nv.refs, nv.n);
    if (rc == HK_OK) *n = nv.n;
    if (!keep || rc != HK_OK || !(nv.repo_dir = hk__strdup(repo_dir))) {
        view_clear(&nv);
        return rc;
    }
    pthread_mutex_lock(&mu);
    size_t slot = 0;
    for (size_t i = 0; i < VIEW_MAX; i++) {
        if (!views[i].repo_dir || strcmp(views[i].repo_dir, repo_dir) == 0) {
            slot = i;
            break;
        }
        if (views[i].used < views[slot].used) slot = i;
    }
    view_clear(&views[slot]);
    nv.used = ++tick;
    nv.gen = ++gen_next;
    if (gen) *gen = nv.gen;
    views[slot] = nv;
    pthread_mutex_unlock(&mu);
    return HK_OK;
}

void srv_refs_free(srv_ref *refs, size_t n) {
    for (size_t i = 0; i < n; i++) free(refs[i].name);
    free(refs);
}

#ifdef HK_TEST_HOOKS
void srv_refs_test_hooks(long long racy_window_ns, unsigned long long *reads) {
    if (racy_window_ns >= 0) racy_ns = racy_window_ns;
    if (reads) *reads = __atomic_load_n(&ref_reads, __ATOMIC_RELAXED);
}
#endif
