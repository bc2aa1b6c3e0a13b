/* hubkern download --local-dir DIR: the files a pull verified in the cache, materialised as real
 * files under DIR in the repo's layout (huggingface_hub's local_dir), each written to a temp file
 * in DIR/.cache/huggingface/download/, hashed while it is written, checked against its blob id and
 * only then renamed into place, so that DIR never holds a partial or unverified file. Next to each
 * file, huggingface_hub's DIR/.cache/huggingface/download/<path>.metadata (commit, etag, time) is
 * written, so that `hf download --local-dir DIR` at the same commit reuses the files too.
 * A temp file lives only while its writer holds the flock of download/<blob>.lock (the cache's
 * convention for its temp blobs, cache/blobs.c): so a run removes the temp files of killed runs
 * (cli_local_sweep, and before each copy) and never one a live run is writing. */
#include "cli/local_dir.h"
#include "cli/progress.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

/* The hash a blob id is: the LFS sha256 (64 hex), else the git blob sha1 (40 hex). */
static int blob_kind(hk_hash_kind *kind, const char *blob) {
    size_t n = blob ? strlen(blob) : 0;
    if (n && strspn(blob, "0123456789abcdef") != n) /* it names temp and lock files: hex only */
        return hk__fail(HK_ERR_INTEGRITY, "the blob id '%.80s' is not a hash; refusing to copy it", blob);
    if (n == 64) *kind = HK_HASH_SHA256;
    else if (n == 40) *kind = HK_HASH_GIT_BLOB;
    else return hk__fail(HK_ERR_INTERNAL, "no blob id to check the local copy against");
    return HK_OK;
}

bool cli_local_file_ok(const char *dir, const char *path, const char *blob, uint64_t size) {
    char *dst = hk__path_join(dir, path);
    struct stat st;
    hk_hash_kind kind = HK_HASH_SHA256;
    char hex[129];
    bool ok = dst && lstat(dst, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size &&
              blob_kind(&kind, blob) == HK_OK && hk__hash_file_hex(hex, sizeof hex, kind, dst) == HK_OK &&
              strcmp(hex, blob) == 0;
    hk_clear_error();
    free(dst);
    return ok;
}

/* Our temp file's name: "<blob>.<8 hex>.incomplete", the blob 40 or 64 lowercase hex (hf's own
 * temp files, "<hash of the name>.<etag>.incomplete", never match). *blob_len: the blob's length. */
static bool temp_name(const char *name, size_t *blob_len) {
    size_t n = strspn(name, "0123456789abcdef");
    if ((n != 40 && n != 64) || name[n] != '.' || strspn(name + n + 1, "0123456789abcdef") != 8) return false;
    *blob_len = n;
    return strcmp(name + n + 9, ".incomplete") == 0;
}

/* Open and flock download/<blob>.lock (blob: 40 or 64 hex, no '/'), waiting (wait) or not; -1
 * when busy, or when this file system has no flock (then nothing may be deleted: the caller
 * cannot tell a live writer from a dead one). *no_lock: flock is unsupported here. */
static int blob_lock(const char *tmpdir, const char *blob, size_t blob_len, bool wait, bool *no_lock) {
    *no_lock = false;
    char *lp = hk__asprintf("%s/%.*s.lock", tmpdir, (int)blob_len, blob);
    int fd = lp ? open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666) : -1;
    free(lp);
    if (fd < 0) return -1;
    int r;
    while ((r = flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB)) != 0 && errno == EINTR && !cli_interrupted()) {
    }
    if (r != 0) {
        int e = errno;
        *no_lock = e != EWOULDBLOCK && e != EINTR;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void blob_unlock(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd); /* never unlinked: a waiter may hold an fd to this inode */
}

/* Remove the temp files of `blob` in tmpdir (the caller holds its lock: no live run has one). */
static size_t remove_blob_temps(const char *tmpdir, const char *blob, size_t blob_len) {
    DIR *d = opendir(tmpdir);
    struct dirent *de;
    size_t removed = 0, bl;
    while (d && (de = readdir(d)) != NULL) {
        if (!temp_name(de->d_name, &bl) || bl != blob_len || strncmp(de->d_name, blob, bl) != 0) continue;
        char *p = hk__path_join(tmpdir, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && unlink(p) == 0) removed++;
        free(p);
    }
    if (d) closedir(d);
    return removed;
}

