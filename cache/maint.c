/* Cache maintenance behind `hubkern cache ls | verify | prune | rm`. Works on any
 * huggingface_hub-layout cache (kernels--, models--, datasets--, spaces-- folders). */
#include "cache/cache.h"
#include "client/client.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void emit(hk_cache_line_fn fn, void *ud, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emit(hk_cache_line_fn fn, void *ud, const char *fmt, ...) {
    if (!fn) return;
    va_list ap;
    va_start(ap, fmt);
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (sb.data) fn(ud, sb.data);
    hk_sb_free(&sb);
}

/* "kernels--org--name" -> type + "org/name". */
static bool parse_folder(const char *name, hk_repo_type *type, char **repo_id) {
    static const char *const pfx[] = {"models--", "datasets--", "spaces--", "kernels--"};
    for (int t = 0; t < 4; t++) {
        size_t pl = strlen(pfx[t]);
        if (strncmp(name, pfx[t], pl) != 0 || !name[pl]) continue;
        hk_strbuf sb;
        hk_sb_init(&sb);
        for (const char *p = name + pl; *p;) {
            const char *e = strstr(p, "--");
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (sb.len) hk_sb_append(&sb, "/");
            hk_sb_append_n(&sb, p, n);
            p += n;
            if (*p) p += 2;
        }
        *type = (hk_repo_type)t;
        *repo_id = hk_sb_steal(&sb);
        return *repo_id != NULL;
    }
    return false;
}

typedef struct repo_it {
    char **dirs;
    char **ids;
    hk_repo_type *types;
    size_t n;
} repo_it;

static void repos_free(repo_it *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->dirs[i]);
        free(r->ids[i]);
    }
    free(r->dirs);
    free(r->ids);
    free(r->types);
}

static int cmp_idx_dirs(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_repos(repo_it *out, const char *root, const char *repo_id) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return HK_OK;
        return hk_fail(hk_errno_code(errno), "cannot read cache %s: %s", root, strerror(errno));
    }
    size_t cap = 0;
    struct dirent *de;
    char **names = NULL;
    size_t nn = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char **t = realloc(names, (nn + 1) * sizeof *t);
        if (!t) break;
        names = t;
        names[nn++] = hk_strdup(de->d_name);
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp_idx_dirs);
    for (size_t k = 0; k < nn; k++) {
        hk_repo_type type;
        char *id = NULL;
        if (!names[k] || !parse_folder(names[k], &type, &id)) continue;
        char *dir = hk_path_join(root, names[k]);
        if (!dir || !hk_is_dir(dir) || (repo_id && strcmp(repo_id, id) != 0)) {
            free(dir);
            free(id);
            continue;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->dirs = realloc(out->dirs, cap * sizeof(char *));
            out->ids = realloc(out->ids, cap * sizeof(char *));
            out->types = realloc(out->types, cap * sizeof(hk_repo_type));
            if (!out->dirs || !out->ids || !out->types) return hk_fail(HK_ERR_NOMEM, "out of memory");
        }
        out->dirs[out->n] = dir;
        out->ids[out->n] = id;
        out->types[out->n] = type;
        out->n++;
    }
    for (size_t k = 0; k < nn; k++) free(names[k]);
    free(names);
    return HK_OK;
}

/* Visit every entry below dir (depth-first, no symlink following). rel is relative to dir. */
typedef int (*visit_fn)(void *ud, const char *path, const char *rel, const struct stat *st);

static int walk(const char *dir, const char *rel, visit_fn fn, void *ud, bool post_dirs) {
    char *path = rel[0] ? hk_path_join(dir, rel) : hk_strdup(dir);
    if (!path) return hk_fail(HK_ERR_NOMEM, "out of memory");
    DIR *d = opendir(path);
    if (!d) {
        free(path);
        return HK_OK;
    }
    int rc = HK_OK;
    struct dirent *de;
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *crel = rel[0] ? hk_asprintf("%s/%s", rel, de->d_name) : hk_strdup(de->d_name);
        char *cpath = crel ? hk_path_join(dir, crel) : NULL;
        struct stat st;
        if (!cpath) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        else if (lstat(cpath, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                if (!post_dirs) rc = fn(ud, cpath, crel, &st);
                if (rc == HK_OK) rc = walk(dir, crel, fn, ud, post_dirs);
                if (rc == HK_OK && post_dirs) rc = fn(ud, cpath, crel, &st);
            } else {
                rc = fn(ud, cpath, crel, &st);
            }
        }
        free(cpath);
        free(crel);
    }
    closedir(d);
    free(path);
    return rc;
}

