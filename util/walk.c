/* Directory walks: the one recursive readdir loop (hk__walk) and the walks built on it (listing
 * subdirectories, removing a tree). */
#include "util/walk.h"

#include "internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* An entry of a directory: its name and its file type as the directory records give it (DT_UNKNOWN
 * where the file system does not). */
typedef struct named {
    char *name;
    unsigned char type;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

/* Append one entry (not "." or ".."); HK_OK or HK_ERR_NOMEM. */
static int add_name(named **v, size_t *n, size_t *cap, const char *name, unsigned char type, const char *dir) {
    if (!strcmp(name, ".") || !strcmp(name, "..")) return HK_OK;
    int rc = HK_VEC_RESERVE(*v, *cap, *n + 1);
    if (rc) return rc;
    if (!((*v)[*n].name = hk__strdup(name))) return hk__fail(HK_ERR_NOMEM, "out of memory listing %s", dir);
    (*v)[(*n)++].type = type;
    return HK_OK;
}

#ifdef SYS_getdents64
/* The kernel's directory records, read straight from fd (Linux): opendir/fdopendir would add an
 * fstat and fcntl calls a directory, a cost the cache walks pay for every folder. */
struct dirent64_rec {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int list_fd(named **v, size_t *n, size_t *cap, int fd, const char *dir) {
    enum { BUF = 32768 };
    char *buf = malloc(BUF);
    if (!buf) return hk__fail(HK_ERR_NOMEM, "out of memory listing %s", dir);
    int rc = HK_OK;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, BUF);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            rc = hk__fail(hk__errno_code(errno), "cannot list %s: %s", dir, strerror(errno));
            break;
        }
        if (got == 0) break;
        for (long off = 0; off < got && rc == HK_OK;) {
            const struct dirent64_rec *r = (const struct dirent64_rec *)(buf + off);
            rc = add_name(v, n, cap, r->d_name, r->d_type, dir);
            off += r->d_reclen;
        }
        if (rc) break;
    }
    free(buf);
    return rc;
}
#else
static int list_fd(named **v, size_t *n, size_t *cap, int fd, const char *dir) {
    int own = dup(fd);
    DIR *d = own >= 0 ? fdopendir(own) : NULL;
    if (!d) {
        int e = errno;
        if (own >= 0) close(own);
        return hk__fail(hk__errno_code(e), "cannot list %s: %s", dir, strerror(e));
    }
    int rc = HK_OK;
    struct dirent *de;
    while (rc == HK_OK && (de = readdir(d)) != NULL) rc = add_name(v, n, cap, de->d_name, de->d_type, dir);
    closedir(d);
    return rc;
}
#endif

/* The entries of the open directory fd (sorted on request), each with its file type as the
 * directory records give it (DT_UNKNOWN where the file system does not). */
static int read_names(named **out, size_t *out_n, int fd, const char *dir, int sorted) {
    named *v = NULL;
    size_t n = 0, cap = 0;
    int rc = list_fd(&v, &n, &cap, fd, dir);
    if (rc) {
        for (size_t i = 0; i < n; i++) free(v[i].name);
        free(v);
        return rc;
    }
    if (sorted && n > 1) qsort(v, n, sizeof *v, cmp_named);
    *out = v;
    *out_n = n;
    return HK_OK;
}

/* The directory `name` of pfd (at depth 0: the walked path itself, links followed; below it never:
 * a folder swapped for a link after it was listed is not entered), open for reading; -1 with the
 * error recorded. */
static int open_level(int pfd, const char *name, const char *dir, int depth) {
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
    if (fd < 0) hk__fail(errno == ENOENT ? HK_ERR_NOT_FOUND : hk__errno_code(errno), "cannot list %s: %s", dir, strerror(errno));
    return fd;
}

/* The file type of a readdir entry as st_mode bits; 0 when readdir did not say. */
static mode_t mode_of(unsigned char type) {
    switch (type) {
    case DT_REG: return S_IFREG;
    case DT_DIR: return S_IFDIR;
    case DT_LNK: return S_IFLNK;
    case DT_FIFO: return S_IFIFO;
    case DT_SOCK: return S_IFSOCK;
    case DT_CHR: return S_IFCHR;
    case DT_BLK: return S_IFBLK;
    default: return 0;
    }
}

/* 1: stop requested; 0: go on; negative: aborted (error recorded). The entries are looked at
 * through the directory's descriptor (fstatat, and the callback's *at calls): no path walk from
 * the root per entry. */
