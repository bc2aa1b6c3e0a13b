/* hubkern publish: record a directory as a commit on a branch of a repo in a huggingface_hub-layout
 * store, the way the Hub would hold it (see docs/serve.md, "Publishing"):
 *  - each file becomes blobs/<etag>: its git blob sha1 when it is text and smaller than the LFS
 *    threshold, else (binary: a NUL byte in the first 8000 bytes, git's rule; or large) its sha256;
 *  - the commit id is a real git commit object id over the git tree of those blobs (LFS files enter
 *    the tree as their pointer blobs), the parent (the branch's previous head) and the message, with
 *    a fixed author and time, so the same tree on the same parent always gets the same id;
 *  - the branch ref moves atomically under .locks/<repo folder>/publish.lock;
 *  - when the tree equals the tree of the branch's head nothing is written.
 * __pycache__ directories, *.pyc files and .git directories are skipped; symlinks are followed only
 * when they stay inside the source directory. */
#define _GNU_SOURCE /* syncfs */
#include "server/srv_internal.h"
#include "util/vec.h"

/* The store is written through hubkern/sys/cache.h (refs, snapshot links, CACHEDIR.TAG, paths);
 * a file's blob name and its hashing are in blob_name.c. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- collecting the source tree ------------------------------------------------------------ */
typedef struct src_file {
    char *rel;
    char *abs;
} src_file;

typedef struct src_list {
    src_file *v;
    size_t n, cap;
} src_list;

static void src_list_free(src_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].rel);
        free(l->v[i].abs);
    }
    free(l->v);
}