static uint64_t dir_bytes(const char *dir) {
    uint64_t total = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char *p = hk_path_join(dir, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
        free(p);
    }
    if (d) closedir(d);
    return total;
}

/* ---- ls -------------------------------------------------------------------------------------- */
int hk_cache_ls(hk_cache_report *rep, const char *root, const char *repo_id, bool json, hk_cache_line_fn fn, void *ud) {
    memset(rep, 0, sizeof *rep);
    repo_it repos;
    int rc = list_repos(&repos, root, repo_id);
    if (rc) return rc;
    cJSON *jroot = json ? cJSON_CreateObject() : NULL;
    cJSON *jrepos = json ? cJSON_AddArrayToObject(jroot, "repos") : NULL;
    if (json) cJSON_AddStringToObject(jroot, "cache", root);
    for (size_t i = 0; i < repos.n; i++) {
        const char *dir = repos.dirs[i];
        char *blobs = hk_path_join(dir, "blobs");
        uint64_t bytes = blobs ? dir_bytes(blobs) : 0;
        free(blobs);
        rep->repos++;
        rep->bytes += bytes;
        cJSON *jr = json ? cJSON_CreateObject() : NULL;
        if (jr) {
            cJSON_AddStringToObject(jr, "type", hk_repo_type_plural(repos.types[i]));
            cJSON_AddStringToObject(jr, "repo_id", repos.ids[i]);
            cJSON_AddStringToObject(jr, "path", dir);
            cJSON_AddNumberToObject(jr, "size", (double)bytes);
            cJSON_AddItemToArray(jrepos, jr);
        }
        hk_strbuf line;
        hk_sb_init(&line);
        hk_sb_printf(&line, "%s/%s  %.1f MB", hk_repo_type_plural(repos.types[i]), repos.ids[i], bytes / 1e6);
        /* refs */
        cJSON *jrefs = jr ? cJSON_AddObjectToObject(jr, "refs") : NULL;
        char *refsdir = hk_path_join(dir, "refs");
        DIR *d = refsdir ? opendir(refsdir) : NULL;
        struct dirent *de;
        hk_sb_append(&line, "  refs:");
        size_t nrefs = 0;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            char commit[65];
            if (hk_cache_read_ref(commit, dir, de->d_name) != HK_OK) {
                hk_clear_error();
                continue;
            }
            hk_sb_printf(&line, " %s=%.8s", de->d_name, commit);
            if (jrefs) cJSON_AddStringToObject(jrefs, de->d_name, commit);
            nrefs++;
            rep->refs++;
        }
        if (!nrefs) hk_sb_append(&line, " none");
        if (d) closedir(d);
        free(refsdir);
        /* snapshots */
        cJSON *jsnaps = jr ? cJSON_AddArrayToObject(jr, "snapshots") : NULL;
        char *snapdir = hk_path_join(dir, "snapshots");
        d = snapdir ? opendir(snapdir) : NULL;
        hk_sb_append(&line, "  snapshots:");
        size_t nsnap = 0;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            hk_sb_printf(&line, " %.8s", de->d_name);
            if (jsnaps) {
                cJSON *js = cJSON_CreateObject();
                cJSON_AddStringToObject(js, "commit", de->d_name);
                char *b = hk_asprintf("%s/%s/build", snapdir, de->d_name);
                cJSON *jv = cJSON_AddArrayToObject(js, "variants");
                DIR *vd = b ? opendir(b) : NULL;
                struct dirent *ve;
                while (vd && (ve = readdir(vd)) != NULL)
                    if (ve->d_name[0] != '.') cJSON_AddItemToArray(jv, cJSON_CreateString(ve->d_name));
                if (vd) closedir(vd);
                free(b);
                cJSON_AddItemToArray(jsnaps, js);
            }
            nsnap++;
            rep->snapshots++;
        }
        if (!nsnap) hk_sb_append(&line, " none");
        if (d) closedir(d);
        free(snapdir);
        if (!json && line.data) emit(fn, ud, "%s", line.data);
        hk_sb_free(&line);
    }
    if (json) {
        char *s = cJSON_PrintUnformatted(jroot);
        if (s) emit(fn, ud, "%s", s);
        free(s);
        cJSON_Delete(jroot);
    }
    repos_free(&repos);
    return HK_OK;
}

