/* Names and small atomic writes of the huggingface_hub cache layout. */
#include "cache/cache_internal.h"
#include "internal.h"
#include "util/text.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const k_plural[] = {"models", "datasets", "spaces", "kernels"};
static const char *const k_prefix[] = {"", "datasets/", "spaces/", "kernels/"};

static bool type_known(hk_repo_type t) { return (unsigned)t < HK_ARRAY_LEN(k_plural); }

const char *hk_repo_type_plural(hk_repo_type t) { return type_known(t) ? k_plural[t] : NULL; }
const char *hk__repo_type_url_prefix(hk_repo_type t) { return k_prefix[t]; }

static const char *const k_singular[] = {"model", "dataset", "space", "kernel"};
const char *hk__repo_type_singular(hk_repo_type t) { return type_known(t) ? k_singular[t] : NULL; }

char *hk__cache_repo_label(hk_repo_type t, const char *repo_id) {
    return hk__asprintf("%s/%s", type_known(t) ? k_singular[t] : "?", repo_id);
}

int hk_repo_type_parse(hk_repo_type *out, const char *s) {
    if (!out || !s) return hk__fail(HK_ERR_INVALID_ARG, "no repo type given (use model, dataset, space or kernel)");
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, k_singular[i]) == 0 || strcmp(s, k_plural[i]) == 0) {
            *out = (hk_repo_type)i;
            return HK_OK;
        }
    }
    return hk__fail(HK_ERR_INVALID_ARG, "unknown repo type '%s' (use model, dataset, space or kernel)", s);
}

static bool name_part_valid(const char *s, size_t n) {
    if (n == 0 || n > 96) return false;
    if (s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok) return false;
        if (i + 1 < n && ((c == '-' && s[i + 1] == '-') || (c == '.' && s[i + 1] == '.'))) return false;
    }
    return true;
}

int hk_repo_id_valid(const char *repo_id) {
    if (!repo_id) return 0;
    const char *slash = strchr(repo_id, '/');
    if (!slash) return name_part_valid(repo_id, strlen(repo_id));
    if (strchr(slash + 1, '/')) return 0;
    return name_part_valid(repo_id, (size_t)(slash - repo_id)) && name_part_valid(slash + 1, strlen(slash + 1));
}

bool hk__kernel_repo_id_valid(const char *repo_id) { return hk_repo_id_valid(repo_id) && strchr(repo_id, '/'); }

bool hk__cache_repo_folder_valid(const char *folder, size_t n) {
    for (size_t t = 0; t < HK_ARRAY_LEN(k_plural); t++) {
        size_t pl = strlen(k_plural[t]);
        if (n <= pl + 2 || strncmp(folder, k_plural[t], pl) != 0 || strncmp(folder + pl, "--", 2) != 0) continue;
        /* the id whose folder this would be: "--" back to '/' (parts never hold "--") */
        char id[256];
        size_t o = 0;
        for (size_t i = pl + 2; i < n; i++) {
            if (o + 1 >= sizeof id || folder[i] == '\0' || folder[i] == '/') return false;
            if (folder[i] == '-' && i + 1 < n && folder[i + 1] == '-') {
                id[o++] = '/';
                i++;
            } else {
                id[o++] = folder[i];
            }
        }
        id[o] = '\0';
        return hk_repo_id_valid(id) != 0;
    }
    return false;
}

static char *expand_home(const char *p) {
    if (p[0] != '~' || (p[1] != '/' && p[1] != '\0')) return hk__strdup(p);
    const char *home = hk__getenv("HOME");
    if (!home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : "/";
    }
    return hk__asprintf("%s%s", home, p + 1);
}

