#include "util/walk.h"

#include "internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entry names of one directory (sorted on request); HK_ERR_NOT_FOUND when it cannot be opened. */
static int read_names(char ***out, size_t *out_n, const char *dir, int sorted) {
    DIR *d = opendir(dir);
    if (!d) return hk__fail(errno == ENOENT ? HK_ERR_NOT_FOUND : hk__errno_code(errno), "cannot list %s: %s", dir,
                           strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = HK_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if ((rc = HK_VEC_RESERVE(names, cap, n + 1)) != HK_OK) break;
        if (!(names[n] = hk__strdup(de->d_name))) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory listing %s", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return rc;
    }
    if (sorted && n > 1) qsort(names, n, sizeof *names, cmp_names);
    *out = names;
    *out_n = n;
    return HK_OK;
}

/* 1: stop requested; 0: go on; negative: aborted (error recorded). */
static int walk_level(const char *dir, const char *rel, int depth, int max_depth, unsigned flags, hk_walk_fn fn,
                      void *ud) {
    char **names = NULL;
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
        char *path = hk__path_join(dir, names[i]);
        char *erel = rel[0] ? hk__asprintf("%s/%s", rel, names[i]) : hk__strdup(names[i]);
        if (!path || !erel) {
            hk__fail(HK_ERR_NOMEM, "out of memory walking %s", dir);
            result = -1;
        } else if (lstat(path, &e.st) != 0) {
            if (errno != ENOENT) hk__log(HK_LOG_DEBUG, "walk: cannot stat %s: %s", path, strerror(errno));
        } else {
            e.path = path;
            e.rel = erel;
            e.name = names[i];
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
    for (size_t i = 0; i < n; i++) free(names[i]);
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