/* ---- verify ---------------------------------------------------------------------------------- */
typedef struct vctx {
    hk_cache_report *rep;
    const char *repo_dir;
    const char *label;
    hk_cache_line_fn fn;
    void *ud;
    const char *root;
} vctx;

static int verify_blob(void *p, const char *path, const char *rel, const struct stat *st) {
    vctx *c = p;
    if (S_ISDIR(st->st_mode)) return HK_OK;
    if (hk_str_ends_with(rel, ".incomplete") || hk_str_ends_with(rel, ".tmp")) {
        emit(c->fn, c->ud, "note: %s: leftover temp file blobs/%s (prune removes it)", c->label, rel);
        return HK_OK;
    }
    if (!S_ISREG(st->st_mode)) {
        emit(c->fn, c->ud, "PROBLEM: %s: blobs/%s is not a regular file", c->label, rel);
        c->rep->problems++;
        return HK_OK;
    }
    c->rep->blobs++;
    c->rep->bytes += (uint64_t)st->st_size;
    char actual[129];
    bool checkable = false;
    if (hk_cache_hash_blob(actual, &checkable, path, rel) != HK_OK) {
        emit(c->fn, c->ud, "PROBLEM: %s: cannot read blobs/%s: %s", c->label, rel, hk_last_error());
        c->rep->problems++;
        hk_clear_error();
    } else if (!checkable) {
        emit(c->fn, c->ud, "note: %s: blobs/%s is not named by a content hash; not verifiable", c->label, rel);
    } else if (strcmp(actual, rel) != 0) {
        emit(c->fn, c->ud, "PROBLEM: %s: blobs/%s content hash is %s (corrupt blob; `hubkern cache rm` and pull again)",
             c->label, rel, actual);
        c->rep->problems++;
    }
    return HK_OK;
}

static int verify_link(void *p, const char *path, const char *rel, const struct stat *st) {
    vctx *c = p;
    if (S_ISDIR(st->st_mode)) return HK_OK;
    if (!strchr(rel, '/')) {
        emit(c->fn, c->ud, "PROBLEM: %s: snapshots/%s is a file directly inside snapshots/", c->label, rel);
        c->rep->problems++;
        return HK_OK;
    }
    if (S_ISREG(st->st_mode)) {
        if (hk_str_ends_with(rel, ".tmp")) emit(c->fn, c->ud, "note: %s: leftover temp file snapshots/%s", c->label, rel);
        return HK_OK; /* no-symlink ("degraded") caches hold plain files */
    }
    if (!S_ISLNK(st->st_mode)) return HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) {
        emit(c->fn, c->ud, "PROBLEM: %s: cannot read link snapshots/%s", c->label, rel);
        c->rep->problems++;
        return HK_OK;
    }
    target[n] = '\0';
    if (target[0] == '/') {
        emit(c->fn, c->ud, "PROBLEM: %s: snapshots/%s is an absolute link (%s); caches must use relative links", c->label,
             rel, target);
        c->rep->problems++;
        return HK_OK;
    }
    char resolved[PATH_MAX], blobs[PATH_MAX];
    char *bdir = hk_path_join(c->repo_dir, "blobs");
    bool inside = false;
    if (bdir && realpath(bdir, blobs) && realpath(path, resolved)) {
        size_t bl = strlen(blobs);
        inside = strncmp(resolved, blobs, bl) == 0 && resolved[bl] == '/' && !strchr(resolved + bl + 1, '/');
    }
    free(bdir);
    struct stat ts;
    if (stat(path, &ts) != 0) {
        emit(c->fn, c->ud, "PROBLEM: %s: snapshots/%s -> %s: Blob missing", c->label, rel, target);
        c->rep->problems++;
    } else if (!inside) {
        emit(c->fn, c->ud, "PROBLEM: %s: snapshots/%s -> %s points outside blobs/", c->label, rel, target);
        c->rep->problems++;
    }
    return HK_OK;
}