static int walk_level(int pfd, const char *name, const char *dir, const char *rel, int depth, int max_depth,
                      unsigned flags, hk_walk_fn fn, void *ud) {
    named *names = NULL;
    size_t n = 0;
    const int fd = open_level(pfd, name, dir, depth);
    int rc = fd >= 0 ? read_names(&names, &n, fd, dir, (flags & HK_WALK_SORTED) != 0) : hk_last_error_code();
    if (rc) {
        if (fd >= 0) close(fd);
        if (depth == 0) return -1;
        hk__log(HK_LOG_DEBUG, "walk: skipping %s: %s", dir, hk_last_error());
        hk_clear_error();
        return 0;
    }
    int result = 0;
    for (size_t i = 0; i < n && result == 0; i++) {
        hk_walk_entry e;
        char *path = hk__path_join(dir, names[i].name);
        char *erel = rel[0] ? hk__asprintf("%s/%s", rel, names[i].name) : hk__strdup(names[i].name);
        const mode_t type = flags & HK_WALK_TYPE_ONLY ? mode_of(names[i].type) : 0;
        if (type) {
            memset(&e.st, 0, sizeof e.st);
            e.st.st_mode = type;
        }
        if (!path || !erel) {
            hk__fail(HK_ERR_NOMEM, "out of memory walking %s", dir);
            result = -1;
        } else if (!type && fstatat(fd, names[i].name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT) hk__log(HK_LOG_DEBUG, "walk: cannot stat %s: %s", path, strerror(errno));
        } else {
            e.path = path;
            e.rel = erel;
            e.name = names[i].name;
            e.dirfd = fd;
            e.depth = depth;
            int a = fn(ud, &e, 0);
            if (a < 0) result = -1;
            else if (a == HK_WALK_STOP) result = 1;
            else if (a == HK_WALK_CONTINUE && S_ISDIR(e.st.st_mode)) {
                if (max_depth < 0 || depth < max_depth)
                    result = walk_level(fd, names[i].name, path, erel, depth + 1, max_depth, flags, fn, ud);
                if (result == 0 && (flags & HK_WALK_POSTORDER)) {
                    a = fn(ud, &e, 1);
                    result = a < 0 ? -1 : a == HK_WALK_STOP ? 1 : 0;
                }
            }
        }
        free(path);
        free(erel);
    }
    for (size_t i = 0; i < n; i++) free(names[i].name);
    free(names);
    close(fd);
    return result;
}

int hk__walk(const char *dir, int max_depth, unsigned flags, hk_walk_fn fn, void *ud) {
    if (!dir || !fn) return hk__fail(HK_ERR_INVALID_ARG, "hk__walk: dir and fn are required");
    int r = walk_level(AT_FDCWD, dir, dir, "", 0, max_depth, flags, fn, ud);
    if (r >= 0) return HK_OK;
    int code = hk_last_error_code();
    return code ? code : hk__fail(HK_ERR_INTERNAL, "walk of %s aborted without an error", dir);
}

/* ---- walks the rest of the project asks for by name (declared in internal.h) ------------------ */

typedef struct subdirs {
    const char *dir;
    char **v;
    size_t n, cap;
} subdirs;

static int add_subdir(void *ud, const hk_walk_entry *e, int post) {
    subdirs *sd = ud;
    (void)post;
    if (e->name[0] == '.' || !hk__is_dir(e->path)) return HK_WALK_SKIP; /* hk__is_dir follows symlinks */
    if (HK_VEC_RESERVE(sd->v, sd->cap, sd->n + 2)) return -1; /* room for the terminating NULL */
    if (!(sd->v[sd->n] = hk__strdup(e->name))) {
        hk__fail(HK_ERR_NOMEM, "out of memory listing %s", sd->dir);
        return -1;
    }
    sd->v[++sd->n] = NULL;
    return HK_WALK_SKIP;
}

int hk__list_subdirs(char ***out, size_t *count, const char *dir) {
    *out = NULL;
    *count = 0;
    subdirs sd = {.dir = dir};
    int rc = hk__walk(dir, 0, 0, add_subdir, &sd);
    if (rc == HK_ERR_NOT_FOUND || (rc && rc != HK_ERR_NOMEM)) rc = hk__fail(HK_ERR_NOT_FOUND, "cannot list %s", dir);
    if (rc == HK_OK && !sd.v && !(sd.v = calloc(1, sizeof *sd.v))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc) {
        for (size_t i = 0; i < sd.n; i++) free(sd.v[i]);
        free(sd.v);
        return rc;
    }
    *out = sd.v;
    *count = sd.n;
    return HK_OK;
}

static int remove_entry(void *ud, const hk_walk_entry *e, int post) {
    (void)ud;
    if (S_ISDIR(e->st.st_mode) && !post) return HK_WALK_CONTINUE; /* removed after its entries */
    if ((S_ISDIR(e->st.st_mode) ? rmdir(e->path) : unlink(e->path)) != 0 && errno != ENOENT) {
        hk__fail(HK_ERR_IO, "cannot remove %s: %s", e->path, strerror(errno));
        return -1;
    }
    return HK_WALK_CONTINUE;
}

int hk__rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? HK_OK : hk__fail(HK_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0) return hk__fail(HK_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
        return HK_OK;
    }
    int rc = hk__walk(path, -1, HK_WALK_POSTORDER, remove_entry, NULL);
    if (rc == HK_ERR_NOT_FOUND) rc = hk__fail_wrap(HK_ERR_IO, "cannot open %s", path);
    if (rc == HK_OK && rmdir(path) != 0) rc = hk__fail(HK_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return rc;
}