int hk_cache_root(char **out, const char *explicit_root, hk_repo_type type) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_cache_root: no out pointer");
    *out = NULL;
    char *raw = NULL;
    const char *v;
    if (explicit_root && *explicit_root) raw = hk__strdup(explicit_root);
    else if (type == HK_REPO_KERNEL && (v = hk__getenv("KERNELS_CACHE"))) raw = hk__strdup(v);
    else if ((v = hk__getenv("HF_HUB_CACHE"))) raw = hk__strdup(v);
    else if ((v = hk__getenv("HUGGINGFACE_HUB_CACHE"))) raw = hk__strdup(v);
    else if ((v = hk__getenv("HF_HOME"))) raw = hk__asprintf("%s/hub", v);
    else if ((v = hk__getenv("XDG_CACHE_HOME"))) raw = hk__asprintf("%s/huggingface/hub", v);
    else raw = hk__strdup("~/.cache/huggingface/hub");
    if (!raw) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *expanded = expand_home(raw);
    free(raw);
    if (!expanded) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char resolved[PATH_MAX];
    if (realpath(expanded, resolved)) {
        free(expanded);
        *out = hk__strdup(resolved);
    } else if (expanded[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            free(expanded);
            return hk__fail(HK_ERR_IO, "cannot determine the current directory");
        }
        *out = hk__path_join(cwd, expanded);
        free(expanded);
    } else {
        *out = expanded;
    }
    return *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

char *hk_cache_repo_dir(const char *root, hk_repo_type type, const char *repo_id) {
    if (!root || !repo_id || !type_known(type)) {
        hk__fail(HK_ERR_INVALID_ARG, "hk_cache_repo_dir: give a cache root, a repo type and a repo id");
        return NULL;
    }
    /* the folder name is made from the id: one that is not a repo id ("org/x/../y", "a--b/..")
     * would name a folder of another repo, or one outside the naming scheme */
    if (!hk_repo_id_valid(repo_id)) {
        hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a repo id (org/name of letters, digits, '-', '_', '.')", repo_id);
        return NULL;
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, root);
    hk__sb_append(&sb, "/");
    hk__sb_append(&sb, k_plural[type]);
    for (const char *p = repo_id; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        hk__sb_append(&sb, "--");
        hk__sb_append_n(&sb, p, n);
        p += n;
        if (*p == '/') p++;
    }
    char *dir = hk__sb_steal(&sb);
    if (!dir) hk__fail(HK_ERR_NOMEM, "out of memory");
    return dir;
}

/* One path component that is a name, not a step: no '/', not "." or "..", no leading '.'. */
static bool component_safe(const char *s) {
    return s && *s && *s != '.' && !strchr(s, '/') && hk__path_is_safe_relative(s);
}

static char *unsafe(const char *what, const char *name) {
    hk__fail(HK_ERR_UNSAFE_PATH, "refusing %s '%s': it would leave its folder of the cache", what, name ? name : "(null)");
    return NULL;
}

static char *path_or_nomem(char *p) {
    if (!p) hk__fail(HK_ERR_NOMEM, "out of memory");
    return p;
}

char *hk__cache_snapshot_path(const char *repo_dir, const char *commit, const char *rel) {
    if (!commit || !hk__is_commit_id(commit)) return unsafe("snapshot name", commit);
    if (rel && !hk__path_is_safe_relative(rel)) return unsafe("file name", rel);
    return path_or_nomem(rel ? hk__concat(repo_dir, "/snapshots/", commit, "/", rel, (char *)NULL)
                             : hk__concat(repo_dir, "/snapshots/", commit, (char *)NULL));
}

char *hk__cache_variant_path(const char *repo_dir, const char *commit, const char *variant) {
    if (!component_safe(variant)) return unsafe("variant name", variant);
    if (!commit || !hk__is_commit_id(commit)) return unsafe("snapshot name", commit);
    return path_or_nomem(repo_dir ? hk__asprintf("%s/snapshots/%s/build/%s", repo_dir, commit, variant)
                                  : hk__asprintf("snapshots/%s/build/%s", commit, variant));
}

HK_API char *hk_cache_variant_entry(const char *commit, const char *variant) {
    return hk__cache_variant_path(NULL, commit, variant);
}

char *hk__cache_blob_path(const char *repo_dir, const char *etag, const char *suffix) {
    if (!component_safe(etag)) return unsafe("blob name", etag);
    if (suffix && strchr(suffix, '/')) return unsafe("blob suffix", suffix);
    return path_or_nomem(hk__concat(repo_dir, "/blobs/", etag, suffix ? suffix : "", (char *)NULL));
}

char *hk__cache_ref_path(const char *repo_dir, const char *rev) {
    if (!rev || !hk__revision_valid(rev)) return unsafe("revision name", rev);
    return path_or_nomem(hk__concat(repo_dir, "/refs/", rev, (char *)NULL));
}

