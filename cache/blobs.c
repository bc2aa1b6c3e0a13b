/* Blob store of the cache: per-blob locks (hub-protocol.md §7.2), unique temp files renamed into
 * place, and content checks of blobs against their names. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include "cache/cache_internal.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

char *hk__cache_filelock_path(const char *root, const char *repo_dir, const char *etag) {
    const char *folder = strrchr(repo_dir, '/');
    folder = folder ? folder + 1 : repo_dir;
    return hk__asprintf("%s/.locks/%s/%s.lock", root, folder, etag);
}

int hk__cache_filelock_try(int *out_fd, const char *lock_path) {
    *out_fd = -1;
    for (int tries = 0; tries < 20; tries++) {
        int fd;
        int rc = hk__open_creating_parent(&fd, lock_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0664);
        if (rc) return rc;
        if (fd < 0) {
            int e = errno;
            return hk__fail(e == ELOOP ? HK_ERR_LOCK : hk__errno_code(e), "cannot open lock %s: %s", lock_path,
                           strerror(e));
        }
        (void)fchmod(fd, 0664); /* so that other users of a shared cache can wait on it */
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK || e == EINTR) {
                close(fd);
                return HK_OK; /* busy */
            }
            if (e == ENOSYS || e == ENOTSUP || e == ENOLCK || e == EINVAL) {
                /* no flock here: temp file + atomic rename still keep the blob correct */
                hk__log(HK_LOG_DEBUG, "flock unsupported for %s (%s); continuing without a lock", lock_path, strerror(e));
                *out_fd = fd;
                return HK_OK;
            }
            close(fd);
            return hk__fail(HK_ERR_LOCK, "cannot lock %s: %s", lock_path, strerror(e));
        }
        /* the file we locked must still be the one at lock_path (someone may have replaced it) */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && a.st_nlink > 0 && stat(lock_path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            *out_fd = fd;
            return HK_OK;
        }
        flock(fd, LOCK_UN);
        close(fd);
    }
    return hk__fail(HK_ERR_LOCK, "lock file %s keeps being replaced; is another tool deleting it?", lock_path);
}

int hk__cache_filelock_wait(int *out_fd, const char *lock_path, long timeout_ms) {
    long waited = 0, next_log = 10000;
    for (;;) {
        int rc = hk__cache_filelock_try(out_fd, lock_path);
        if (rc || *out_fd >= 0) return rc;
        if (timeout_ms >= 0 && waited >= timeout_ms)
            return hk__fail(HK_ERR_LOCK, "timed out after %ld ms waiting for lock %s", waited, lock_path);
        if (waited >= next_log) {
            hk__log(HK_LOG_INFO, "still waiting for lock %s (another process is downloading)", lock_path);
            next_log += 10000;
        }
        usleep(100 * 1000);
        waited += 100;
    }
}

void hk__cache_filelock_release(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd); /* never unlink: a waiter may hold an fd to this inode */
}

/* ---- the small blobs' shared lock file ------------------------------------------------------ */
static char *rangelock_path(const char *root, const char *repo_dir) {
    return hk__cache_filelock_path(root, repo_dir, "hubkern-small-blobs");
}

/* The byte of etag: its first 15 hex digits (60 bits, within any off_t), else (no hex name) a hash
 * of it. Two blobs that share a byte only wait for each other. */
static off_t rangelock_offset(const char *etag) {
    uint64_t v = 0;
    size_t n = strlen(etag);
    size_t hex = strspn(etag, "0123456789abcdef");
    if (n >= 15 && hex >= 15) {
        for (size_t i = 0; i < 15; i++) {
            char ch = etag[i];
            v = v << 4 | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
        }
    } else {
        v = 1469598103934665603ull; /* FNV-1a */
        for (size_t i = 0; i < n; i++) v = (v ^ (unsigned char)etag[i]) * 1099511628211ull;
        v >>= 4;
    }
    return (off_t)v;
}