/* digest of complete variants; incomplete ones (interrupted pulls) are only noted */
static void verify_variants(vctx *c, const char *snapdir, const char *commit) {
    char *build = hk_asprintf("%s/%s/build", snapdir, commit);
    DIR *d = build ? opendir(build) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *vdir = hk_path_join(build, de->d_name);
        char *meta = vdir ? hk_path_join(vdir, "metadata.json") : NULL;
        char *text = NULL;
        if (meta && hk_read_file(&text, NULL, meta, 16u << 20) == HK_OK) {
            cJSON *j = cJSON_Parse(text);
            cJSON *files = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "digest"), "files");
            size_t missing = 0;
            cJSON *f;
            cJSON_ArrayForEach(f, files) {
                char *fp = hk_path_join(vdir, f->string);
                struct stat st;
                if (!fp || !hk_path_is_safe_relative(f->string) || stat(fp, &st) != 0) missing++;
                free(fp);
            }
            if (missing) {
                emit(c->fn, c->ud, "note: %s: variant %s at %.8s is incomplete (%zu file%s not pulled)", c->label,
                     de->d_name, commit, missing, missing == 1 ? "" : "s");
            } else if (files) {
                bool has = false;
                /* always every byte: receipts are neither read nor written here */
                if (hk_verify_variant_digest(&has, NULL, vdir) != HK_OK) {
                    emit(c->fn, c->ud, "PROBLEM: %s: %s", c->label, hk_last_error());
                    c->rep->problems++;
                    /* and a pull must not skip these files on the strength of an older receipt */
                    char *rp = hk_receipt_path(c->root, c->repo_dir, commit, de->d_name);
                    hk_receipt_remove(rp);
                    free(rp);
                }
            }
            cJSON_Delete(j);
        }
        hk_clear_error();
        free(text);
        free(meta);
        free(vdir);
    }
    if (d) closedir(d);
    free(build);
}

int hk_cache_verify(hk_cache_report *rep, const char *root, const char *repo_id, hk_cache_line_fn fn, void *ud) {
    memset(rep, 0, sizeof *rep);
    repo_it repos;
    int rc = list_repos(&repos, root, repo_id);
    if (rc) return rc;
    if (repo_id && repos.n == 0) {
        repos_free(&repos);
        return hk_fail(HK_ERR_NOT_FOUND, "%s is not in the cache %s", repo_id, root);
    }
    for (size_t i = 0; i < repos.n && rc == HK_OK; i++) {
        const char *dir = repos.dirs[i];
        char *label = hk_asprintf("%s/%s", hk_repo_type_plural(repos.types[i]), repos.ids[i]);
        vctx c = {rep, dir, label ? label : repos.ids[i], fn, ud, root};
        rep->repos++;
        char *blobs = hk_path_join(dir, "blobs");
        char *snaps = hk_path_join(dir, "snapshots");
        if (!hk_is_dir(snaps)) {
            emit(fn, ud, "PROBLEM: %s: no snapshots/ directory", c.label);
            rep->problems++;
        }
        if (blobs) rc = walk(blobs, "", verify_blob, &c, false);
        if (rc == HK_OK && snaps) rc = walk(snaps, "", verify_link, &c, false);
        /* refs */
        char *refs = hk_path_join(dir, "refs");
        DIR *d = NULL;
        struct dirent *de;
        d = snaps ? opendir(snaps) : NULL;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            rep->snapshots++;
            verify_variants(&c, snaps, de->d_name);
        }
        if (d) closedir(d);
        if (refs) {
            DIR *rd = opendir(refs);
            while (rd && (de = readdir(rd)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char *rp = hk_path_join(refs, de->d_name);
                if (rp && hk_is_dir(rp)) {
                    free(rp);
                    continue; /* nested refs (refs/pr/N) are read by Python the same way; skip */
                }
                char *data = NULL;
                size_t len = 0;
                rep->refs++;
                if (hk_str_ends_with(de->d_name, ".tmp")) {
                    emit(fn, ud, "note: %s: leftover temp file refs/%s", c.label, de->d_name);
                } else if (!rp || hk_read_file(&data, &len, rp, 256) != HK_OK) {
                    emit(fn, ud, "PROBLEM: %s: cannot read refs/%s", c.label, de->d_name);
                    rep->problems++;
                } else if (!((len == 40 || len == 64) && hk_is_hex(data, len))) {
                    emit(fn, ud, "PROBLEM: %s: refs/%s does not hold exactly a commit id (Python would misread it)",
                         c.label, de->d_name);
                    rep->problems++;
                } else {
                    char *sd = hk_asprintf("%s/%s", snaps, data);
                    if (!sd || !hk_is_dir(sd)) {
                        emit(fn, ud, "PROBLEM: %s: refs/%s names %s but snapshots/%s is missing", c.label, de->d_name,
                             data, data);
                        rep->problems++;
                    }
                    free(sd);
                }
                hk_clear_error();
                free(data);
                free(rp);
            }
            if (rd) closedir(rd);
        }
        free(refs);
        free(blobs);
        free(snaps);
        free(label);
    }
    repos_free(&repos);
    return rc;
}

