/* Resumable partial downloads: one blobs/<etag>.incomplete per blob, reused by the next attempt
 * and the next process. Safety rests on the blob's lock; where a filesystem's flock does not
 * exclude (Lustre, GPFS, some NFS), two writers of the same blob write the same bytes at the same
 * offsets (never O_APPEND), a discard unlinks instead of truncating under the other writer, and
 * the content hash decides before the rename into blobs/. */
#include "cache/cache_internal.h"
#include "client/partial.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *partial_path(const char *repo_dir, const char *etag) {
    return hk__cache_blob_path(repo_dir, etag, ".incomplete");
}

/* The unique fallback: never resumed, never kept. */
static int open_unique(int *out_fd, char **out_path, bool *out_resumable, const char *repo_dir, const char *etag) {
    *out_resumable = false;
    return hk__cache_blob_tmp_open(out_fd, out_path, repo_dir, etag);
}

/* Create the deterministic name afresh (O_EXCL: a name that reappeared belongs to another writer). */
static int open_fresh(int *out_fd, char **out_path, bool *out_resumable, const char *repo_dir, const char *etag) {
    char *p = partial_path(repo_dir, etag);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) {
        free(p);
        return open_unique(out_fd, out_path, out_resumable, repo_dir, etag);
    }
    *out_fd = fd;
    *out_path = p;
    *out_resumable = true;
    return HK_OK;
}

int hk__partial_open(int *out_fd, char **out_path, uint64_t *out_kept, bool *out_resumable, const char *repo_dir,
                     const char *etag, uint64_t size) {
    *out_fd = -1;
    *out_path = NULL;
    *out_kept = 0;
    *out_resumable = false;
    char *p = partial_path(repo_dir, etag);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int fd;
    int rc = hk__open_creating_parent(&fd, p, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0666); /* blobs/ made if missing */
    if (rc) {
        free(p);
        return rc;
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        /* a symlink, a directory or an unreadable entry under that name: not ours to resume */
        hk__log(HK_LOG_DEBUG, "cannot use %s (%s); downloading to a unique temp file", p,
                fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        free(p);
        return open_unique(out_fd, out_path, out_resumable, repo_dir, etag);
    }
    uint64_t kept = (uint64_t)st.st_size;
    if (kept > size) {
        hk__log(HK_LOG_INFO, "discarding %s: it holds %llu bytes, more than the %llu of the blob", p,
                (unsigned long long)kept, (unsigned long long)size);
        close(fd);
        unlink(p);
        free(p);
        return open_fresh(out_fd, out_path, out_resumable, repo_dir, etag);
    }
    if (lseek(fd, (off_t)kept, SEEK_SET) < 0) {
        int e = errno;
        close(fd);
        rc = hk__fail(hk__errno_code(e), "cannot seek in %s: %s", p, strerror(e));
        free(p);
        return rc;
    }
    *out_fd = fd;
    *out_path = p;
    *out_kept = kept;
    *out_resumable = true;
    return HK_OK;
}

int hk__partial_rehash(hk_hasher *h, int fd, uint64_t kept, const char *path) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return hk__fail(HK_ERR_NOMEM, "out of memory");
    uint64_t off = 0;
    while (off < kept) {
        size_t want = kept - off < CHUNK ? (size_t)(kept - off) : CHUNK;
        ssize_t r = pread(fd, buf, want, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(buf);
            return hk__fail(hk__errno_code(e), "cannot read the kept part of %s: %s", path,
                            r < 0 ? strerror(e) : "it became shorter");
        }
        hk__hasher_update(h, buf, (size_t)r);
        off += (uint64_t)r;
    }
    free(buf);
    return HK_OK;
}

int hk__partial_discard(int *io_fd, char **io_path, bool *out_resumable, const char *repo_dir, const char *etag) {
    if (*io_fd >= 0) close(*io_fd);
    *io_fd = -1;
    if (*io_path) unlink(*io_path);
    free(*io_path);
    *io_path = NULL;
    return open_fresh(io_fd, io_path, out_resumable, repo_dir, etag);
}

int hk__partial_claim(bool *out_gone, int fd, char **io_path, const char *repo_dir, const char *etag) {
    *out_gone = false;
    char rnd[9];
    hk__random_hex8(rnd);
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".%s.incomplete", rnd);
    char *mine = hk__cache_blob_path(repo_dir, etag, suffix);
    if (!mine) return hk_last_error_code();
    if (rename(*io_path, mine) != 0) {
        int e = errno;
        free(mine);
        if (e == ENOENT) {
            *out_gone = true;
            return HK_OK;
        }
        return hk__fail(hk__errno_code(e), "cannot rename %s: %s", *io_path, strerror(e));
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || stat(mine, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        (void)rename(mine, *io_path); /* not ours: give it back */
        free(mine);
        return hk__fail(HK_ERR_LOCK, "another process replaced %s while this one downloaded it: the blob lock does "
                        "not exclude other writers on this filesystem (flock not enforced); pull again", *io_path);
    }
    free(*io_path);
    *io_path = mine;
    return HK_OK;
}

void hk__partial_forget(const char *repo_dir, const char *etag) {
    char *p = partial_path(repo_dir, etag);
    if (p && unlink(p) == 0) hk__log(HK_LOG_DEBUG, "removed %s: the blob is complete", p);
    free(p);
}
