/* What the cache maintenance commands share: the repo folders of a cache root, a tree walk that
 * never follows links, and small questions about a repo folder. */
#include "cache/maint_internal.h"
#include "util/vec.h"
#include "util/walk.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void hk__cache_emit(hk_cache_line_fn fn, void *ud, const char *fmt, ...) {
    if (!fn) return;
    va_list ap;
    va_start(ap, fmt);
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (sb.data) fn(ud, sb.data);
    hk__sb_free(&sb);
}

const char *hk_cache_finding_kind_name(hk_cache_finding_kind kind) {
    static const char *const names[] = {"problem", "note", "removed", "would_remove", "failed"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : NULL;
}

void hk__cache_finding(const hk_cache_sink *s, hk_cache_finding_kind kind, const char *lead, const char *repo,
                       const char *dir, const char *rel, const char *fmt, ...) {
    static const char *const leads[] = {"PROBLEM: ", "note: ", "removed ", "would remove ", "cannot remove "};
    if (!s || (!s->line_fn && !s->finding_fn)) return;
    hk_strbuf msg, line, path;
    hk__sb_init(&msg);
    hk__sb_init(&line);
    hk__sb_init(&path);
    va_list ap;
    va_start(ap, fmt);
    hk__sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    hk__sb_printf(&line, "%s%s%s%s", lead ? lead : leads[kind], repo ? repo : "", repo ? ": " : "",
                  msg.data ? msg.data : "");
    if (dir) hk__sb_printf(&path, "%s%s%s", dir, rel ? "/" : "", rel ? rel : "");
    if (msg.data && line.data && (!dir || path.data)) {
        if (s->line_fn) s->line_fn(s->line_ud, line.data);
        const char *slash = repo ? strchr(repo, '/') : NULL;
        hk_cache_finding f = {kind, repo, slash ? slash + 1 : NULL, dir ? path.data : NULL, msg.data, line.data};
        if (s->finding_fn) s->finding_fn(s->finding_ud, &f);
    }
    hk__sb_free(&msg);
    hk__sb_free(&line);
    hk__sb_free(&path);
}

/* "kernels--org--name" -> type + "org/name". */
bool hk__cache_parse_folder(const char *name, hk_repo_type *type, char **repo_id) {
    static const char *const pfx[] = {"models--", "datasets--", "spaces--", "kernels--"};
    for (int t = 0; t < 4; t++) {
        size_t pl = strlen(pfx[t]);
        if (strncmp(name, pfx[t], pl) != 0 || !name[pl]) continue;
        hk_strbuf sb;
        hk__sb_init(&sb);
        for (const char *p = name + pl; *p;) {
            const char *e = strstr(p, "--");
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (sb.len) hk__sb_append(&sb, "/");
            hk__sb_append_n(&sb, p, n);
            p += n;
            if (*p) p += 2;
        }
        *type = (hk_repo_type)t;
        *repo_id = hk__sb_steal(&sb);
        if (!*repo_id) hk__fail(HK_ERR_NOMEM, "out of memory"); /* a repo folder, unread: not "no repo" */
        return *repo_id != NULL;
    }
    return false;
}

void hk__cache_repos_free(hk_cache_repos *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->dirs[i]);
        free(r->ids[i]);
    }
    free(r->dirs);
    free(r->ids);
    free(r->types);
    memset(r, 0, sizeof *r);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int hk__cache_list_repos(hk_cache_repos *out, const char *root, const char *repo_id) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return HK_OK;
        return hk__fail(hk__errno_code(errno), "cannot read cache %s: %s", root, strerror(errno));
    }
    size_t cap_dirs = 0, cap_ids = 0, cap_types = 0, ncap = 0;
    struct dirent *de;
    char **names = NULL;
    size_t nn = 0;
    int rc = HK_OK; /* out of memory is an error, never a cache with fewer repos */
    while (rc == HK_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *name = hk__strdup(de->d_name);
        if (!name || HK_VEC_RESERVE(names, ncap, nn + 1)) {
            free(name);
            rc = hk__fail(HK_ERR_NOMEM, "out of memory listing the cache %s", root);
            break;
        }
        names[nn++] = name;
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp_names);
    for (size_t k = 0; k < nn && rc == HK_OK; k++) {
        hk_repo_type type;
        char *id = NULL;
        if (!hk__cache_parse_folder(names[k], &type, &id)) {
            if (hk_last_error_code() == HK_ERR_NOMEM) rc = HK_ERR_NOMEM;
            continue;
        }
        char *dir = hk__path_join(root, names[k]);
        if (!dir) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (!dir || !hk__is_dir(dir) || (repo_id && strcmp(repo_id, id) != 0)) {
            free(dir);
            free(id);
            continue;
        }
        if (HK_VEC_RESERVE(out->dirs, cap_dirs, out->n + 1) || HK_VEC_RESERVE(out->ids, cap_ids, out->n + 1) ||
            HK_VEC_RESERVE(out->types, cap_types, out->n + 1)) {
            free(dir);
            free(id);
            rc = HK_ERR_NOMEM;
            break;
        }
        out->dirs[out->n] = dir;
        out->ids[out->n] = id;
        out->types[out->n] = type;
        out->n++;
    }
    for (size_t k = 0; k < nn; k++) free(names[k]);
    free(names);
    if (rc) hk__cache_repos_free(out);
    return rc;
}

typedef struct walk_adapter {
    hk_cache_visit_fn fn;
    void *ud;
    bool post_dirs;
} walk_adapter;

static int adapt(void *p, const hk_walk_entry *e, int post) {
    walk_adapter *a = p;
    if (S_ISDIR(e->st.st_mode) && post != (a->post_dirs ? 1 : 0)) return HK_WALK_CONTINUE;
    return a->fn(a->ud, e->path, e->rel, &e->st) == HK_OK ? HK_WALK_CONTINUE : -1;
}

int hk__cache_walk_entries(const char *dir, hk_walk_fn fn, void *ud, unsigned flags) {
    int rc = hk__walk(dir, -1, HK_WALK_TYPE_ONLY | flags, fn, ud);
    if (rc && !hk__is_dir(dir)) { /* no snapshots/ or blobs/ (or a file there): nothing to visit */
        hk_clear_error();
        return HK_OK;
    }
    return rc;
}

int hk__cache_walk(const char *dir, hk_cache_visit_fn fn, void *ud, bool post_dirs) {
    walk_adapter a = {fn, ud, post_dirs};
    return hk__cache_walk_entries(dir, adapt, &a, post_dirs ? HK_WALK_POSTORDER : 0);
}

uint64_t hk__cache_dir_bytes(const char *dir) {
    uint64_t total = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        /* blobs only: a temp or partial file ("<etag>.incomplete", "<etag>.<hex>.incomplete") holds
         * no cached content yet (huggingface_hub's scan counts blobs alone too) */
        if (strchr(de->d_name, '.')) continue;
        char *p = hk__path_join(dir, de->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
        free(p);
    }
    if (d) closedir(d);
    return total;
}

const char *hk__cache_folder_of(const char *repo_dir) {
    const char *f = strrchr(repo_dir, '/');
    return f ? f + 1 : repo_dir;
}

bool hk__cache_commit_referenced(const char *repo_dir, const char *commit) {
    char *refs = hk__path_join(repo_dir, "refs");
    DIR *d = refs ? opendir(refs) : NULL;
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char c[65];
        if (hk__cache_read_ref(c, repo_dir, de->d_name) == HK_OK && strcmp(c, commit) == 0) found = true;
        hk_clear_error();
    }
    if (d) closedir(d);
    free(refs);
    return found;
}