/* ---- prune / rm ------------------------------------------------------------------------------ */
typedef struct pctx {
    hk_cache_report *rep;
    const char *root;
    const char *repo_dir;
    const char *label;
    bool dry_run;
    hk_cache_line_fn fn;
    void *ud;
    char **used;      /* blob names some snapshot link points to */
    size_t nused, capused;
    int rc;
} pctx;

static void remove_path(pctx *c, const char *path, const char *what, uint64_t bytes) {
    emit(c->fn, c->ud, "%s%s: %s", c->dry_run ? "would remove " : "removed ", c->label, what);
    c->rep->removed++;
    c->rep->removed_bytes += bytes;
    if (!c->dry_run && hk_rmtree(path) != HK_OK) {
        emit(c->fn, c->ud, "cannot remove %s: %s", path, hk_last_error());
        hk_clear_error();
    }
}

static int collect_used(void *p, const char *path, const char *rel, const struct stat *st) {
    pctx *c = p;
    if (!S_ISLNK(st->st_mode)) return HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return HK_OK;
    target[n] = '\0';
    struct stat ts;
    if (stat(path, &ts) != 0) { /* broken link */
        char *what = hk_asprintf("broken link snapshots/%s", rel);
        remove_path(c, path, what ? what : rel, 0);
        free(what);
        return HK_OK;
    }
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (c->nused == c->capused) {
        c->capused = c->capused ? c->capused * 2 : 64;
        char **t = realloc(c->used, c->capused * sizeof *t);
        if (!t) return hk_fail(HK_ERR_NOMEM, "out of memory");
        c->used = t;
    }
    c->used[c->nused++] = hk_strdup(base);
    return HK_OK;
}

static int prune_snapshot_tmp(void *p, const char *path, const char *rel, const struct stat *st) {
    pctx *c = p;
    if (S_ISDIR(st->st_mode)) {
        /* post-order: remove empty directories below a commit (never the commit dir itself) */
        if (strchr(rel, '/') && rmdir(path) == 0) emit(c->fn, c->ud, "removed %s: empty directory snapshots/%s", c->label, rel);
        return HK_OK;
    }
    if (S_ISLNK(st->st_mode) && hk_str_ends_with(rel, ".tmp")) {
        char *what = hk_asprintf("leftover temp link snapshots/%s", rel);
        remove_path(c, path, what ? what : rel, 0);
        free(what);
    }
    return HK_OK;
}

static bool blob_locked(pctx *c, const char *etag) {
    char *lp = hk_cache_lock_path(c->root, c->repo_dir, etag);
    int fd = -1;
    bool busy = false;
    if (lp && hk_path_exists(lp)) {
        if (hk_cache_lock_try(&fd, lp) == HK_OK && fd < 0) busy = true;
        hk_cache_unlock(fd);
    }
    hk_clear_error();
    free(lp);
    return busy;
}

static void prune_blobs(pctx *c) {
    char *blobs = hk_path_join(c->repo_dir, "blobs");
    DIR *d = blobs ? opendir(blobs) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (name[0] == '.') continue;
        char *path = hk_path_join(blobs, name);
        struct stat st;
        if (!path || lstat(path, &st) != 0) {
            free(path);
            continue;
        }
        char *etag = hk_strndup(name, strcspn(name, "."));
        bool temp = strchr(name, '.') != NULL;
        bool used = false;
        for (size_t i = 0; !temp && i < c->nused; i++) used |= strcmp(c->used[i], name) == 0;
        if ((temp || !used) && etag && !blob_locked(c, etag)) {
            char *what = hk_asprintf("%s blobs/%s", temp ? "temp file" : "unreferenced blob", name);
            remove_path(c, path, what ? what : name, (uint64_t)st.st_size);
            free(what);
        }
        free(etag);
        free(path);
    }
    if (d) closedir(d);
    free(blobs);
}

