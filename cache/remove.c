/* Removal shared by prune and rm: report-then-delete, the blobs snapshot links still use, and
 * deleting blobs nothing uses (never one a live download holds the lock of). */
#include "cache/maint_internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void hk__cache_remove_path(hk_prune_ctx *c, const char *path, const char *what, uint64_t bytes) {
    size_t n = strlen(c->repo_dir); /* the entry, when inside the repo folder (receipts are beside it) */
    const char *rel = strncmp(path, c->repo_dir, n) == 0 && path[n] == '/' ? path + n + 1 : NULL;
    hk__cache_finding(c->sink, c->dry_run ? HK_CACHE_WOULD_REMOVE : HK_CACHE_REMOVED, NULL, c->label, rel, NULL, "%s",
                      what);
    c->rep->removed++;
    c->rep->removed_bytes += bytes;
    if (!c->dry_run && hk__rmtree(path) != HK_OK) {
        hk__cache_finding(c->sink, HK_CACHE_FAILED, NULL, c->label, rel, NULL, "%s: %s", rel ? rel : path,
                          hk_last_error());
        hk_clear_error();
    }
}

int hk__cache_collect_used(void *p, const char *path, const char *rel, const struct stat *st) {
    hk_prune_ctx *c = p;
    if (!S_ISLNK(st->st_mode)) return HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return HK_OK;
    target[n] = '\0';
    struct stat ts;
    if (stat(path, &ts) != 0) { /* broken link */
        char *what = hk__asprintf("broken link snapshots/%s", rel);
        hk__cache_remove_path(c, path, what ? what : rel, 0);
        free(what);
        return HK_OK;
    }
    for (size_t i = 0; i < c->ngone; i++) { /* a stray entry this (dry) run removes uses nothing */
        size_t gl = strlen(c->gone[i]);
        if (strncmp(path, c->gone[i], gl) == 0 && (path[gl] == '\0' || path[gl] == '/')) return HK_OK;
    }
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (HK_VEC_RESERVE(c->used, c->capused, c->nused + 1)) return HK_ERR_NOMEM;
    /* a name lost to a failed allocation would make its blob look unused: stop instead */
    if (!(c->used[c->nused] = hk__strdup(base))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    c->nused++;
    return HK_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool blob_locked(hk_prune_ctx *c, const char *etag) {
    /* a small blob's writer holds its byte of the repo's shared lock file instead (cache/blobs.c) */
    if (hk__cache_rangelock_busy(c->root, c->repo_dir, etag)) return true;
    char *lp = hk__cache_filelock_path(c->root, c->repo_dir, etag);
    int fd = -1;
    bool busy = false;
    if (lp && hk__path_exists(lp)) {
        if (hk__cache_filelock_try(&fd, lp) == HK_OK && fd < 0) busy = true;
        hk__cache_filelock_release(fd);
    }
    hk_clear_error();
    free(lp);
    return busy;
}

/* The deterministic partial file of a blob, "<etag>.incomplete", which the next pull resumes (the
 * unique "<etag>.<8 hex>.incomplete" ones are never resumed). */
static bool resumable_partial(const char *name, const char *etag) {
    size_t n = strlen(etag);
    return strncmp(name, etag, n) == 0 && strcmp(name + n, ".incomplete") == 0;
}

void hk__cache_prune_blobs(hk_prune_ctx *c) {
    if (c->nused) qsort(c->used, c->nused, sizeof *c->used, cmp_str);
    /* what an unfinished pull will link or resume is not garbage (cache/pull_plan.c) */
    hk_pull_plans plans;
    if (hk__pull_plans_load(&plans, c->root, c->repo_dir) != HK_OK) {
        hk__cache_finding(c->sink, HK_CACHE_FAILED, NULL, c->label, "blobs", NULL,
                          "unused blobs: the plans of its unfinished pulls cannot be read (%s)", hk_last_error());
        hk_clear_error();
        return;
    }
    for (size_t i = 0; i < plans.nstale; i++)
        hk__cache_remove_path(c, plans.stale[i], "plan of a pull not resumed for 7 days", 0);
    char *blobs = hk__path_join(c->repo_dir, "blobs");
    DIR *d = blobs ? opendir(blobs) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.') continue;
        char *path = hk__path_join(blobs, name);
        struct stat st;
        if (!path || lstat(path, &st) != 0) {
            free(path);
            continue;
        }
        char *etag = hk__strndup(name, strcspn(name, "."));
        bool temp = strchr(name, '.') != NULL;
        bool used = !temp && c->nused && bsearch(&name, c->used, c->nused, sizeof *c->used, cmp_str) != NULL;
        bool planned = etag && (!temp || resumable_partial(name, etag)) && hk__pull_plans_name(&plans, etag);
        if (planned && !used) {
            hk__cache_finding(c->sink, HK_CACHE_NOTE, "kept ", c->label, "blobs", name,
                              "%s blobs/%s belongs to an unfinished pull (run it again to finish; pruned once the "
                              "pull is 7 days old)", temp ? "partial file" : "downloaded", name);
        } else if ((temp || !used) && etag && !blob_locked(c, etag)) {
            char *what = hk__asprintf("%s blobs/%s", temp ? "temp file" : "unreferenced blob", name);
            hk__cache_remove_path(c, path, what ? what : name, (uint64_t)st.st_size);
            free(what);
        }
        free(etag);
        free(path);
    }
    if (d) closedir(d);
    free(blobs);
    hk__pull_plans_free(&plans);
}

void hk__prune_ctx_free(hk_prune_ctx *c) {
    for (size_t i = 0; i < c->nused; i++) free(c->used[i]);
    free(c->used);
    c->used = NULL;
    c->nused = c->capused = 0;
    for (size_t i = 0; i < c->ngone; i++) free(c->gone[i]);
    free(c->gone);
    c->gone = NULL;
    c->ngone = c->capgone = 0;
}