size_t cli_local_sweep(const char *dir) {
    char *tmpdir = hk__asprintf("%s/.cache/huggingface/download", dir);
    DIR *d = tmpdir ? opendir(tmpdir) : NULL;
    struct dirent *de;
    size_t removed = 0, bl;
    char last[65] = "";
    while (d && (de = readdir(d)) != NULL) {
        if (!temp_name(de->d_name, &bl) || (strncmp(last, de->d_name, bl) == 0 && last[bl] == '\0')) continue;
        memcpy(last, de->d_name, bl);
        last[bl] = '\0';
        bool no_lock;
        int fd = blob_lock(tmpdir, de->d_name, bl, false, &no_lock);
        if (fd >= 0) removed += remove_blob_temps(tmpdir, de->d_name, bl); /* no live writer holds one */
        blob_unlock(fd);
    }
    if (d) closedir(d);
    free(tmpdir);
    hk_clear_error();
    return removed;
}

/* DIR/.cache/huggingface, with huggingface_hub's .gitignore ("*") and CACHEDIR.TAG made once. */
static char *bookkeeping_dir(const char *dir) {
    char *hf = hk__asprintf("%s/.cache/huggingface", dir);
    if (!hf || hk__mkdirs(hf, 0777) != HK_OK) {
        free(hf);
        return NULL;
    }
    static const char tag[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
                              "# This file is a cache directory tag created by huggingface_hub.\n"
                              "# For information about cache directory tags, see:\n"
                              "#\thttps://bford.info/cachedir/\n";
    const char *names[2] = {".gitignore", "CACHEDIR.TAG"}, *texts[2] = {"*", tag};
    for (int i = 0; i < 2; i++) {
        char *p = hk__path_join(hf, names[i]);
        if (p && !hk__path_exists(p)) hk__write_file_atomic(p, texts[i], strlen(texts[i]));
        free(p);
    }
    hk_clear_error(); /* both are courtesies to git and backup tools */
    return hf;
}

/* Copy src to tmp, hashing what is written; HK_ERR_INTEGRITY when it is not blob. */
static int copy_hashed(const char *src, const char *tmp, const char *blob, uint64_t size) {
    hk_hash_kind kind = HK_HASH_SHA256;
    int rc = blob_kind(&kind, blob);
    if (rc) return rc;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return hk__fail(hk__errno_code(errno), "cannot open %s: %s", src, strerror(errno));
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (out < 0) {
        rc = hk__fail(hk__errno_code(errno), "cannot create %s: %s", tmp, strerror(errno));
        close(in);
        return rc;
    }
    hk_hasher *h = hk__hasher_new(kind, size);
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!h || !buf) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    uint64_t total = 0;
    while (rc == HK_OK) {
        if (cli_interrupted()) { /* Ctrl-C / SIGTERM: stop now; the temp file goes */
            rc = hk__fail(HK_ERR_CANCELLED, "interrupted while copying %s", src);
            break;
        }
        ssize_t n = read(in, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) rc = hk__fail(hk__errno_code(errno), "cannot read %s: %s", src, strerror(errno));
        if (n <= 0) break;
        hk__hasher_update(h, buf, (size_t)n);
        total += (uint64_t)n;
        for (ssize_t off = 0; rc == HK_OK && off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) rc = hk__fail(hk__errno_code(errno), "cannot write %s: %s", tmp, strerror(errno));
            else off += w;
        }
    }
    unsigned char d[64];
    char hex[129] = "";
    if (h) hk__hex(hex, d, hk__hasher_finish(h, d));
    if (rc == HK_OK && (total != size || strcmp(hex, blob) != 0))
        rc = hk__fail(HK_ERR_INTEGRITY, "the copy of %s does not match its blob %s (%llu bytes, hash %s)", src, blob,
                      (unsigned long long)total, hex);
    if (rc == HK_OK && fsync(out) != 0) rc = hk__fail(HK_ERR_IO, "cannot flush %s: %s", tmp, strerror(errno));
    if (close(out) != 0 && rc == HK_OK) rc = hk__fail(HK_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    close(in);
    free(buf);
    return rc;
}