static void prune_refs_tmp(pctx *c) {
    char *refs = hk_path_join(c->repo_dir, "refs");
    DIR *d = refs ? opendir(refs) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!hk_str_ends_with(de->d_name, ".tmp")) continue;
        char *p = hk_path_join(refs, de->d_name);
        char *what = hk_asprintf("leftover temp file refs/%s", de->d_name);
        if (p) remove_path(c, p, what ? what : de->d_name, 0);
        free(what);
        free(p);
    }
    if (d) closedir(d);
    free(refs);
}

/* commits named by some ref */
static bool commit_referenced(const char *repo_dir, const char *commit) {
    char *refs = hk_path_join(repo_dir, "refs");
    DIR *d = refs ? opendir(refs) : NULL;
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char c[65];
        if (hk_cache_read_ref(c, repo_dir, de->d_name) == HK_OK && strcmp(c, commit) == 0) found = true;
        hk_clear_error();
    }
    if (d) closedir(d);
    free(refs);
    return found;
}

static void pctx_free(pctx *c) {
    for (size_t i = 0; i < c->nused; i++) free(c->used[i]);
    free(c->used);
    c->used = NULL;
    c->nused = c->capused = 0;
}

/* ---- verification receipts of what rm / prune remove ----------------------------------------- */
static const char *folder_of_dir(const char *repo_dir) {
    const char *f = strrchr(repo_dir, '/');
    return f ? f + 1 : repo_dir;
}

/* rm: the receipts of the whole repo (commit NULL) or of one commit, wherever they are kept. Other
 * repos' receipts and huggingface_hub's lock files beside them are left alone. Returns how many
 * receipt folders matched (removed, or listed by a dry run). */
static size_t remove_receipts(pctx *c, const char *commit, bool no_snapshot) {
    char *dirs[2];
    size_t n = hk_receipt_repo_dirs(dirs, c->root, folder_of_dir(c->repo_dir)), found = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = commit ? hk_path_join(dirs[i], commit) : hk_strdup(dirs[i]);
        if (p && hk_is_dir(p)) {
            char *what = commit ? hk_asprintf("verification receipts of %s%s", commit,
                                              no_snapshot ? " (its snapshot was not in the cache)" : "")
                                : NULL;
            remove_path(c, p, what ? what : "verification receipts", 0);
            free(what);
            found++;
        }
        free(p);
        free(dirs[i]);
    }
    if (!commit && !c->dry_run) { /* .locks/<folder> once empty (never when lock files remain) */
        char *ld = hk_asprintf("%s/.locks/%s", c->root, folder_of_dir(c->repo_dir));
        if (ld) rmdir(ld);
        free(ld);
    }
    return found;
}

/* A temp file of hk_write_file_atomic writing a receipt: "<variant>.json.<8 lowercase hex>.tmp". */
static bool receipt_temp_name(const char *name) {
    static const char tail[] = ".json.01234567.tmp";
    size_t n = strlen(name), t = sizeof tail - 1;
    if (n <= t) return false; /* a variant name comes first */
    const char *p = name + n - t;
    if (strncmp(p, ".json.", 6) != 0 || strcmp(p + 14, ".tmp") != 0) return false;
    for (int i = 6; i < 14; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return false;
    return true;
}

/* A writer creates, fills, fsyncs and renames its temp file within moments: one older than this
 * was left by a writer that died (killed, crashed, disk full); a younger one may be live. */
#define HK_RECEIPT_TEMP_MIN_AGE_S 60

/* prune: leftover temp files of the receipt writer in one commit's receipt folder */
static void prune_receipt_temps(pctx *c, const char *rdir, const char *commit) {
    DIR *d = opendir(rdir);
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d)) != NULL) {
        if (!receipt_temp_name(de->d_name)) continue;
        char *p = hk_path_join(rdir, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > HK_RECEIPT_TEMP_MIN_AGE_S) {
            char *what = hk_asprintf("leftover temp file of a verification receipt %s/%s", commit, de->d_name);
            remove_path(c, p, what ? what : de->d_name, (uint64_t)st.st_size);
            free(what);
        }
        free(p);
    }
    if (d) closedir(d);
}

/* prune: receipts of commits whose snapshot is gone (or, with detached, goes now), of variants
 * no longer in their snapshot, and temp files a killed receipt writer left behind. */