static int src_add(src_list *l, const char *rel, const char *abs) {
    int rc = HK_VEC_RESERVE(l->v, l->cap, l->n + 1);
    if (rc) return rc;
    src_file *f = &l->v[l->n];
    f->rel = hk__strdup(rel);
    f->abs = hk__strdup(abs);
    if (!f->rel || !f->abs) {
        free(f->rel);
        free(f->abs);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    l->n++;
    return HK_OK;
}

static bool skipped_name(const char *name, bool is_dir) {
    if (is_dir) return strcmp(name, "__pycache__") == 0 || strcmp(name, ".git") == 0;
    return hk__str_ends_with(name, ".pyc");
}

static int collect(src_list *out, const char *src_real, const char *abs, const char *rel, int depth) {
    if (depth > 32)
        return hk__fail(HK_ERR_INVALID_ARG, "%s is nested more than 32 levels deep (a symlink loop?)", abs);
    DIR *d = opendir(abs);
    if (!d) return hk__fail(hk__errno_code(errno), "cannot list %s: %s", abs, strerror(errno));
    int rc = HK_OK;
    struct dirent *de;
    size_t src_len = strlen(src_real);
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        char *child = hk__path_join(abs, name);
        char *crel = *rel ? hk__asprintf("%s/%s", rel, name) : hk__strdup(name);
        if (!child || !crel) {
            free(child);
            free(crel);
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        struct stat st;
        char real[PATH_MAX];
        if (lstat(child, &st) != 0) {
            rc = hk__fail(hk__errno_code(errno), "cannot stat %s: %s", child, strerror(errno));
        } else if (!hk__path_is_safe_relative(crel)) {
            rc = hk__fail(HK_ERR_UNSAFE_PATH, "%s has a name the Hub cannot hold (control character or backslash); rename it",
                         child);
        } else if (S_ISLNK(st.st_mode)) {
            if (!realpath(child, real)) {
                rc = hk__fail(HK_ERR_NOT_FOUND, "%s is a broken symlink; remove it or point it at a file inside %s", child,
                             src_real);
            } else if (strncmp(real, src_real, src_len) != 0 || real[src_len] != '/') {
                rc = hk__fail(HK_ERR_UNSAFE_PATH,
                             "%s is a symlink to %s, outside %s; copy the file in instead of linking it", child, real,
                             src_real);
            } else if (stat(real, &st) != 0) {
                rc = hk__fail(hk__errno_code(errno), "cannot stat %s: %s", real, strerror(errno));
            } else if (S_ISDIR(st.st_mode)) {
                if (!skipped_name(name, true)) rc = collect(out, src_real, real, crel, depth + 1);
            } else if (S_ISREG(st.st_mode)) {
                if (!skipped_name(name, false)) rc = src_add(out, crel, real);
            } else {
                rc = hk__fail(HK_ERR_INVALID_ARG, "%s is not a regular file or directory", child);
            }
        } else if (S_ISDIR(st.st_mode)) {
            if (!skipped_name(name, true)) rc = collect(out, src_real, child, crel, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (!skipped_name(name, false)) rc = src_add(out, crel, child);
        } else {
            rc = hk__fail(HK_ERR_INVALID_ARG, "%s is not a regular file or directory (sockets, fifos and devices cannot be published)",
                         child);
        }
        free(child);
        free(crel);
    }
    closedir(d);
    return rc;
}

/* ---- writing -------------------------------------------------------------------------------- */
static int store_blob(const char *repo_dir, const char *abs, const char *etag, bool lfs, uint64_t size,
                      uint64_t lfs_threshold) {
    char *blob = hk_cache_blob_path(repo_dir, etag);
    if (!blob) return hk_last_error_code();
    struct stat st;
    if (stat(blob, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
        free(blob);
        return HK_OK; /* content-addressed: already there */
    }
    char rnd[9];
    hk__random_hex8(rnd);
    char *tmp = hk__asprintf("%s.%s.incomplete", blob, rnd);
    if (!tmp) {
        free(blob);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    int rc = HK_OK;
    int in = open(abs, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (in < 0) rc = hk__fail(hk__errno_code(errno), "cannot open %s: %s", abs, strerror(errno));
    else if (out < 0) rc = hk__fail(hk__errno_code(errno), "cannot create %s: %s", tmp, strerror(errno));
    if (rc == HK_OK) {
        char got[65];
        bool got_lfs;
        uint64_t got_size;
        rc = srv_hash_stream(got, &got_lfs, &got_size, in, abs, lfs_threshold, lfs ? 1 : 0, out);
        if (rc == HK_OK && strcmp(got, etag) != 0)
            rc = hk__fail(HK_ERR_INTEGRITY, "%s changed while being published; publish it again when it is stable", abs);
    }
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0 && rc == HK_OK)
        rc = hk__fail(hk__errno_code(errno), "cannot write %s: %s", tmp, strerror(errno));
    if (rc == HK_OK && rename(tmp, blob) != 0) rc = hk__fail(hk__errno_code(errno), "cannot rename into %s: %s", blob, strerror(errno));
    if (rc && out >= 0) unlink(tmp);
    free(tmp);
    free(blob);
    return rc;
}

/* snapshots/<commit>/<path> → blobs/<etag>. Files come sorted, so the parent directory is created
 * once per directory; an existing entry is replaced through hk_cache_link_snapshot. */
static int link_file(char **last_dir, const char *repo_dir, const char *commit, const char *path, const char *etag) {
    char *ptr = hk_cache_snapshot_path(repo_dir, commit, path);
    char *blob = ptr ? hk_cache_blob_path(repo_dir, etag) : NULL;
    char *dir = blob ? hk__strdup(ptr) : NULL;
    int rc = !blob ? hk_last_error_code() : !dir ? hk__fail(HK_ERR_NOMEM, "out of memory") : HK_OK;
    char *target = NULL;
    if (rc == HK_OK) {
        *strrchr(dir, '/') = '\0';
        if (!*last_dir || strcmp(*last_dir, dir) != 0) {
            rc = hk__mkdirs(dir, 0777);
            free(*last_dir);
            *last_dir = rc == HK_OK ? hk__strdup(dir) : NULL;
        }
    }
    if (rc == HK_OK && !(target = hk__relpath(blob, dir))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK && symlink(target, ptr) != 0) {
        if (errno == EEXIST) rc = hk_cache_link_snapshot(repo_dir, commit, path, etag);
        else rc = hk__fail(hk__errno_code(errno), "cannot create link %s: %s", ptr, strerror(errno));
    }
    free(target);
    free(ptr);
    free(blob);
    free(dir);
    return rc;
}

static int lock_repo(int *out_fd, const char *root, const char *repo_dir) {
    *out_fd = -1;
    const char *folder = strrchr(repo_dir, '/') + 1;
    char *dir = hk__asprintf("%s/.locks/%s", root, folder);
    char *path = dir ? hk__asprintf("%s/publish.lock", dir) : NULL;
    int rc = (!dir || !path) ? hk__fail(HK_ERR_NOMEM, "out of memory") : hk__mkdirs(dir, 0777);
    int fd = -1;
    if (rc == HK_OK) {
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0664);
        if (fd < 0) rc = hk__fail(HK_ERR_LOCK, "cannot open the lock %s: %s", path, strerror(errno));
    }
    if (rc == HK_OK) {
        (void)fchmod(fd, 0664);
        while (flock(fd, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            rc = hk__fail(HK_ERR_LOCK, "cannot lock %s: %s", path, strerror(errno));
            break;
        }
    }
    if (rc && fd >= 0) close(fd);
    else *out_fd = fd;
    free(dir);
    free(path);
    return rc;
}

static bool branch_name_valid(const char *b) {
    if (!b || !*b || strlen(b) > 200 || !hk__path_is_safe_relative(b)) return false;
    size_t n = strlen(b);
    if ((n == 40 || n == 64) && hk__is_hex(b, n)) return false; /* would read as a commit id */
    if (hk__str_starts_with(b, "refs/") || hk__str_ends_with(b, ".lock") || hk__str_ends_with(b, ".tmp")) return false;
    for (const char *p = b; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == '/'))
            return false;
    }
    return true;
}

/* One piece: the publish sequence runs under one repo lock taken in the middle of it (hash, lock,
 * compare with the head, write blobs and links, flush, move the ref), and its error paths release
 * what the earlier steps took; the steps that stand alone are functions (collect, store_blob,
 * link_file). */
int srv_publish(srv_publish_result *out, const srv_publish_options *o) {
    memset(out, 0, sizeof *out);
    if (!o || !o->src_dir || !o->repo_id || !o->branch)
        return hk__fail(HK_ERR_INVALID_ARG, "publish needs a source directory, a repo id and a branch");
    if (!hk_repo_id_valid(o->repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a valid repo id (use org/name with letters, digits, '-', '_', '.')",
                       o->repo_id);
    if (!branch_name_valid(o->branch))
        return hk__fail(HK_ERR_INVALID_ARG,
                       "'%s' is not a usable branch name (letters, digits, '-', '_', '.', '/'; not a commit id)", o->branch);
    uint64_t threshold = o->lfs_threshold ? o->lfs_threshold : HK_LFS_THRESHOLD_DEFAULT;
    char src_real[PATH_MAX];
    if (!realpath(o->src_dir, src_real) || !hk__is_dir(src_real))
        return hk__fail(HK_ERR_NOT_FOUND, "source directory %s does not exist", o->src_dir);
    char *message = o->message && *o->message ? hk__strdup(o->message) : hk__asprintf("Publish %s", o->branch);
    char *root = NULL, *repo_dir = NULL;
    src_list files = {0};
    srv_listing l = {0}, parent_l = {0};
    int lock_fd = -1;
    int rc = message ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = collect(&files, src_real, src_real, "", 0);
    if (rc == HK_OK && files.n == 0) rc = hk__fail(HK_ERR_INVALID_ARG, "%s holds no files to publish", o->src_dir);

    /* 1. hash every file (read-only) and build the tree */
    char **abs_of = NULL; /* listing index → source path, filled after sorting */
    for (size_t i = 0; rc == HK_OK && i < files.n; i++) {
        char etag[65];
        bool lfs;
        uint64_t size;
        rc = srv_classify_file(etag, &lfs, &size, files.v[i].abs, threshold);
        if (rc) break;
        char *rel = hk__strdup(files.v[i].rel);
        if (!rel) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else if ((rc = srv_listing_add_file(&l, rel, size, etag, lfs)) != HK_OK) free(rel);
    }
    if (rc == HK_OK) rc = srv_listing_finish(&l);

    /* 2. under the repo lock: compare with the branch head, write blobs, snapshot, ref */
    if (rc == HK_OK) rc = hk_cache_root(&root, o->cache_dir, o->repo_type);
    if (rc == HK_OK) rc = hk_cache_ensure_tag(root);
    if (rc == HK_OK) { /* now that it exists, make the root absolute and symlink-free */
        char *again = NULL;
        rc = hk_cache_root(&again, root, o->repo_type);
        free(root);
        root = again;
    }
    if (rc == HK_OK && !(repo_dir = hk_cache_repo_dir(root, o->repo_type, o->repo_id)))
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) {
        char *blobs = hk__path_join(repo_dir, "blobs");
        char *refs = hk__path_join(repo_dir, "refs");
        char *snaps = hk__path_join(repo_dir, "snapshots");
        if (!blobs || !refs || !snaps) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK) rc = hk__mkdirs(blobs, 0777);
        if (rc == HK_OK) rc = hk__mkdirs(refs, 0777);
        if (rc == HK_OK) rc = hk__mkdirs(snaps, 0777);
        free(blobs);
        free(refs);
        free(snaps);
    }
    if (rc == HK_OK) rc = lock_repo(&lock_fd, root, repo_dir);
    char parent[65] = "";
    if (rc == HK_OK) {
        char *ref = hk_cache_ref_path(repo_dir, o->branch);
        char *found = NULL;
        if (!ref) rc = hk_last_error_code();
        else if (hk__path_exists(ref) && (rc = hk_cache_resolve_ref(&found, repo_dir, o->branch)) == HK_OK)
            snprintf(parent, sizeof parent, "%s", found);
        hk_free(found);
        free(ref);
    }
    bool same = false;
    if (rc == HK_OK && parent[0]) {
        srv_store *st = NULL;
        rc = srv_store_open(&st, root, threshold);
        if (rc == HK_OK) rc = srv_store_list(&parent_l, st, repo_dir, parent);
        srv_store_close(st);
        if (rc == HK_OK) same = strcmp(parent_l.root_oid, l.root_oid) == 0;
    }
    if (rc == HK_OK) {
        snprintf(out->parent, sizeof out->parent, "%.40s", parent);
        for (size_t i = 0; i < l.n; i++) {
            if (l.v[i].is_dir) continue;
            out->files++;
            if (l.v[i].lfs) out->lfs_files++;
            out->bytes += l.v[i].size;
        }
    }
    if (rc == HK_OK && same) {
        snprintf(out->commit, sizeof out->commit, "%.40s", parent);
        out->changed = false;
        hk__log(HK_LOG_INFO, "%s@%s already holds this tree (%s); nothing to do", o->repo_id, o->branch, parent);
    } else if (rc == HK_OK) {
        char commit[41];
        char *last_dir = NULL;
        srv_git_commit_oid(commit, l.root_oid, parent, message);
        /* map listing entries back to their source files */
        abs_of = calloc(l.n ? l.n : 1, sizeof *abs_of);
        if (!abs_of) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; rc == HK_OK && i < files.n; i++) {
            long k = srv_listing_find(&l, files.v[i].rel);
            if (k >= 0) abs_of[k] = files.v[i].abs;
        }
        for (size_t i = 0; rc == HK_OK && i < l.n; i++) {
            if (l.v[i].is_dir) continue;
            if (!abs_of[i]) {
                rc = hk__fail(HK_ERR_INTERNAL, "lost track of %s", l.v[i].path);
                break;
            }
            rc = store_blob(repo_dir, abs_of[i], l.v[i].etag, l.v[i].lfs, l.v[i].size, threshold);
            if (rc == HK_OK) rc = link_file(&last_dir, repo_dir, commit, l.v[i].path, l.v[i].etag);
        }
        free(last_dir);
        if (rc == HK_OK) {
            /* One flush of the file system for every new blob and link (instead of an fsync per blob),
             * before the ref that makes them reachable is written. */
            char *blobs = hk__path_join(repo_dir, "blobs");
            int dfd = blobs ? open(blobs, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            if (dfd < 0 || syncfs(dfd) != 0)
                rc = hk__fail(hk__errno_code(errno), "cannot flush %s to disk: %s", blobs ? blobs : repo_dir, strerror(errno));
            if (dfd >= 0) close(dfd);
            free(blobs);
        }
        if (rc == HK_OK) rc = hk_cache_write_ref(repo_dir, o->branch, commit);
        if (rc == HK_OK) {
            snprintf(out->commit, sizeof out->commit, "%s", commit);
            out->changed = true;
            hk__log(HK_LOG_INFO, "published %s@%s: commit %s (parent %s), %zu files", o->repo_id, o->branch, commit,
                   parent[0] ? parent : "none", out->files);
        }
    }
    if (lock_fd >= 0) close(lock_fd); /* releases the flock; the lock file stays */
    free(abs_of);
    srv_listing_free(&l);
    srv_listing_free(&parent_l);
    src_list_free(&files);
    free(message);
    free(root);
    free(repo_dir);
    if (rc) hk__fail_context("publishing %s to %s@%s", o->src_dir, o->repo_id, o->branch);
    return rc;
}
