/* Stage, verify, publish: see stage.h. The stage lives inside the repo folder (same file system, so
 * publishing is a rename) but outside snapshots/, where neither huggingface_hub nor a loader looks. */
#include "client/stage.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hk__stage_open(hk_stage *s, const char *cache_root, const char *repo_dir, const char *commit) {
    memset(s, 0, sizeof *s);
    char rnd[9];
    hk__random_hex8(rnd);
    s->cache_root = hk__strdup(cache_root);
    s->repo_dir = hk__strdup(repo_dir);
    s->commit = hk__strdup(commit);
    char *name = hk__asprintf("%s.%s", commit, rnd);
    s->dir = name ? hk__cache_staging_path(repo_dir, name) : NULL;
    free(name);
    if (!s->cache_root || !s->repo_dir || !s->commit || !s->dir) {
        int rc = s->dir || !name ? hk__fail(HK_ERR_NOMEM, "out of memory") : hk_last_error_code();
        hk__stage_discard(s);
        return rc;
    }
    int rc = hk__mkdirs(s->dir, 0777);
    if (rc) hk__stage_discard(s);
    return rc;
}

int hk__stage_link(hk_stage *s, const char *path, const char *etag) {
    /* the snapshot path is made (and checked) first: the staged link gets the same relative target */
    char *final_dir = hk__cache_snapshot_path(s->repo_dir, s->commit, path);
    char *blob = final_dir ? hk__cache_blob_path(s->repo_dir, etag, NULL) : NULL;
    char *link = blob ? hk__asprintf("%s/%s", s->dir, path) : NULL;
    char *dir = link ? hk__strdup(link) : NULL;
    char *target = NULL;
    int rc = HK_OK;
    if (!link || !final_dir || !blob || !dir) {
        rc = blob ? hk__fail(HK_ERR_NOMEM, "out of memory") : hk_last_error_code();
        goto out;
    }
    *strrchr(final_dir, '/') = '\0';
    *strrchr(dir, '/') = '\0';
    if (!(target = hk__relpath(blob, final_dir))) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the folder is made only when the link says it is missing: one syscall for most files */
    if (symlink(target, link) == 0) goto out;
    if (errno == ENOENT) {
        if ((rc = hk__mkdirs(dir, 0777))) goto out;
        if (symlink(target, link) == 0) goto out;
    }
    if (!(errno == EEXIST && unlink(link) == 0 && symlink(target, link) == 0))
        rc = hk__fail(hk__errno_code(errno), "cannot create link %s (staging %s): %s", link, path, strerror(errno));
out:
    free(link);
    free(final_dir);
    free(blob);
    free(dir);
    free(target);
    return rc;
}

char *hk__stage_variant_dir(const hk_stage *s, const char *variant) { return hk__asprintf("%s/build/%s", s->dir, variant); }

/* fsync dir and each folder above it up to and including top (dir lies under top). */
static int sync_parents(const char *dir, const char *top) {
    char *p = hk__strdup(dir);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    size_t tl = strlen(top);
    int rc = HK_OK;
    for (;;) {
        if ((rc = hk__fsync_path(p))) break;
        char *slash = strrchr(p, '/');
        if (strlen(p) <= tl || !slash || slash == p) break;
        *slash = '\0';
    }
    free(p);
    return rc;
}

int hk__stage_publish(hk_stage *s, const char *variant, bool (*complete)(const char *variant_dir, void *ud), void *ud) {
    char *src = hk__stage_variant_dir(s, variant);
    char *build = hk__cache_snapshot_path(s->repo_dir, s->commit, "build");
    char *dst = build ? hk__cache_variant_path(s->repo_dir, s->commit, variant) : NULL;
    char *name = hk__asprintf("publish-%s-%s", s->commit, variant);
    char *lock = name ? hk__cache_filelock_path(s->cache_root, s->repo_dir, name) : NULL;
    char *trash = NULL;
    int fd = -1, rc = HK_OK;
    if (!src || !build || !dst || !lock) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = hk__mkdirs(build, 0777))) goto out;
    /* the staged links durable before the rename below makes them visible */
    if ((rc = hk__fsync_dir_tree(src))) goto out;
    /* one publisher of a variant at a time: a concurrent pull of the same commit either finds this
     * one's copy complete or replaces a broken one, never swaps a good copy out mid-way */
    if ((rc = hk__cache_filelock_wait(&fd, lock, -1))) goto out;
    struct stat st;
    bool there = lstat(dst, &st) == 0;
    if (there && complete && complete(dst, ud)) goto out; /* published by another process meanwhile */
    if (!there && rename(src, dst) != 0) {
        /* made meanwhile: a one-file fetch (metadata.json before a pull) links into it unlocked */
        if (errno != EEXIST && errno != ENOTEMPTY) {
            rc = hk__fail(hk__errno_code(errno), "cannot publish %s: %s", dst, strerror(errno));
            goto out;
        }
        there = true;
    }
    if (there) {
        /* An incomplete copy (often just the metadata.json the arch check fetched) is swapped for
         * this one in one step: a reader of build/<variant>/metadata.json never finds it missing.
         * The old copy lands in the stage, removed with it below. */
        if (hk__rename_exchange(src, dst) == 0) {
            trash = hk__strdup(src);
            if (!trash) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        } else if (errno != EINVAL && errno != ENOSYS) {
            rc = hk__fail(hk__errno_code(errno), "cannot publish %s over its incomplete copy: %s", dst, strerror(errno));
        } else { /* a file system that cannot exchange: move the old copy aside, then rename */
            char rnd[9];
            hk__random_hex8(rnd);
            char tname[32];
            snprintf(tname, sizeof tname, "replaced.%s", rnd);
            if (!(trash = hk__cache_staging_path(s->repo_dir, tname))) rc = hk_last_error_code();
            else if (rename(dst, trash) != 0)
                rc = hk__fail(hk__errno_code(errno), "cannot move the incomplete %s aside: %s", dst, strerror(errno));
            else if (rename(src, dst) != 0)
                rc = hk__fail(hk__errno_code(errno), "cannot publish %s: %s", dst, strerror(errno));
        }
    }
    if (rc == HK_OK) rc = sync_parents(build, s->repo_dir); /* the rename durable before the caller's ref */
    if (trash && hk__rmtree(trash) != HK_OK) {
        hk__log(HK_LOG_WARN, "cannot remove %s: %s", trash, hk_last_error());
        if (rc == HK_OK) hk_clear_error();
    }
out:
    if (fd >= 0) hk__cache_filelock_release(fd);
    free(src);
    free(build);
    free(dst);
    free(name);
    free(lock);
    free(trash);
    return rc;
}

void hk__stage_discard(hk_stage *s) {
    if (s->dir) {
        char *keep = hk_last_error_code() ? hk__strdup(hk_last_error()) : NULL;
        int code = hk_last_error_code();
        if (hk__rmtree(s->dir) != HK_OK) hk__log(HK_LOG_WARN, "cannot remove the staging directory %s", s->dir);
        char *parent = hk__strdup(s->dir);
        if (parent) {
            *strrchr(parent, '/') = '\0';
            rmdir(parent); /* only when empty: another pull may be staging next to this one */
        }
        free(parent);
        if (code) hk__fail(code, "%s", keep ? keep : "");
        else hk_clear_error();
        free(keep);
    }
    free(s->cache_root);
    free(s->repo_dir);
    free(s->commit);
    free(s->dir);
    memset(s, 0, sizeof *s);
}