static void prune_receipts(pctx *c, bool detached) {
    char *dirs[2];
    size_t n = hk_receipt_repo_dirs(dirs, c->root, folder_of_dir(c->repo_dir));
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            const char *commit = de->d_name;
            if (commit[0] == '.') continue;
            char *rdir = hk_path_join(dirs[i], commit);
            char *snap = hk_asprintf("%s/snapshots/%s", c->repo_dir, commit);
            if (!rdir || !snap || !hk_is_dir(rdir)) {
                free(rdir);
                free(snap);
                continue;
            }
            if (!hk_is_dir(snap) || (detached && !commit_referenced(c->repo_dir, commit))) {
                char *what = hk_asprintf("verification receipts of %s (no snapshot)", commit);
                remove_path(c, rdir, what ? what : commit, 0);
                free(what);
            } else {
                DIR *vd = opendir(rdir);
                struct dirent *ve;
                while (vd && (ve = readdir(vd)) != NULL) {
                    if (ve->d_name[0] == '.' || !hk_str_ends_with(ve->d_name, ".json")) continue;
                    char *variant = hk_strndup(ve->d_name, strlen(ve->d_name) - 5);
                    char *vdir = variant ? hk_asprintf("%s/build/%s", snap, variant) : NULL;
                    char *rp = hk_path_join(rdir, ve->d_name);
                    if (vdir && rp && !hk_is_dir(vdir)) {
                        char *what = hk_asprintf("verification receipt of %s/%s (no such variant)", commit, variant);
                        remove_path(c, rp, what ? what : ve->d_name, 0);
                        free(what);
                    }
                    free(rp);
                    free(vdir);
                    free(variant);
                }
                if (vd) closedir(vd);
                prune_receipt_temps(c, rdir, commit);
            }
            free(snap);
            free(rdir);
        }
        if (d) closedir(d);
        free(dirs[i]);
    }
}

/* prune: receipts left of repo folders no longer in the cache (removed by hand, by huggingface_hub's
 * `hf cache rm`, or by an older hubkern), in .locks/ and in HUBKERN_RECEIPTS_DIR. */
static void prune_orphan_receipts(hk_cache_report *rep, const char *root, bool dry_run, hk_cache_line_fn fn,
                                  void *ud) {
    char *bases[2] = {hk_path_join(root, ".locks"), hk_receipt_outside_root_dir(root)};
    for (int b = 0; b < 2; b++) {
        DIR *d = bases[b] ? opendir(bases[b]) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            const char *folder = de->d_name;
            if (folder[0] == '.') continue;
            char *repo_dir = hk_path_join(root, folder);
            char *rdir = b == 0 ? hk_asprintf("%s/%s/hubkern-receipts", bases[b], folder) : hk_path_join(bases[b], folder);
            if (repo_dir && rdir && hk_is_dir(rdir) && !hk_is_dir(repo_dir)) {
                pctx c = {rep, root, repo_dir, folder, dry_run, fn, ud, NULL, 0, 0, HK_OK};
                remove_path(&c, rdir, "verification receipts (repo not in the cache)", 0);
            }
            free(rdir);
            free(repo_dir);
        }
        if (d) closedir(d);
        free(bases[b]);
    }
}

static int prune_repo(pctx *c, bool detached) {
    char *snaps = hk_path_join(c->repo_dir, "snapshots");
    if (!snaps) return hk_fail(HK_ERR_NOMEM, "out of memory");
    if (detached) {
        DIR *d = opendir(snaps);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.' || commit_referenced(c->repo_dir, de->d_name)) continue;
            char *p = hk_path_join(snaps, de->d_name);
            char *what = hk_asprintf("snapshot %s (no ref names it)", de->d_name);
            if (p) remove_path(c, p, what ? what : de->d_name, 0);
            free(what);
            free(p);
        }
        if (d) closedir(d);
    }
    prune_receipts(c, detached);
    int rc = walk(snaps, "", prune_snapshot_tmp, c, true);
    if (rc == HK_OK) rc = walk(snaps, "", collect_used, c, false);
    free(snaps);
    if (rc) return rc;
    prune_blobs(c);
    prune_refs_tmp(c);
    pctx_free(c);
    return HK_OK;
}

