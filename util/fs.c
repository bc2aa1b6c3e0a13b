/* File-system helpers: atomic writes, mkdir -p, path safety, relative paths. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/rand.h>

char *hk__path_join(const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/') la--;
    while (*b == '/') b++;
    size_t lb = strlen(b);
    char *out = malloc(la + lb + 2); /* not asprintf: a path is joined on every request */
    if (!out) return NULL;
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return out;
}

bool hk__path_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

int hk__rename_exchange(const char *a, const char *b) {
#if defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */);
#else
    (void)a;
    (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

bool hk__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A pause of 0..cap_us microseconds, random, so that a retry falls out of phase with a remover
 * whose wakeups line up with ours (equal sleeps coalesce onto one timer tick). */
static void jittered_pause(unsigned cap_us) {
    unsigned char r[2];
    unsigned v = RAND_bytes(r, sizeof r) == 1 ? (unsigned)r[0] << 8 | r[1] : (unsigned)getpid();
    usleep(v % (cap_us + 1));
}

/* mkdir -p of p (a writable copy, no trailing '/'). The full path is tried first: a folder that is
 * there costs one syscall, not one per component. A missing parent is made and the mkdir tried
 * again, for up to HK_MKDIRS_RACE_S seconds: another process may rmdir an empty parent in between
 * (the staging folders are removed when their last stage goes), and a count of tries can be spent
 * in a burst of such removals on a loaded machine. */
#define HK_MKDIRS_RACE_S 5.0
static int mkdirs_in_place(char *p, mode_t mode) {
    double deadline = 0;
    for (unsigned attempt = 0;; attempt++) {
        if (mkdir(p, mode) == 0) return HK_OK;
        int e = errno;
        if (e == EEXIST) return hk__is_dir(p) ? HK_OK : hk__fail(HK_ERR_IO, "%s exists and is not a directory", p);
        char *slash = strrchr(p, '/');
        if (e != ENOENT || !slash || slash == p)
            return hk__fail(hk__errno_code(e), "cannot create directory %s: %s", p, strerror(e));
        if (attempt == 2) deadline = hk__now_s() + HK_MKDIRS_RACE_S;
        if (attempt >= 2) {
            if (hk__now_s() > deadline)
                return hk__fail(HK_ERR_IO, "cannot create directory %s: its parent kept disappearing (removed concurrently) for %.0f s", p,
                                HK_MKDIRS_RACE_S);
            jittered_pause(attempt < 12 ? 50u << (attempt / 2) : 3200u);
        }
        *slash = '\0';
        int rc = mkdirs_in_place(p, mode);
        *slash = '/';
        if (rc) return rc;
    }
}

int hk__mkdirs(const char *path, unsigned mode) {
    char *p = hk__strdup(path);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
    int rc = n ? mkdirs_in_place(p, (mode_t)mode) : hk__fail(HK_ERR_INVALID_ARG, "cannot create a directory with an empty name");
    free(p);
    return rc;
}

int hk__open_creating_parent(int *out_fd, const char *path, int flags, unsigned mode) {
    *out_fd = open(path, flags | O_CREAT, (mode_t)mode);
    if (*out_fd >= 0 || errno != ENOENT) return HK_OK;
    char *dir = hk__strdup(path);
    if (!dir) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *slash = strrchr(dir, '/');
    int rc = HK_OK;
    if (slash && slash != dir) {
        *slash = '\0';
        rc = hk__mkdirs(dir, 0777);
    }
    free(dir);
    if (rc) return rc;
    *out_fd = open(path, flags | O_CREAT, (mode_t)mode);
    return HK_OK;
}

/* open + read until 0 + close: no stdio, whose fstat and extra read are half of a small file's
 * syscalls (a cache check reads several small files a variant). */
int hk__read_file(char **out, size_t *out_len, const char *path, size_t max_len) {
    return hk__read_file_at(out, out_len, AT_FDCWD, path, 0, max_len);
}

int hk__read_file_at(char **out, size_t *out_len, int dirfd, const char *path, int oflags, size_t max_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | oflags);
    if (fd < 0) return hk__fail(hk__errno_code(errno), "cannot open %s: %s", path, strerror(errno));
    hk_strbuf sb;
    hk__sb_init(&sb);
    /* sized to the file: doubling from 64 KiB had held up to twice a big file (a 9 MB receipt in
     * 16 MB); one that grows meanwhile grows the buffer as before */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= max_len)
        hk__sb_reserve_exact(&sb, (size_t)st.st_size);
    char buf[65536];
    ssize_t n;
    for (;;) {
        n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (sb.len + (size_t)n > max_len) {
            close(fd);
            hk__sb_free(&sb);
            return hk__fail(HK_ERR_PARSE, "%s is larger than %zu bytes", path, max_len);
        }
        hk__sb_append_n(&sb, buf, (size_t)n);
    }
    int err = n < 0 ? errno : 0;
    close(fd);
    if (err) {
        hk__sb_free(&sb);
        return hk__fail(hk__errno_code(err), "cannot read %s: %s", path, strerror(err));
    }
    size_t len = sb.len;
    char *data = hk__sb_steal(&sb);
    if (!data) return hk__fail(HK_ERR_NOMEM, "out of memory reading %s", path);
    *out = data;
    if (out_len) *out_len = len;
    return HK_OK;
}

