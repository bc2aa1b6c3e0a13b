/* metadata.json `digest` check of a variant directory (kernel-hub-format.md §7): recompute the
 * per-file base64 SHA-256/512 over build/<variant>/ (following the cache's symlinks, skipping the
 * top-level metadata.json[.sigstore], __pycache__ and *.pyc) and report every violation. */
#include "client/client.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct walk {
    char **rel;
    size_t n, cap;
    int rc;
} walk;

static void walk_add(walk *w, const char *rel) {
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 32;
        char **t = realloc(w->rel, nc * sizeof *t);
        if (!t) {
            w->rc = hk_fail(HK_ERR_NOMEM, "out of memory");
            return;
        }
        w->rel = t;
        w->cap = nc;
    }
    if (!(w->rel[w->n] = hk_strdup(rel))) {
        w->rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        return;
    }
    w->n++;
}

static void walk_dir(walk *w, const char *root, const char *rel, int depth) {
    if (depth > 32 || w->rc) return;
    char *dirpath = rel[0] ? hk_path_join(root, rel) : hk_strdup(root);
    if (!dirpath) {
        w->rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        return;
    }
    DIR *d = opendir(dirpath);
    if (!d) {
        w->rc = hk_fail(hk_errno_code(errno), "cannot read %s: %s", dirpath, strerror(errno));
        free(dirpath);
        return;
    }
    struct dirent *de;
    while (!w->rc && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (strcmp(name, "__pycache__") == 0 || hk_str_ends_with(name, ".pyc")) continue;
        char *childrel = rel[0] ? hk_asprintf("%s/%s", rel, name) : hk_strdup(name);
        char *child = childrel ? hk_path_join(root, childrel) : NULL;
        struct stat st;
        if (!child) w->rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        else if (stat(child, &st) != 0) {
            /* a dangling link: listed as present so that the hash step reports it */
            walk_add(w, childrel);
        } else if (S_ISDIR(st.st_mode)) {
            walk_dir(w, root, childrel, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (!(rel[0] == '\0' && (strcmp(name, "metadata.json") == 0 || strcmp(name, "metadata.json.sigstore") == 0)))
                walk_add(w, childrel);
        }
        free(child);
        free(childrel);
    }
    closedir(d);
    free(dirpath);
}

/* A cache file that is a symlink to blobs/<64 hex> that this very pull has just written after
 * hashing every byte: its SHA-256 is the name itself, so the file need not be read again. Blobs
 * that were already in the cache are re-hashed (they may have rotted since). */
static bool blob_name_b64(char b64[100], const char *path, const char *const *fresh, size_t nfresh) {
    char target[4096];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return false;
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (strlen(base) != 64 || !hk_is_hex(base, 64)) return false;
    bool is_fresh = false;
    for (size_t i = 0; i < nfresh && !is_fresh; i++) is_fresh = strcmp(fresh[i], base) == 0;
    if (!is_fresh) return false;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    unsigned char bytes[32];
    for (int i = 0; i < 32; i++) {
        unsigned hi = (unsigned)(base[2 * i] <= '9' ? base[2 * i] - '0' : base[2 * i] - 'a' + 10);
        unsigned lo = (unsigned)(base[2 * i + 1] <= '9' ? base[2 * i + 1] - '0' : base[2 * i + 1] - 'a' + 10);
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    hk_base64(b64, bytes, 32);
    return true;
}

int hk_verify_variant_digest_ex(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir, bool quiet,
                                const char *const *fresh, size_t nfresh) {
    *out_has_digest = false;
    if (out_bytes) *out_bytes = 0;
    char *mpath = hk_path_join(variant_dir, "metadata.json");
    if (!mpath) return hk_fail(HK_ERR_NOMEM, "out of memory");
    char *text = NULL;
    int rc = hk_read_file(&text, NULL, mpath, 16u << 20);
    if (rc) {
        free(mpath);
        return rc == HK_ERR_NOT_FOUND ? hk_fail(HK_ERR_DIGEST, "%s has no metadata.json", variant_dir) : rc;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) {
        rc = hk_fail(HK_ERR_PARSE, "%s is not valid JSON", mpath);
        free(mpath);
        return rc;
    }
    free(mpath);
    cJSON *dg = cJSON_GetObjectItemCaseSensitive(root, "digest");
    if (!cJSON_IsObject(dg)) {
        cJSON_Delete(root);
        if (!quiet) hk_log(HK_LOG_WARN, "%s: metadata.json has no digest; only per-file hashes were checked", variant_dir);
        return HK_OK;
    }
    *out_has_digest = true;
    const char *alg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dg, "algorithm"));
    cJSON *files = cJSON_GetObjectItemCaseSensitive(dg, "files");
    hk_hash_kind kind;
    if (alg && strcmp(alg, "sha256") == 0) kind = HK_HASH_SHA256;
    else if (alg && strcmp(alg, "sha512") == 0) kind = HK_HASH_SHA512;
    else {
        rc = hk_fail(HK_ERR_DIGEST, "%s: AlgorithmMismatch: unknown digest algorithm '%s'", variant_dir, alg ? alg : "(none)");
        cJSON_Delete(root);
        return rc;
    }
    if (!cJSON_IsObject(files)) {
        cJSON_Delete(root);
        return hk_fail(HK_ERR_DIGEST, "%s: metadata.json digest has no files object", variant_dir);
    }
    walk w = {0};
    walk_dir(&w, variant_dir, "", 0);
    hk_strbuf msg;
    hk_sb_init(&msg);
    size_t violations = 0;
    if (w.rc) rc = w.rc;
    bool *seen = rc ? NULL : calloc(w.n + 1, sizeof *seen);
    if (!rc && !seen) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    cJSON *f;
    if (!rc) {
        cJSON_ArrayForEach(f, files) {
            size_t i = 0;
            while (i < w.n && strcmp(w.rel[i], f->string) != 0) i++;
            if (i == w.n) {
                hk_sb_printf(&msg, "\n  MissingFile: %s", f->string);
                if (!quiet) hk_log(HK_LOG_WARN, "%s: MissingFile %s", variant_dir, f->string);
                violations++;
                continue;
            }
            seen[i] = true;
            char *path = hk_path_join(variant_dir, w.rel[i]);
            char b64[100];
            int hrc;
            if (path && kind == HK_HASH_SHA256 && blob_name_b64(b64, path, fresh, nfresh)) hrc = HK_OK;
            else hrc = path ? hk_hash_file_b64(b64, sizeof b64, kind, path) : hk_fail(HK_ERR_NOMEM, "out of memory");
            struct stat st;
            if (hrc == HK_OK && out_bytes && stat(path, &st) == 0) *out_bytes += (uint64_t)st.st_size;
            free(path);
            const char *want = cJSON_GetStringValue(f);
            if (hrc != HK_OK) {
                hk_sb_printf(&msg, "\n  MissingFile: %s (%s)", f->string, hk_last_error());
                violations++;
            } else if (!want || strcmp(want, b64) != 0) {
                hk_sb_printf(&msg, "\n  HashMismatch: %s: expected %s, got %s", f->string, want ? want : "(not a string)", b64);
                if (!quiet) hk_log(HK_LOG_WARN, "%s: HashMismatch %s", variant_dir, f->string);
                violations++;
            }
        }
        for (size_t i = 0; i < w.n; i++) {
            if (!seen[i]) {
                hk_sb_printf(&msg, "\n  UnknownFile: %s", w.rel[i]);
                if (!quiet) hk_log(HK_LOG_WARN, "%s: UnknownFile %s", variant_dir, w.rel[i]);
                violations++;
            }
        }
        if (violations)
            rc = hk_fail(HK_ERR_DIGEST, "%s does not match its metadata.json digest (%zu violation%s):%s", variant_dir,
                         violations, violations == 1 ? "" : "s", msg.data ? msg.data : "");
    }
    free(seen);
    for (size_t i = 0; i < w.n; i++) free(w.rel[i]);
    free(w.rel);
    hk_sb_free(&msg);
    cJSON_Delete(root);
    return rc;
}

int hk_verify_variant_digest(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir) {
    return hk_verify_variant_digest_ex(out_has_digest, out_bytes, variant_dir, false, NULL, 0);
}
