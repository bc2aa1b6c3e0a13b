/* The name of a file's blob in a Hub-layout store, as the Hub gives it: its git blob sha1 when it
 * is text and smaller than the LFS threshold, else (binary: a NUL byte in the first 8000 bytes,
 * git's rule; or large) its sha256. Used by the publisher (publish.c) and by the store when it
 * lists a snapshot (store.c), so that both name a file the same way. */
#include "server/srv_internal.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BINARY_PROBE 8000
#define IO_CHUNK (1u << 20)

/* Hash an open file: decide LFS from its first bytes and size, then stream the chosen digest.
 * If `copy_fd` >= 0 the bytes are also written there. */
int srv_hash_stream(char etag[65], bool *lfs, uint64_t *size, int fd, const char *what, uint64_t lfs_threshold,
                       int force_lfs, int copy_fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return hk__fail(HK_ERR_IO, "cannot stat %s: %s", what, strerror(errno));
    uint64_t expect = (uint64_t)st.st_size;
    unsigned char *buf = malloc(IO_CHUNK);
    if (!buf) return hk__fail(HK_ERR_NOMEM, "out of memory");
    /* probe */
    size_t have = 0;
    while (have < BINARY_PROBE) {
        ssize_t r = read(fd, buf + have, BINARY_PROBE - have);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return hk__fail(HK_ERR_IO, "cannot read %s: %s", what, strerror(errno));
        }
        if (r == 0) break;
        have += (size_t)r;
    }
    bool is_lfs = force_lfs >= 0 ? force_lfs != 0 : (memchr(buf, 0, have) != NULL || expect >= lfs_threshold);
    hk_hasher *h = hk__hasher_new(is_lfs ? HK_HASH_SHA256 : HK_HASH_GIT_BLOB, expect);
    if (!h) {
        free(buf);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    uint64_t total = 0;
    size_t n = have;
    int rc = HK_OK;
    for (;;) {
        if (n > 0) {
            hk__hasher_update(h, buf, n);
            total += n;
            if (copy_fd >= 0) {
                size_t off = 0;
                while (off < n) {
                    ssize_t w = write(copy_fd, buf + off, n - off);
                    if (w < 0 && errno == EINTR) continue;
                    if (w < 0) {
                        rc = hk__fail(hk__errno_code(errno), "cannot write a blob: %s", strerror(errno));
                        break;
                    }
                    off += (size_t)w;
                }
                if (rc) break;
            }
        }
        ssize_t r = read(fd, buf, IO_CHUNK);
        if (r < 0 && errno == EINTR) {
            n = 0;
            continue;
        }
        if (r < 0) {
            rc = hk__fail(HK_ERR_IO, "cannot read %s: %s", what, strerror(errno));
            break;
        }
        if (r == 0) break;
        n = (size_t)r;
    }
    free(buf);
    if (rc == HK_OK && total != expect)
        rc = hk__fail(HK_ERR_IO, "%s changed size while being read (%llu then %llu bytes); publish it again when it is stable",
                     what, (unsigned long long)expect, (unsigned long long)total);
    if (rc) {
        hk__hasher_free(h);
        return rc;
    }
    unsigned char d[64];
    size_t dl = hk__hasher_finish(h, d);
    hk__hex(etag, d, dl);
    *lfs = is_lfs;
    *size = total;
    return HK_OK;
}

int srv_classify_file(char etag[65], bool *lfs, uint64_t *size, const char *path, uint64_t lfs_threshold) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hk__fail(hk__errno_code(errno), "cannot open %s: %s", path, strerror(errno));
    int rc = srv_hash_stream(etag, lfs, size, fd, path, lfs_threshold ? lfs_threshold : HK_LFS_THRESHOLD_DEFAULT, -1, -1);
    close(fd);
    return rc;
}
