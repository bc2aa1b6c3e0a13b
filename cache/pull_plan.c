/* The plan of an unfinished pull: <root>/.locks/<repo folder>/hubkern-pulls/<commit>, one blob name
 * a line, written before a pull downloads anything and removed once its variant is published. The
 * blobs a pull has finished are linked only when all of them are there, so until then nothing in
 * snapshots/ uses them; the plan is what tells prune that they (and the pull's resumable
 * <etag>.incomplete files) are the work of a pull to be resumed, not garbage. */
#include "cache/cache_internal.h"
#include "internal.h"
#include "util/vec.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *plans_dir(const char *root, const char *repo_dir) {
    const char *folder = strrchr(repo_dir, '/');
    return hk__asprintf("%s/.locks/%s/hubkern-pulls", root, folder ? folder + 1 : repo_dir);
}

static char *plan_path(const char *root, const char *repo_dir, const char *commit) {
    size_t n = commit ? strlen(commit) : 0;
    if (!((n == 40 || n == 64) && hk__is_hex(commit, n))) {
        hk__fail(HK_ERR_UNSAFE_PATH, "'%s' is not a commit id", commit ? commit : "(null)");
        return NULL;
    }
    char *dir = plans_dir(root, repo_dir);
    char *p = dir ? hk__path_join(dir, commit) : NULL;
    free(dir);
    if (!p) hk__fail(HK_ERR_NOMEM, "out of memory");
    return p;
}

int hk__pull_plan_write(const char *root, const char *repo_dir, const char *commit, const char *const *etags,
                        size_t n) {
    char *p = plan_path(root, repo_dir, commit);
    if (!p) return hk_last_error_code();
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk__sb_printf(&sb, "%s\n", etags[i]);
    int rc = sb.oom ? hk__fail(HK_ERR_NOMEM, "out of memory") : HK_OK;
    char *dir = rc == HK_OK ? hk__strdup(p) : NULL;
    if (rc == HK_OK && !dir) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (dir) {
        *strrchr(dir, '/') = '\0';
        rc = hk__mkdirs(dir, 0777);
    }
    if (rc == HK_OK) rc = hk__write_file_atomic(p, sb.data ? sb.data : "", sb.len);
    free(dir);
    free(p);
    hk__sb_free(&sb);
    return rc;
}

void hk__pull_plan_remove(const char *root, const char *repo_dir, const char *commit) {
    char *p = plan_path(root, repo_dir, commit);
    if (p) unlink(p);
    else hk_clear_error();
    free(p);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void hk__pull_plans_free(hk_pull_plans *p) {
    for (size_t i = 0; i < p->n; i++) free(p->names[i]);
    free(p->names);
    for (size_t i = 0; i < p->nstale; i++) free(p->stale[i]);
    free(p->stale);
    memset(p, 0, sizeof *p);
}

/* one plan file's names into p (a name is a blob file name: hex only, 40 or 64 characters) */
static int read_plan(hk_pull_plans *p, size_t *cap, const char *path) {
    char *text = NULL;
    int rc = hk__read_file(&text, NULL, path, 64u << 20);
    if (rc) {
        hk_clear_error(); /* gone meanwhile (the pull finished), or unreadable: it protects nothing */
        return HK_OK;
    }
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        if (!((n == 40 || n == 64) && hk__is_hex(line, n))) continue;
        char *copy = hk__strdup(line);
        if (!copy || HK_VEC_RESERVE(p->names, *cap, p->n + 1)) {
            free(copy);
            free(text);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        p->names[p->n++] = copy;
    }
    free(text);
    return HK_OK;
}

int hk__pull_plans_load(hk_pull_plans *p, const char *root, const char *repo_dir) {
    memset(p, 0, sizeof *p);
    char *dir = plans_dir(root, repo_dir);
    if (!dir) return hk__fail(HK_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t cap = 0, capstale = 0;
    time_t now = time(NULL);
    int rc = HK_OK;
    while (rc == HK_OK && d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *path = hk__path_join(dir, de->d_name);
        struct stat st;
        if (!path) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        } else if (now - st.st_mtime > HK_PULL_PLAN_MAX_AGE_S) { /* abandoned: protects nothing */
            if (HK_VEC_RESERVE(p->stale, capstale, p->nstale + 1)) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            else p->stale[p->nstale++] = path, path = NULL;
        } else {
            rc = read_plan(p, &cap, path);
        }
        free(path);
    }
    if (d) closedir(d);
    free(dir);
    if (rc) hk__pull_plans_free(p);
    else if (p->n) qsort(p->names, p->n, sizeof *p->names, cmp_str);
    return rc;
}

bool hk__pull_plans_name(const hk_pull_plans *p, const char *etag) {
    return p->n && bsearch(&etag, p->names, p->n, sizeof *p->names, cmp_str) != NULL;
}
