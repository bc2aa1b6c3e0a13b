/* hubkern bundle extract: import a bundle into a cache, treating it as hostile (see
 * bundle_internal.h): blobs are streamed to temp files and kept only when their hash equals their
 * name; links and refs are checked, held back, and recorded only once every blob is in place. */
#include "cache/bundle_internal.h"
#include "util/text.h"
#include "util/vec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct pending_link {
    char *repo_dir;   /* absolute */
    char *commit;
    char *path;       /* inside the snapshot */
    char *etag;
} pending_link;

typedef struct pending_ref {
    char *repo_dir;
    char *name;
    char commit[65];
} pending_ref;

typedef struct import_ctx {
    const char *root;
    hk_bundle_report *stats;
    pending_link *links;
    size_t n_links, cap_links;
    pending_ref *refs;
    size_t n_refs, cap_refs;
    char **repos;
    size_t n_repos, cap_repos;
    unsigned char *buf;
} import_ctx;

static bool blob_name_ok(const char *name) {
    size_t n = strlen(name);
    return (n == 40 || n == 64) && hk__is_hex(name, n);
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem) { return hk__vec_reserve(arr, cap, n + 1, elem); }

static int note_repo(import_ctx *cx, const char *repo_dir) {
    for (size_t i = 0; i < cx->n_repos; i++)
        if (strcmp(cx->repos[i], repo_dir) == 0) return HK_OK;
    int rc = grow((void **)&cx->repos, &cx->cap_repos, cx->n_repos, sizeof *cx->repos);
    if (rc) return rc;
    if (!(cx->repos[cx->n_repos] = hk__strdup(repo_dir))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    cx->n_repos++;
    return HK_OK;
}

/* Stream one blob to a temp file while hashing it; keep it only if the hash equals its name. */
static int import_blob(import_ctx *cx, struct archive *ar, struct archive_entry *e, const char *repo_dir,
                       const char *name, const char *entry_path) {
    if (!blob_name_ok(name))
        return hk__fail(HK_ERR_INTEGRITY, "bundle entry %s: blob names must be a sha256 or git sha1 so that they can be verified", entry_path);
    if (!archive_entry_size_is_set(e)) return hk__fail(HK_ERR_PARSE, "bundle entry %s has no size", entry_path);
    uint64_t size = (uint64_t)archive_entry_size(e);
    char *blobs = hk__path_join(repo_dir, "blobs");
    char *final = blobs ? hk__path_join(blobs, name) : NULL;
    char rnd[9];
    hk__random_hex8(rnd);
    char *tmp = final ? hk__asprintf("%s.%s.incomplete", final, rnd) : NULL;
    int rc = tmp ? hk__mkdirs(blobs, 0777) : hk__fail(HK_ERR_NOMEM, "out of memory");
    int fd = -1;
    if (rc == HK_OK) {
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) rc = hk__fail(hk__errno_code(errno), "cannot create %s: %s", tmp, strerror(errno));
    }
    hk_hasher *h = rc == HK_OK ? hk__hasher_new(strlen(name) == 64 ? HK_HASH_SHA256 : HK_HASH_GIT_BLOB, size) : NULL;
    if (rc == HK_OK && !h) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    uint64_t got = 0;
    while (rc == HK_OK) {
        la_ssize_t n = archive_read_data(ar, cx->buf, HK_BUNDLE_CHUNK);
        if (n == 0) break;
        if (n < 0) {
            rc = hk__fail(HK_ERR_PARSE, "bundle entry %s is truncated or corrupt: %s", entry_path, archive_error_string(ar));
            break;
        }
        hk__hasher_update(h, cx->buf, (size_t)n);
        for (la_ssize_t off = 0; off < n && rc == HK_OK;) {
            ssize_t w = write(fd, cx->buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) rc = hk__fail(hk__errno_code(errno), "cannot write %s: %s", tmp, strerror(errno));
            else off += w;
        }
        got += (uint64_t)n;
    }
    if (fd >= 0 && rc == HK_OK && (fsync(fd) != 0 || close(fd) != 0)) {
        rc = hk__fail(hk__errno_code(errno), "cannot write %s: %s", tmp, strerror(errno));
        fd = -1;
    } else if (fd >= 0 && rc == HK_OK) {
        fd = -1;
    }
    if (fd >= 0) close(fd);
    if (rc == HK_OK && got != size)
        rc = hk__fail(HK_ERR_INTEGRITY, "bundle entry %s: expected %llu bytes, read %llu", entry_path,
                     (unsigned long long)size, (unsigned long long)got);
    if (rc == HK_OK) {
        unsigned char d[64];
        char hex[129];
        size_t dn = hk__hasher_finish(h, d);
        h = NULL;
        hk__hex(hex, d, dn);
        if (strcmp(hex, name) != 0)
            rc = hk__fail(HK_ERR_INTEGRITY, "bundle entry %s: content hash %s does not match its name", entry_path, hex);
    }
    hk__hasher_free(h);
    if (rc == HK_OK) {
        if (hk__path_exists(final)) {
            cx->stats->blobs_present++;
            unlink(tmp);
        } else if (rename(tmp, final) != 0) {
            rc = hk__fail(hk__errno_code(errno), "cannot move %s into place: %s", final, strerror(errno));
        } else {
            cx->stats->blobs_added++;
        }
        cx->stats->bytes += got;
    }
    if (rc != HK_OK && tmp) unlink(tmp);
    free(tmp);
    free(final);
    free(blobs);
    return rc;
}