/* huggingface_hub's <path>.metadata: the commit, the etag (blob id) and the time it was true, which
 * must not be older than the file's mtime for huggingface_hub to trust it. */
static int write_metadata(const char *hf, const char *path, const char *commit, const char *blob) {
    char *meta = hk__asprintf("%s/download/%s.metadata", hf, path);
    char *mdir = meta ? hk__strdup(meta) : NULL;
    if (!meta || !mdir) {
        free(meta);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    *strrchr(mdir, '/') = '\0';
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char text[256];
    int n = snprintf(text, sizeof text, "%s\n%s\n%lld.%06ld\n", commit, blob, (long long)tv.tv_sec, (long)tv.tv_usec);
    int rc = hk__mkdirs(mdir, 0777);
    if (rc == HK_OK) rc = hk__write_file_atomic(meta, text, (size_t)n);
    free(meta);
    free(mdir);
    return rc;
}

int cli_local_put(bool *out_reused, const char *dir, const hk_pull_result *r, size_t i) {
    *out_reused = false;
    const char *path = hk_pull_result_file(r, i), *blob = hk_pull_result_file_blob(r, i);
    uint64_t size = hk_pull_result_file_size(r, i);
    if (!path || !hk__path_is_safe_relative(path))
        return hk__fail(HK_ERR_UNSAFE_PATH, "refusing to write '%s' under %s", path ? path : "(none)", dir);
    char *hf = bookkeeping_dir(dir);
    if (!hf) return hk_last_error_code() ? hk_last_error_code() : hk__fail(HK_ERR_NOMEM, "out of memory");
    char *dst = hk__path_join(dir, path), *src = hk__path_join(hk_pull_result_snapshot(r), path);
    char *dst_dir = dst ? hk__strdup(dst) : NULL;
    char *tmpdir = hk__asprintf("%s/download", hf), *tmp = NULL;
    int rc = dst && src && dst_dir && tmpdir ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK && cli_local_file_ok(dir, path, blob, size)) {
        *out_reused = true; /* there and equal to the verified blob: kept as it is */
    } else if (rc == HK_OK) {
        *strrchr(dst_dir, '/') = '\0';
        char rnd[9];
        hk__random_hex8(rnd);
        tmp = hk__asprintf("%s/%.64s.%s.incomplete", tmpdir, blob ? blob : "x", rnd); /* temp_name() */
        if (!tmp) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK) rc = hk__mkdirs(tmpdir, 0777);
        if (rc == HK_OK) rc = hk__mkdirs(dst_dir, 0777);
        /* the blob's lock for as long as the temp file lives (waiting for a concurrent run copying
         * the same blob); held, any other temp of the blob is a killed run's: removed */
        bool no_lock = false;
        int lock = -1;
        hk_hash_kind kind;
        if (rc == HK_OK) rc = blob_kind(&kind, blob);
        if (rc == HK_OK && (lock = blob_lock(tmpdir, blob, strlen(blob), true, &no_lock)) < 0 && !no_lock)
            rc = cli_interrupted() ? hk__fail(HK_ERR_CANCELLED, "interrupted while waiting to copy %s", path)
                                   : hk__fail(HK_ERR_LOCK, "cannot lock %s/%s.lock: %s", tmpdir, blob, strerror(errno));
        if (rc == HK_OK && lock >= 0) remove_blob_temps(tmpdir, blob, strlen(blob));
        if (rc == HK_OK) rc = copy_hashed(src, tmp, blob, size);
        if (rc == HK_OK && rename(tmp, dst) != 0)
            rc = hk__fail(hk__errno_code(errno), "cannot move the verified copy into %s: %s", dst, strerror(errno));
        if (rc != HK_OK && tmp) unlink(tmp); /* nothing partial stays behind */
        blob_unlock(lock);
        if (rc == HK_OK) rc = hk__fsync_path(dst_dir);
    }
    if (rc == HK_OK) rc = write_metadata(hf, path, hk_pull_result_commit(r), blob);
    free(hf);
    free(dst);
    free(src);
    free(dst_dir);
    free(tmpdir);
    free(tmp);
    return rc;
}
