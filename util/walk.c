/* Directory walks: the one recursive readdir loop (hk__walk) and the walks built on it (listing
 * subdirectories, removing a tree). */
#include "util/walk.h"

#include "internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The entry names of one directory (sorted on request) and, in types[] when asked for, each
 * entry's file type as readdir reports it (DT_UNKNOWN where the file system does not);
 * HK_ERR_NOT_FOUND when it cannot be opened. */
typedef struct named {
    char *name;
    unsigned char type;
} named;

static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

static int read_names(named **out, size_t *out_n, const char *dir, int sorted) {
    DIR *d = opendir(dir);
    if (!d) return hk__fail(errno == ENOENT ? HK_ERR_NOT_FOUND : hk__errno_code(errno), "cannot list %s: %s", dir,
                           strerror(errno));
    named *v = NULL;
    size_t n = 0, cap = 0;
    int rc = HK_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if ((rc = HK_VEC_RESERVE(v, cap, n + 1)) != HK_OK) break;
        if (!(v[n].name = hk__strdup(de->d_name))) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        v[n++].type = de->d_type;
    }
    closedir(d);
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

/* 1: stop requested; 0: go on; negative: aborted (error recorded). */
static int walk_level(const char *dir, const char *rel, int depth, int max_depth, unsigned flags, hk_walk_fn fn,
                      void *ud) {
    named *names = NULL;
    size_t n = 0;
    int rc = read_names(&names, &n, dir, (flags & HK_WALK_SORTED) != 0);
    if (rc) {
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
        } else if (!type && lstat(path, &e.st) != 0) {
            if (errno != ENOENT) hk__log(HK_LOG_DEBUG, "walk: cannot stat %s: %s", path, strerror(errno));
        } else {
            e.path = path;
            e.rel = erel;
            e.name = names[i].name;
            e.depth = depth;
            int a = fn(ud, &e, 0);
            if (a < 0) result = -1;
            else if (a == HK_WALK_STOP) result = 1;
            else if (a == HK_WALK_CONTINUE && S_ISDIR(e.st.st_mode)) {
                if (max_depth < 0 || depth < max_depth)
                    result = walk_level(path, erel, depth + 1, max_depth, flags, fn, ud);
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
    return result;
}

int hk__walk(const char *dir, int max_depth, unsigned flags, hk_walk_fn fn, void *ud) {
    if (!dir || !fn) return hk__fail(HK_ERR_INVALID_ARG, "hk__walk: dir and fn are required");
    int r = walk_level(dir, "", 0, max_depth, flags, fn, ud);
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