static int import_ref(import_ctx *cx, struct archive *ar, struct archive_entry *e, const char *repo_dir,
                      const char *name, const char *entry_path) {
    /* the name as every revision is named (the cache's ref rule), checked here where it enters */
    if (!hk__revision_valid(name))
        return hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry %s: '%s' is no ref name (the revision rule)", entry_path, name);
    if (archive_entry_size(e) > HK_BUNDLE_REF_MAX) return hk__fail(HK_ERR_PARSE, "bundle entry %s is too large for a ref", entry_path);
    char data[HK_BUNDLE_REF_MAX + 1];
    la_ssize_t n = archive_read_data(ar, data, HK_BUNDLE_REF_MAX);
    if (n < 0) return hk__fail(HK_ERR_PARSE, "bundle entry %s is corrupt: %s", entry_path, archive_error_string(ar));
    char commit[65];
    if (!hk__cache_ref_text_parse(commit, data, (size_t)n))
        return hk__fail(HK_ERR_PARSE, "bundle entry %s does not hold a commit id (and nothing else)", entry_path);
    size_t len = strlen(commit);
    int rc = grow((void **)&cx->refs, &cx->cap_refs, cx->n_refs, sizeof *cx->refs);
    if (rc) return rc;
    pending_ref *r = &cx->refs[cx->n_refs];
    r->repo_dir = hk__strdup(repo_dir);
    r->name = hk__strdup(name);
    memcpy(r->commit, commit, len + 1);
    if (!r->repo_dir || !r->name) {
        free(r->repo_dir);
        free(r->name);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    cx->n_refs++;
    cx->stats->refs++;
    return HK_OK;
}

/* snapshots/<commit>/<path> → ../(depth)blobs/<etag>; anything else is refused. */
static int import_link(import_ctx *cx, struct archive_entry *e, const char *repo_dir, const char *inner,
                       const char *entry_path) {
    const char *target = archive_entry_symlink(e);
    const char *slash = strchr(inner, '/');
    if (!target || !slash || slash == inner)
        return hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry %s: unexpected link", entry_path);
    size_t clen = (size_t)(slash - inner);
    char commit[65];
    if (!(clen == 40 || clen == 64)) return hk__fail(HK_ERR_PARSE, "bundle entry %s: snapshot is not named by a commit", entry_path);
    memcpy(commit, inner, clen);
    commit[clen] = '\0';
    if (!hk__is_hex(commit, clen)) return hk__fail(HK_ERR_PARSE, "bundle entry %s: snapshot is not named by a commit", entry_path);
    const char *path = slash + 1;
    /* expected target: one "../" per directory between the link and the repo folder */
    size_t depth = 2; /* snapshots/<commit>/ */
    for (const char *p = path; *p; p++) if (*p == '/') depth++;
    const char *t = target;
    for (size_t i = 0; i < depth; i++) {
        if (strncmp(t, "../", 3) != 0) return hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry %s: link target '%s' leaves the cache layout", entry_path, target);
        t += 3;
    }
    if (strncmp(t, "blobs/", 6) != 0 || !blob_name_ok(t + 6))
        return hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry %s: link target '%s' does not name a blob", entry_path, target);
    int rc = grow((void **)&cx->links, &cx->cap_links, cx->n_links, sizeof *cx->links);
    if (rc) return rc;
    pending_link *l = &cx->links[cx->n_links];
    l->repo_dir = hk__strdup(repo_dir);
    l->commit = hk__strdup(commit);
    l->path = hk__strdup(path);
    l->etag = hk__strdup(t + 6);
    if (!l->repo_dir || !l->commit || !l->path || !l->etag) {
        free(l->repo_dir); free(l->commit); free(l->path); free(l->etag);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    cx->n_links++;
    return HK_OK;
}

static int import_entry(import_ctx *cx, struct archive *ar, struct archive_entry *e) {
    const char *raw = archive_entry_pathname(e);
    if (!raw) return hk__fail(HK_ERR_PARSE, "bundle entry without a name");
    while (raw[0] == '.' && raw[1] == '/') raw += 2;
    char *p = hk__strdup(raw);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory");
    size_t len = strlen(p);
    while (len > 0 && p[len - 1] == '/') p[--len] = '\0'; /* directories may end in '/' */
    int rc = HK_OK;
    mode_t type = archive_entry_filetype(e);
    if (!hk__path_is_safe_relative(p)) {
        rc = hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry '%s' would leave the cache", raw);
        goto out;
    }
    const char *s1 = strchr(p, '/');
    if (!hk__cache_repo_folder_valid(p, s1 ? (size_t)(s1 - p) : strlen(p))) {
        rc = hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry '%s' is not inside a repo folder of the cache layout", raw);
        goto out;
    }
    if (!s1) { /* the repo folder itself */
        if (type != AE_IFDIR) rc = hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry '%s' must be a directory", raw);
        goto out;
    }
    char *repo_dir = hk__asprintf("%s/%.*s", cx->root, (int)(s1 - p), p);
    if (!repo_dir || (rc = note_repo(cx, repo_dir)) != HK_OK) {
        if (!repo_dir) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        free(repo_dir);
        goto out;
    }
    const char *part = s1 + 1;
    const char *s2 = strchr(part, '/');
    size_t plen = s2 ? (size_t)(s2 - part) : strlen(part);
    const char *inner = s2 ? s2 + 1 : "";
    if (type == AE_IFDIR) {
        /* directories are recreated implicitly; only accept those of the layout */
        if (!((plen == 5 && !strncmp(part, "blobs", 5)) || (plen == 4 && !strncmp(part, "refs", 4)) ||
              (plen == 9 && !strncmp(part, "snapshots", 9))))
            rc = hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry '%s' is not part of the cache layout", raw);
    } else if (plen == 5 && !strncmp(part, "blobs", 5) && type == AE_IFREG && *inner && !strchr(inner, '/')) {
        rc = import_blob(cx, ar, e, repo_dir, inner, raw);
    } else if (plen == 4 && !strncmp(part, "refs", 4) && type == AE_IFREG && *inner) {
        rc = import_ref(cx, ar, e, repo_dir, inner, raw);
    } else if (plen == 9 && !strncmp(part, "snapshots", 9) && type == AE_IFLNK && *inner) {
        rc = import_link(cx, e, repo_dir, inner, raw);
    } else {
        rc = hk__fail(HK_ERR_UNSAFE_PATH, "bundle entry '%s' (%s) is not part of the cache layout", raw,
                     type == AE_IFREG ? "file" : type == AE_IFLNK ? "symlink" : "special file");
    }
    free(repo_dir);
out:
    free(p);
    return rc;
}

/* Apply deferred links and refs once every blob is in place. */
static int import_commit(import_ctx *cx) {
    for (size_t i = 0; i < cx->n_links; i++) {
        pending_link *l = &cx->links[i];
        char *blob = hk__asprintf("%s/blobs/%s", l->repo_dir, l->etag);
        bool ok = blob && hk__path_exists(blob);
        free(blob);
        if (!ok) return hk__fail(HK_ERR_INTEGRITY, "bundle: snapshot file %s/%s points at blob %s, which the bundle does not carry", l->commit, l->path, l->etag);
    }
    for (size_t i = 0; i < cx->n_links; i++) {
        pending_link *l = &cx->links[i];
        int rc = hk_cache_link_snapshot(l->repo_dir, l->commit, l->path, l->etag);
        if (rc) return rc;
        cx->stats->links++;
    }
    for (size_t i = 0; i < cx->n_refs; i++) {
        int rc = hk_cache_write_ref(cx->refs[i].repo_dir, cx->refs[i].name, cx->refs[i].commit);
        if (rc) return rc;
    }
    return HK_OK;
}

static void import_free(import_ctx *cx) {
    for (size_t i = 0; i < cx->n_links; i++) {
        free(cx->links[i].repo_dir);
        free(cx->links[i].commit);
        free(cx->links[i].path);
        free(cx->links[i].etag);
    }
    for (size_t i = 0; i < cx->n_refs; i++) {
        free(cx->refs[i].repo_dir);
        free(cx->refs[i].name);
    }
    for (size_t i = 0; i < cx->n_repos; i++) free(cx->repos[i]);
    free(cx->links);
    free(cx->refs);
    free(cx->repos);
    free(cx->buf);
}

int hk__bundle_run_extract(hk_bundle_report *out_stats, const char *in_path, const char *cache_root) {
    hk_bundle_report local = {0};
    hk_bundle_report *stats = out_stats ? out_stats : &local;
    memset(stats, 0, sizeof *stats);
    if (!in_path || !cache_root) return hk__fail(HK_ERR_INVALID_ARG, "bundle: give an input file and a cache");
    import_ctx cx = {.root = cache_root, .stats = stats, .buf = malloc(HK_BUNDLE_CHUNK)};
    if (!cx.buf) return hk__fail(HK_ERR_NOMEM, "out of memory");
    struct archive *ar = NULL;
    int rc = hk__mkdirs(cache_root, 0777);
    if (rc == HK_OK) rc = hk__bundle_open_reader(&ar, in_path);
    while (rc == HK_OK) {
        struct archive_entry *e;
        int r = archive_read_next_header(ar, &e);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK) {
            rc = hk__fail(HK_ERR_PARSE, "bundle %s is corrupt: %s", in_path, archive_error_string(ar));
            break;
        }
        rc = import_entry(&cx, ar, e);
    }
    if (rc == HK_OK) rc = import_commit(&cx);
    if (rc == HK_OK) rc = hk_cache_ensure_tag(cache_root);
    stats->repos = (uint32_t)cx.n_repos;
    if (ar) archive_read_free(ar);
    import_free(&cx);
    if (rc != HK_OK) hk__fail_context("importing bundle %s (nothing it referenced was recorded in refs/)", in_path);
    return rc;
}
