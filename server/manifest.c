/* The manifest of a commit fetched from upstream: every file of the commit with the etag and size
 * upstream promised, kept at <root>/.hubkern-upstream/<repo folder>/<commit> (outside the repo
 * folders, so the store stays a plain huggingface_hub cache). Listings of such a commit come from
 * it (tree, paths-info, repo info list every file, also those not downloaded yet), and every blob
 * fetched later is checked against it. Written once (temp + rename); a commit never changes, but
 * what upstream claims about it can be a lie: when bytes contradict a claim, the manifest keeps only
 * the entries whose blobs are in the store, under a first line "#partial", and the commit is asked
 * again (upstream_rev.c). A lie is never remembered past the request that caught it. */
#include "server/srv_upstream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_MAX (256u << 20)
#define PARTIAL_MARK "#partial\n"

char *srv_manifest_path(const char *root, const char *repo_dir, const char *commit) {
    const char *folder = strrchr(repo_dir, '/');
    folder = folder ? folder + 1 : repo_dir;
    if (!hk__is_commit_id(commit)) return NULL;
    return hk__asprintf("%s/.hubkern-upstream/%s/%s", root, folder, commit);
}

bool srv_manifest_exists(const char *root, const char *repo_dir, const char *commit) {
    char *p = srv_manifest_path(root, repo_dir, commit);
    bool ok = p && hk__path_exists(p);
    free(p);
    return ok;
}

int srv_manifest_write(const char *root, const char *repo_dir, const char *commit, const srv_listing *l) {
    char *p = srv_manifest_path(root, repo_dir, commit);
    if (!p) return hk__fail(HK_ERR_INVALID_ARG, "bad commit id");
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < l->n; i++) {
        const srv_sentry *e = &l->v[i];
        if (!e->is_dir)
            hk__sb_printf(&sb, "%s %llu %c %s\n", e->etag, (unsigned long long)e->size, e->lfs ? 'L' : 'G', e->path);
    }
    char *dir = hk__strndup(p, (size_t)(strrchr(p, '/') - p));
    int rc = dir ? hk__mkdirs(dir, 0755) : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__write_file_atomic(p, sb.data ? sb.data : "", sb.len);
    free(dir);
    free(p);
    hk__sb_free(&sb);
    return rc;
}

int srv_manifest_read(srv_listing *l, const char *root, const char *repo_dir, const char *commit) {
    char *p = srv_manifest_path(root, repo_dir, commit);
    if (!p || !hk__path_exists(p)) {
        free(p);
        return hk__fail(HK_ERR_NOT_FOUND, "no manifest");
    }
    char *data = NULL;
    size_t len = 0;
    int rc = hk__read_file(&data, &len, p, MANIFEST_MAX);
    free(p);
    for (char *line = data; rc == HK_OK && line && *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        if (*line == '#') { /* PARTIAL_MARK */
            line = nl + 1;
            continue;
        }
        char etag[65];
        unsigned long long size;
        char kind;
        int used = 0;
        if (sscanf(line, "%64s %llu %c %n", etag, &size, &kind, &used) == 3 && used > 0 &&
            hk__path_is_safe_relative(line + used) && hk__is_hex(etag, kind == 'L' ? 64 : 40)) {
            char *path = hk__strdup(line + used);
            rc = path ? srv_listing_add_file(l, path, size, etag, kind == 'L') : hk__fail(HK_ERR_NOMEM, "out of memory");
            if (rc) free(path);
        }
        line = nl + 1;
    }
    free(data);
    return rc;
}

/* The "#partial" answer per manifest, kept against the file's identity: a manifest is only ever
 * replaced by rename (written, or rejected: hk__write_file_atomic), so the same device, inode, size
 * and mtime mean the same first line. A warm edge asks this on every request by commit; a hit costs
 * one stat() instead of open, fstat, read and close. */
#define PARTIAL_MEMO 64
static struct {
    char *path;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
    bool partial;
} g_partial[PARTIAL_MEMO];
static pthread_mutex_t g_partial_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t partial_slot(const char *p) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: the slot only; the path itself is compared */
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (size_t)(h % PARTIAL_MEMO);
}

static bool same_file(size_t i, const struct stat *st) {
    return g_partial[i].dev == st->st_dev && g_partial[i].ino == st->st_ino && g_partial[i].size == st->st_size &&
           g_partial[i].mtim.tv_sec == st->st_mtim.tv_sec && g_partial[i].mtim.tv_nsec == st->st_mtim.tv_nsec;
}

bool srv_manifest_partial(const char *root, const char *repo_dir, const char *commit) {
    char *p = srv_manifest_path(root, repo_dir, commit);
    struct stat st;
    if (!p || stat(p, &st) != 0) {
        free(p);
        return false;
    }
    size_t i = partial_slot(p);
    pthread_mutex_lock(&g_partial_mu);
    bool known = g_partial[i].path && strcmp(g_partial[i].path, p) == 0 && same_file(i, &st);
    bool partial = known && g_partial[i].partial;
    pthread_mutex_unlock(&g_partial_mu);
    if (known) {
        free(p);
        return partial;
    }
    /* read what is there now, and remember it under the identity of what was read */
    FILE *f = fopen(p, "r");
    char head[16] = "";
    partial = f && fgets(head, sizeof head, f) && strcmp(head, PARTIAL_MARK) == 0;
    struct stat fst;
    if (f && fstat(fileno(f), &fst) == 0) {
        pthread_mutex_lock(&g_partial_mu);
        if (!g_partial[i].path || strcmp(g_partial[i].path, p) != 0) {
            free(g_partial[i].path);
            g_partial[i].path = p; /* the memo's now */
            p = NULL;
        }
        g_partial[i].dev = fst.st_dev;
        g_partial[i].ino = fst.st_ino;
        g_partial[i].size = fst.st_size;
        g_partial[i].mtim = fst.st_mtim;
        g_partial[i].partial = partial;
        pthread_mutex_unlock(&g_partial_mu);
    }
    if (f) fclose(f);
    free(p);
    return partial;
}

int srv_manifest_reject(const char *root, const char *repo_dir, const char *commit) {
    srv_listing l;
    memset(&l, 0, sizeof l);
    int rc = srv_manifest_read(&l, root, repo_dir, commit);
    char *p = rc == HK_OK ? srv_manifest_path(root, repo_dir, commit) : NULL;
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, PARTIAL_MARK);
    for (size_t i = 0; rc == HK_OK && i < l.n; i++) {
        const srv_sentry *e = &l.v[i];
        char *blob = hk_cache_blob_path(repo_dir, e->etag);
        struct stat st;
        if (blob && lstat(blob, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == e->size)
            hk__sb_printf(&sb, "%s %llu %c %s\n", e->etag, (unsigned long long)e->size, e->lfs ? 'L' : 'G', e->path);
        if (!blob) hk_clear_error(); /* a name no blob can have: not kept */
        hk_free(blob);
    }
    if (rc == HK_OK) rc = p ? hk__write_file_atomic(p, sb.data, sb.len) : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(p);
    hk__sb_free(&sb);
    srv_listing_free(&l);
    return rc;
}