static struct flock rangelock_of(short type, const char *etag) {
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = rangelock_offset(etag);
    l.l_len = 1;
    return l;
}

void hk__cache_rangelock_open(int *out_fd, const char *root, const char *repo_dir) {
    *out_fd = -1;
#ifdef F_OFD_SETLK
    char *p = rangelock_path(root, repo_dir);
    int fd = -1;
    if (!p || hk__open_creating_parent(&fd, p, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0664) != HK_OK || fd < 0) {
        hk__log(HK_LOG_DEBUG, "no shared lock file for small blobs (%s); locking each blob", p ? p : "out of memory");
        hk_clear_error();
        free(p);
        return;
    }
    (void)fchmod(fd, 0664); /* so that other users of a shared cache can lock in it */
    struct flock probe = rangelock_of(F_WRLCK, "0");
    struct stat a, b;
    /* no OFD locks here (old kernel, some network file systems), or the path is not this file */
    if (fcntl(fd, F_OFD_GETLK, &probe) != 0 || fstat(fd, &a) != 0 || stat(p, &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
        hk__log(HK_LOG_DEBUG, "cannot use %s for blob locks (%s); locking each blob", p, strerror(errno));
        close(fd);
        free(p);
        return;
    }
    free(p);
    *out_fd = fd;
#else
    (void)root;
    (void)repo_dir;
#endif
}

int hk__cache_rangelock_try(bool *out_got, int fd, const char *etag) {
    *out_got = false;
#ifdef F_OFD_SETLK
    struct flock l = rangelock_of(F_WRLCK, etag);
    if (fcntl(fd, F_OFD_SETLK, &l) == 0) {
        *out_got = true;
        return HK_OK;
    }
    int e = errno;
    if (e == EAGAIN || e == EACCES || e == EINTR) return HK_OK; /* held elsewhere */
    return hk__fail(HK_ERR_LOCK, "cannot lock blob %s in the small-blob lock file: %s", etag, strerror(e));
#else
    (void)fd;
    return hk__fail(HK_ERR_LOCK, "cannot lock blob %s: no open-file-description locks on this system", etag);
#endif
}

void hk__cache_rangelock_release(int fd, const char *etag) {
#ifdef F_OFD_SETLK
    if (fd < 0) return;
    struct flock l = rangelock_of(F_UNLCK, etag);
    (void)fcntl(fd, F_OFD_SETLK, &l);
#else
    (void)fd;
    (void)etag;
#endif
}

bool hk__cache_rangelock_busy(const char *root, const char *repo_dir, const char *etag) {
    bool busy = false;
#ifdef F_OFD_SETLK
    char *p = rangelock_path(root, repo_dir);
    int fd = p ? open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd >= 0) {
        struct flock l = rangelock_of(F_WRLCK, etag);
        busy = fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
        close(fd);
    }
    free(p);
#else
    (void)root;
    (void)repo_dir;
    (void)etag;
#endif
    return busy;
}