char *hk__cache_repo_subdir(const char *repo_dir, const char *which) {
    return path_or_nomem(hk__asprintf("%s/%s", repo_dir, which));
}

char *hk__cache_no_exist_path(const char *repo_dir, const char *commit, const char *rel) {
    if (!commit || !hk__is_commit_id(commit)) return unsafe("snapshot name", commit);
    if (!rel || !hk__path_is_safe_relative(rel)) return unsafe("file name", rel);
    return path_or_nomem(hk__asprintf("%s/.no_exist/%s/%s", repo_dir, commit, rel));
}

char *hk__cache_staging_path(const char *repo_dir, const char *name) {
    if (!component_safe(name)) return unsafe("staging name", name);
    return path_or_nomem(hk__asprintf("%s/.hk-staging/%s", repo_dir, name));
}

HK_API char *hk_cache_snapshot_path(const char *repo_dir, const char *commit, const char *rel) {
    if (!repo_dir) return unsafe("repo folder", NULL);
    return hk__cache_snapshot_path(repo_dir, commit, rel);
}

HK_API char *hk_cache_blob_path(const char *repo_dir, const char *etag) {
    if (!repo_dir) return unsafe("repo folder", NULL);
    return hk__cache_blob_path(repo_dir, etag, NULL);
}

HK_API char *hk_cache_ref_path(const char *repo_dir, const char *ref) {
    if (!repo_dir) return unsafe("repo folder", NULL);
    return hk__cache_ref_path(repo_dir, ref);
}

HK_API char *hk_cache_repo_part(const char *repo_dir, const char *which) {
    if (!repo_dir || !which || (strcmp(which, "blobs") && strcmp(which, "refs") && strcmp(which, "snapshots"))) {
        hk__fail(HK_ERR_INVALID_ARG, "hk_cache_repo_part: give a repo folder and one of blobs, refs, snapshots");
        return NULL;
    }
    return hk__cache_repo_subdir(repo_dir, which);
}

HK_API char *hk_cache_snapshot_dir(const char *repo_dir, const char *commit) {
    if (!repo_dir) {
        hk__fail(HK_ERR_INVALID_ARG, "hk_cache_snapshot_dir: give a repo folder and a commit");
        return NULL;
    }
    return hk__cache_snapshot_path(repo_dir, commit, NULL);
}

static bool ref_name_safe(const char *rev) {
    /* refs may nest ("refs/pr/1"); a ref is named as any revision is (no "x.lock", '%', ':' ...) */
    return hk__revision_valid(rev);
}

static bool ascii_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool hk__cache_ref_text_parse(char out_commit[65], const char *data, size_t n) {
    out_commit[0] = '\0';
    size_t a = 0;
    while (a < n && ascii_space(data[a])) a++;
    while (n > a && ascii_space(data[n - 1])) n--;
    size_t len = n - a;
    if (len != 40 && len != 64) return false;
    memcpy(out_commit, data + a, len);
    out_commit[len] = '\0';
    if (hk__is_commit_id(out_commit)) return true; /* no NUL inside either: strlen == len */
    out_commit[0] = '\0';
    return false;
}

int hk__cache_read_ref(char out_commit[65], const char *repo_dir, const char *rev) {
    out_commit[0] = '\0';
    if (!ref_name_safe(rev)) return hk__fail(HK_ERR_INVALID_ARG, "invalid revision name '%s'", rev);
    char *path = hk__cache_ref_path(repo_dir, rev);
    if (!path) return hk_last_error_code();
    char *data = NULL;
    size_t len = 0;
    int rc = hk__read_file(&data, &len, path, 256);
    free(path);
    if (rc) return rc;
    bool ok = hk__cache_ref_text_parse(out_commit, data, len);
    free(data);
    if (!ok) return hk__fail(HK_ERR_PARSE, "refs/%s in %s does not hold a commit id (and nothing else)", rev, repo_dir);
    return HK_OK;
}

