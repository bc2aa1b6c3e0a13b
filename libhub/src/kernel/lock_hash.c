/* The old kernels.lock format's git_lfs_concat variant hash, from a cached variant directory or
 * from (path, id) pairs of a tree listing. */
#include "kernel/kernel_internal.h"

#include "util/text.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- git_lfs_concat ------------------------------------------------------------------------ */

typedef struct pair {
    char *path;
    unsigned char id[32];
    size_t id_len;
} pair;

typedef struct pairs {
    pair *v;
    size_t n, cap;
} pairs;

static void pairs_free(pairs *p) {
    for (size_t i = 0; i < p->n; i++) free(p->v[i].path);
    free(p->v);
}

static int cmp_pair(const void *pa, const void *pb) {
    const pair *a = pa, *b = pb;
    int c = strcmp(a->path, b->path);
    if (c) return c;
    size_t n = a->id_len < b->id_len ? a->id_len : b->id_len;
    c = memcmp(a->id, b->id, n);
    return c ? c : (a->id_len > b->id_len) - (a->id_len < b->id_len);
}

static int pairs_add(pairs *p, const char *path, const char *hex) {
    size_t hl = strlen(hex);
    if (hl != 40 && hl != 64) return hk__fail(HK_ERR_INVALID_ARG, "id of %s is not 40 or 64 hex", path);
    int rc = HK_VEC_RESERVE(p->v, p->cap, p->n + 1);
    if (rc) return rc;
    pair *e = &p->v[p->n];
    e->id_len = hl / 2;
    if (hk__unhex(e->id, hex, e->id_len) != HK_OK)
        return hk__fail(HK_ERR_INVALID_ARG, "id of %s is not hex", path);
    e->path = hk__strdup(path);
    if (!e->path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    p->n++;
    return HK_OK;
}

static bool skipped(const char *rel) {
    if (hk__str_ends_with(rel, ".pyc")) return true;
    const char *p = rel;
    while ((p = strstr(p, "__pycache__")) != NULL) {
        bool start = p == rel || p[-1] == '/';
        bool end = p[11] == '\0' || p[11] == '/';
        if (start && end) return true;
        p += 11;
    }
    return false;
}

/* "sha256-<64 hex>" of the sorted pairs, allocated into *out. */
static int pairs_digest(char **out, pairs *p) {
    qsort(p->v, p->n, sizeof *p->v, cmp_pair);
    hk_hasher *h = hk__hasher_new(HK_HASH_SHA256, 0);
    if (!h) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) {
        hk__hasher_update(h, p->v[i].path, strlen(p->v[i].path));
        hk__hasher_update(h, p->v[i].id, p->v[i].id_len);
    }
    unsigned char d[64];
    size_t n = hk__hasher_finish(h, d);
    char *s = malloc(7 + 2 * n + 1);
    if (!s) return hk__fail(HK_ERR_NOMEM, "out of memory");
    memcpy(s, "sha256-", 7);
    hk__hex(s + 7, d, n);
    *out = s;
    return HK_OK;
}

HK_API int hk_variant_hash_from_pairs(char **out, const char *const *paths, const char *const *ids,
                                      size_t count) {
    if (!out || (count && (!paths || !ids))) return hk__fail(HK_ERR_INVALID_ARG, "NULL argument");
    *out = NULL;
    pairs p = {0};
    int rc = HK_OK;
    for (size_t i = 0; i < count && rc == HK_OK; i++)
        if (!skipped(paths[i])) rc = pairs_add(&p, paths[i], ids[i]);
    if (rc == HK_OK) rc = pairs_digest(out, &p);
    pairs_free(&p);
    return rc;
}

/* Walk snapshots/<commit>/build/<variant>/: every file must be a symlink into blobs/; its content
 * is hashed with the algorithm its blob name length implies (the old kernels verifier). */
static int walk_cache(pairs *p, const char *root, const char *rel) {
    char *dir = rel[0] ? hk__path_join(root, rel) : hk__strdup(root);
    if (!dir) return hk__fail(HK_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        free(dir);
        return hk__fail(hk__errno_code(e), "cannot list %s: %s", root, strerror(e));
    }
    int rc = HK_OK;
    struct dirent *de;
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *r = rel[0] ? hk__asprintf("%s/%s", rel, de->d_name) : hk__strdup(de->d_name);
        char *full = r ? hk__path_join(root, r) : NULL;
        struct stat lst;
        if (!r || !full) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else if (skipped(r)) { /* bytecode is not part of the hash */
        } else if (lstat(full, &lst) != 0) rc = hk__fail(HK_ERR_IO, "cannot stat %s", full);
        else if (S_ISDIR(lst.st_mode)) rc = walk_cache(p, root, r);
        else if (S_ISLNK(lst.st_mode)) {
            char target[PATH_MAX];
            ssize_t tl = readlink(full, target, sizeof target - 1);
            if (tl < 0) rc = hk__fail(HK_ERR_IO, "cannot read link %s", full);
            else {
                target[tl] = '\0';
                const char *blob = strrchr(target, '/');
                blob = blob ? blob + 1 : target;
                size_t bl = strlen(blob);
                char hex[65];
                if (bl == 64) rc = hk__hash_file_hex(hex, sizeof hex, HK_HASH_SHA256, full);
                else if (bl == 40) rc = hk__hash_file_hex(hex, sizeof hex, HK_HASH_GIT_BLOB, full);
                else rc = hk__fail(HK_ERR_LOCKFILE, "%s links to %s, which is not a cache blob", full, target);
                if (rc == HK_OK) rc = pairs_add(p, r, hex);
            }
        }
        /* regular files that are not links are not cache content: ignored as the old verifier did */
        free(r);
        free(full);
    }
    closedir(d);
    free(dir);
    return rc;
}

HK_API int hk_variant_hash_from_cache(char **out, const char *variant_dir) {
    if (!out || !variant_dir) return hk__fail(HK_ERR_INVALID_ARG, "NULL argument");
    *out = NULL;
    pairs p = {0};
    int rc = walk_cache(&p, variant_dir, "");
    if (rc == HK_OK) rc = pairs_digest(out, &p);
    pairs_free(&p);
    return rc;
}