int hk__cache_blob_tmp_open(int *out_fd, char **out_tmp, const char *repo_dir, const char *etag) {
    *out_fd = -1;
    *out_tmp = NULL;
    char *blobs = hk__path_join(repo_dir, "blobs");
    if (!blobs) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 8; i++) {
        char rnd[9];
        hk__random_hex8(rnd);
        char *tmp = hk__asprintf("%s/%s.%s.incomplete", blobs, etag, rnd);
        if (!tmp) {
            free(blobs);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        int fd;
        int rc = hk__open_creating_parent(&fd, tmp, O_WRONLY | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (rc) {
            free(tmp);
            free(blobs);
            return rc;
        }
        if (fd >= 0) {
            free(blobs);
            *out_fd = fd;
            *out_tmp = tmp;
            return HK_OK;
        }
        int e = errno;
        free(tmp);
        if (e != EEXIST) {
            free(blobs);
            return hk__fail(hk__errno_code(e), "cannot create a temp file in %s: %s", repo_dir, strerror(e));
        }
    }
    free(blobs);
    return hk__fail(HK_ERR_IO, "cannot create a unique temp file in %s/blobs", repo_dir);
}

int hk__cache_blob_commit(const char *tmp_path, const char *repo_dir, const char *etag) {
    char *blob = hk__asprintf("%s/blobs/%s", repo_dir, etag);
    if (!blob) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    if (rename(tmp_path, blob) != 0) {
        int e = errno;
        rc = hk__fail(hk__errno_code(e), "cannot move %s into place: %s", blob, strerror(e));
    }
    free(blob);
    return rc;
}

int hk__cache_blobs_durable(const char *repo_dir, const char *const *etags, size_t n) {
    int rc = HK_OK;
    char **paths = calloc(n + 1, sizeof *paths);
    if (!paths) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == HK_OK && i < n; i++)
        if (!(paths[i] = hk__asprintf("%s/blobs/%s", repo_dir, etags[i]))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    /* many small files: one syncfs of the cache's file system, when nothing much else is dirty
     * (bench/durable_pull_bench.md: 5x less flush time for 2000 files on an idle disk, 1.8x more
     * for 100 beside a 200 MB writer, hence the rule in util/durable.c) */
    bool synced = false;
    char *blobs0 = rc == HK_OK ? hk__path_join(repo_dir, "blobs") : NULL;
    if (rc == HK_OK && !blobs0) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__syncfs_if_cheap(&synced, blobs0, n);
    free(blobs0);
    if (rc == HK_OK && !synced) rc = hk__fdatasync_all((const char *const *)paths, n);
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
    char *blobs = rc == HK_OK ? hk__path_join(repo_dir, "blobs") : NULL;
    if (rc == HK_OK && !blobs) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__fsync_path(blobs);
    if (rc == HK_OK) rc = hk__fsync_path(repo_dir);
    free(blobs);
    return rc;
}

bool hk__cache_blob_present(const char *repo_dir, const char *etag, uint64_t size) {
    char *blob = hk__asprintf("%s/blobs/%s", repo_dir, etag);
    if (!blob) return false;
    struct stat st;
    bool ok = lstat(blob, &st) == 0 && S_ISREG(st.st_mode) && (size == UINT64_MAX || (uint64_t)st.st_size == size);
    free(blob);
    return ok;
}

bool hk__cache_pointer_ok(const char *repo_dir, const char *commit, const char *path, const char *etag) {
    char *ptr = hk__asprintf("%s/snapshots/%s/%s", repo_dir, commit, path);
    if (!ptr) return false;
    struct stat st;
    bool ok = false;
    char target[4096];
    ssize_t n = readlink(ptr, target, sizeof target - 1);
    if (n > 0) {
        target[n] = '\0';
        const char *base = strrchr(target, '/');
        base = base ? base + 1 : target;
        ok = strcmp(base, etag) == 0 && stat(ptr, &st) == 0 && S_ISREG(st.st_mode);
    }
    free(ptr);
    return ok;
}

int hk__cache_hash_blob(char out_hex[129], bool *out_checkable, const char *blob_path, const char *etag) {
    return hk__cache_hash_blob_at(out_hex, out_checkable, NULL, AT_FDCWD, blob_path, etag);
}

int hk__cache_hash_blob_at(char out_hex[129], bool *out_checkable, uint64_t *out_bytes, int dirfd, const char *blob_path,
                           const char *etag) {
    out_hex[0] = '\0';
    size_t n = strlen(etag);
    *out_checkable = (n == 64 || n == 40) && hk__is_hex(etag, n);
    if (!*out_checkable) return HK_OK;
    return hk__hash_file_hex_at(out_hex, 129, out_bytes, n == 64 ? HK_HASH_SHA256 : HK_HASH_GIT_BLOB, dirfd, blob_path);
}