int hk_cache_resolve_ref(char **out_commit, const char *repo_dir, const char *ref) {
    if (out_commit) *out_commit = NULL;
    if (!out_commit || !repo_dir || !ref)
        return hk__fail(HK_ERR_INVALID_ARG, "hk_cache_resolve_ref: give an out pointer, a repo folder and a ref");
    char commit[65];
    int rc = hk__cache_read_ref(commit, repo_dir, ref);
    if (rc) return rc;
    if (!(*out_commit = hk__strdup(commit))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

HK_API int hk_cache_write_ref(const char *repo_dir, const char *rev, const char *commit) {
    if (!ref_name_safe(rev)) return hk__fail(HK_ERR_INVALID_ARG, "invalid revision name '%s'", rev);
    size_t clen = strlen(commit);
    if (!((clen == 40 || clen == 64) && hk__is_hex(commit, clen)))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a commit id", commit);
    if (strcmp(rev, commit) == 0) return HK_OK; /* never write refs/<sha> */
    char *snap = hk__cache_snapshot_path(repo_dir, commit, NULL);
    char *ref = snap ? hk__cache_ref_path(repo_dir, rev) : NULL;
    int rc = (!snap || !ref) ? hk_last_error_code() : hk__mkdirs(snap, 0777);
    if (rc == HK_OK) {
        char *dir = hk__strdup(ref);
        if (!dir) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else {
            *strrchr(dir, '/') = '\0';
            rc = hk__mkdirs(dir, 0777);
            free(dir);
        }
    }
    if (rc == HK_OK) rc = hk__write_file_atomic(ref, commit, clen);
    free(snap);
    free(ref);
    return rc;
}

/* Is path a symbolic link whose target is exactly want? */
static bool link_is(const char *path, const char *want) {
    size_t n = strlen(want);
    char *buf = malloc(n + 2);
    if (!buf) return false;
    ssize_t got = readlink(path, buf, n + 2); /* n + 2: a longer target shows as longer */
    bool same = got >= 0 && (size_t)got == n && memcmp(buf, want, n) == 0;
    free(buf);
    return same;
}

HK_API int hk_cache_link_snapshot(const char *repo_dir, const char *commit, const char *path, const char *etag) {
    char *ptr = hk__cache_snapshot_path(repo_dir, commit, path);
    char *blob = ptr ? hk__cache_blob_path(repo_dir, etag, NULL) : NULL;
    char *dir = blob ? hk__strdup(ptr) : NULL;
    int rc = HK_OK;
    if (!ptr || !blob || !dir) {
        rc = blob && !dir ? hk__fail(HK_ERR_NOMEM, "out of memory") : hk_last_error_code();
        goto out;
    }
    *strrchr(dir, '/') = '\0';
    char *target = hk__relpath(blob, dir);
    if (!target) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* a link that is already right is left alone: rewriting it (mkdir, symlink, rename) takes the
     * folders' locks exclusively, and a mirror's burst of requests for one file each rewriting it
     * queued on those locks (issue 25) */
    if (link_is(ptr, target)) {
        free(target);
        goto out;
    }
    if ((rc = hk__mkdirs(dir, 0777))) {
        free(target);
        goto out;
    }
    char rnd[9];
    hk__random_hex8(rnd);
    /* the temp link lives at the repo folder's top, not in the snapshot: a reader walking the
     * snapshot (digest check, Python) never sees it; rename keeps the relative target string */
    char *tmp = hk__asprintf("%s/.link-%s.tmp", repo_dir, rnd);
    if (!tmp) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    else if (symlink(target, tmp) != 0) rc = hk__fail(hk__errno_code(errno), "cannot create link %s: %s", ptr, strerror(errno));
    else if (rename(tmp, ptr) != 0) {
        rc = hk__fail(hk__errno_code(errno), "cannot create link %s: %s", ptr, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(target);
out:
    free(ptr);
    free(blob);
    free(dir);
    return rc;
}

HK_API int hk_cache_ensure_tag(const char *root) {
    char *path = hk__path_join(root, "CACHEDIR.TAG");
    if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    if (!hk__path_exists(path)) {
        static const char tag[] =
            "Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by huggingface_hub.\n"
            "# For information about cache directory tags, see:\n"
            "#\thttps://bford.info/cachedir/\n";
        rc = hk__mkdirs(root, 0777);
        if (rc == HK_OK) rc = hk__write_file_atomic(path, tag, sizeof tag - 1);
    }
    free(path);
    return rc;
}