int hk_cache_prune(hk_cache_report *rep, const char *root, bool detached, bool dry_run, hk_cache_line_fn fn, void *ud) {
    memset(rep, 0, sizeof *rep);
    repo_it repos;
    int rc = list_repos(&repos, root, NULL);
    for (size_t i = 0; rc == HK_OK && i < repos.n; i++) {
        char *label = hk_asprintf("%s/%s", hk_repo_type_plural(repos.types[i]), repos.ids[i]);
        pctx c = {rep, root, repos.dirs[i], label ? label : repos.ids[i], dry_run, fn, ud, NULL, 0, 0, HK_OK};
        rep->repos++;
        rc = prune_repo(&c, detached);
        pctx_free(&c);
        free(label);
    }
    repos_free(&repos);
    if (rc == HK_OK) prune_orphan_receipts(rep, root, dry_run, fn, ud);
    return rc;
}

int hk_cache_rm(hk_cache_report *rep, const char *root, const char *repo_id, const char *revision, bool dry_run,
                hk_cache_line_fn fn, void *ud) {
    memset(rep, 0, sizeof *rep);
    repo_it repos;
    int rc = list_repos(&repos, root, repo_id);
    if (rc) return rc;
    if (repos.n == 0) {
        repos_free(&repos);
        return hk_fail(HK_ERR_NOT_FOUND, "%s is not in the cache %s", repo_id, root);
    }
    bool found_rev = false;
    for (size_t i = 0; rc == HK_OK && i < repos.n; i++) {
        const char *dir = repos.dirs[i];
        char *label = hk_asprintf("%s/%s", hk_repo_type_plural(repos.types[i]), repos.ids[i]);
        pctx c = {rep, root, dir, label ? label : repos.ids[i], dry_run, fn, ud, NULL, 0, 0, HK_OK};
        if (!revision) {
            char *blobs = hk_path_join(dir, "blobs");
            uint64_t bytes = blobs ? dir_bytes(blobs) : 0;
            free(blobs);
            remove_path(&c, dir, "whole repo", bytes);
            remove_receipts(&c, NULL, false);
            found_rev = true;
        } else {
            char commit[65];
            size_t rl = strlen(revision);
            if ((rl == 40 || rl == 64) && hk_is_hex(revision, rl)) snprintf(commit, sizeof commit, "%s", revision);
            else if (hk_cache_read_ref(commit, dir, revision) != HK_OK) {
                hk_clear_error();
                free(label);
                continue;
            }
            char *snap = hk_asprintf("%s/snapshots/%s", dir, commit);
            bool had_snap = snap && hk_is_dir(snap);
            if (had_snap) {
                found_rev = true;
                char *what = hk_asprintf("snapshot %s", commit);
                remove_path(&c, snap, what ? what : commit, 0);
                free(what);
            }
            free(snap);
            /* receipts alone (snapshot removed by hand or by `hf cache rm`) are a match too: they
             * are what the caller asked to be rid of */
            if (remove_receipts(&c, commit, !had_snap)) found_rev = true;
            char *ne = hk_asprintf("%s/.no_exist/%s", dir, commit);
            if (ne && hk_path_exists(ne) && !dry_run) hk_rmtree(ne);
            free(ne);
            /* refs naming that commit */
            char *refs = hk_path_join(dir, "refs");
            DIR *d = refs ? opendir(refs) : NULL;
            struct dirent *de;
            while (d && (de = readdir(d)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char cm[65];
                if (hk_cache_read_ref(cm, dir, de->d_name) == HK_OK && strcmp(cm, commit) == 0) {
                    found_rev = true;
                    char *p = hk_path_join(refs, de->d_name);
                    char *what = hk_asprintf("ref %s", de->d_name);
                    if (p) remove_path(&c, p, what ? what : de->d_name, 0);
                    free(what);
                    free(p);
                }
                hk_clear_error();
            }
            if (d) closedir(d);
            free(refs);
            /* blobs no longer referenced */
            if (!dry_run) {
                char *snaps = hk_path_join(dir, "snapshots");
                if (snaps) rc = walk(snaps, "", collect_used, &c, false);
                free(snaps);
                if (rc == HK_OK) prune_blobs(&c);
            }
        }
        pctx_free(&c);
        free(label);
    }
    repos_free(&repos);
    if (rc == HK_OK && !found_rev)
        rc = hk_fail(HK_ERR_NOT_FOUND,
                     "revision '%s' of %s is not in the cache (no snapshot, ref or verification receipt "
                     "names it)", revision, repo_id);
    return rc;
}