void hk__random_hex8(char buf[9]) {
    unsigned char r[4];
    if (RAND_bytes(r, sizeof r) != 1) {
        /* fall back to something unique enough for a temp name */
        unsigned v = (unsigned)getpid() ^ (unsigned)(uintptr_t)buf;
        memcpy(r, &v, 4);
    }
    hk__hex(buf, r, 4);
}

int hk__atomic_begin(hk_atomic_file *a, const char *path) {
    a->fd = -1;
    a->path = path;
    char rnd[9];
    hk__random_hex8(rnd);
    a->tmp = hk__asprintf("%s.%s.tmp", path, rnd);
    if (!a->tmp) return hk__fail(HK_ERR_NOMEM, "out of memory");
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (a->fd < 0) {
        int e = errno;
        free(a->tmp);
        a->tmp = NULL;
        return hk__fail(hk__errno_code(e), "cannot create %s: %s", path, strerror(e));
    }
    return HK_OK;
}

void hk__atomic_cancel(hk_atomic_file *a) {
    if (a->fd >= 0) close(a->fd);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    a->tmp = NULL;
    a->fd = -1;
}

int hk__atomic_write(hk_atomic_file *a, const void *data, size_t len) {
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(a->fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            hk__atomic_cancel(a);
            return hk__fail(hk__errno_code(e), "cannot write %s: %s", a->path, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    return HK_OK;
}

int hk__atomic_finish(hk_atomic_file *a) {
    int rc = HK_OK, e = 0;
    if (fsync(a->fd) != 0) e = errno;
    if (close(a->fd) != 0 && !e) e = errno; /* closed even when the sync failed */
    a->fd = -1;                             /* (or its close failed: never closed twice) */
    if (e) {
        rc = hk__fail(hk__errno_code(e), "cannot write %s: %s", a->path, strerror(e));
    } else if (rename(a->tmp, a->path) != 0) {
        e = errno;
        rc = hk__fail(hk__errno_code(e), "cannot rename into %s: %s", a->path, strerror(e));
    }
    if (rc) unlink(a->tmp);
    free(a->tmp);
    a->tmp = NULL;
    return rc;
}

int hk__write_file_atomic(const char *path, const void *data, size_t len) {
    hk_atomic_file a;
    int rc = hk__atomic_begin(&a, path);
    if (rc == HK_OK) rc = hk__atomic_write(&a, data, len);
    return rc == HK_OK ? hk__atomic_finish(&a) : rc;
}

char *hk__relpath(const char *to, const char *from_dir) {
    /* Walk both absolute paths component by component; every component of from_dir past the
     * common prefix becomes one "../". */
    const char *a = to, *b = from_dir;
    const char *a_rest = to, *b_rest = from_dir;
    for (;;) {
        while (*a == '/') a++;
        while (*b == '/') b++;
        size_t na = strcspn(a, "/"), nb = strcspn(b, "/");
        if (na == 0 || nb == 0 || na != nb || memcmp(a, b, na) != 0) break;
        a += na;
        b += nb;
        a_rest = a;
        b_rest = b;
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (const char *p = b_rest;;) {
        while (*p == '/') p++;
        size_t n = strcspn(p, "/");
        if (n == 0) break;
        hk__sb_append(&sb, "../");
        p += n;
    }
    while (*a_rest == '/') a_rest++;
    hk__sb_append(&sb, a_rest);
    if (sb.len == 0) hk__sb_append(&sb, ".");
    return hk__sb_steal(&sb);
}

bool hk__path_is_safe_relative(const char *rel) {
    if (!rel || !*rel || rel[0] == '/') return false;
    if (strchr(rel, '\\')) return false;
    if (strlen(rel) >= 2 && rel[1] == ':') return false; /* drive letter */
    const char *p = rel;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0) return false;                              /* "a//b" or trailing '/' */
        if (n == 1 && p[0] == '.') return false;
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) return false;
        if (!e) break;
        p = e + 1;
        if (!*p) return false;
    }
    return true;
}
