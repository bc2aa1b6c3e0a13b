/* kernels.lock: both formats (kernel-hub-format §9), their accessors, and the writer of the new
 * one. The old format's git_lfs_concat variant hash is in lock_hash.c. */
#include "kernel/kernel_internal.h"

#include "cache/cache_internal.h" /* hk__kernel_repo_id_valid */
#include "util/text.h"
#include "util/vec.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define HK_LOCK_MAX (16u << 20)

struct hk_lock_entry {
    char *repo_id;
    int version;    /* HK_VERSION_UNSET when locked by revision (or old format) */
    char *revision; /* NULL unless locked by revision */
    char *commit;   /* 40- or 64-hex */
    /* old format only: variant name → "sha256-<hex>" (git_lfs_concat) */
    size_t num_variants;
    char **variant_names;
    char **variant_hashes;
};

struct hk_lockfile {
    hk_lock_format format;
    size_t count, cap;
    hk_lock_entry *entries;
};

static void entry_free(hk_lock_entry *e) {
    free(e->repo_id);
    free(e->revision);
    free(e->commit);
    hk__kstrv_free(e->variant_names, e->num_variants);
    hk__kstrv_free(e->variant_hashes, e->num_variants);
    memset(e, 0, sizeof *e);
}

HK_API void hk_lockfile_free(hk_lockfile *lock) {
    if (!lock) return;
    for (size_t i = 0; i < lock->count; i++) entry_free(&lock->entries[i]);
    free(lock->entries);
    free(lock);
}


static bool only_keys(const cJSON *obj, const char *const *keys, size_t nkeys, const char **bad) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        bool ok = false;
        for (size_t i = 0; i < nkeys; i++)
            if (it->string && strcmp(it->string, keys[i]) == 0) ok = true;
        if (!ok) {
            *bad = it->string ? it->string : "?";
            return false;
        }
    }
    return true;
}

static int parse_new(hk_lock_entry *e, const cJSON *item, size_t idx) {
    static const char *const top[] = {"dependency", "lock"};
    static const char *const dep_keys[] = {"repo-id", "version", "revision"};
    static const char *const lock_keys[] = {"commit", "hash"};
    const char *bad = NULL;
    if (!only_keys(item, top, 2, &bad))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu: unknown field '%s'", idx, bad);
    const cJSON *dep = cJSON_GetObjectItemCaseSensitive(item, "dependency");
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(item, "lock");
    if (!cJSON_IsObject(dep) || !cJSON_IsObject(lk))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu needs 'dependency' and 'lock' objects", idx);
    if (!only_keys(dep, dep_keys, 3, &bad) || !only_keys(lk, lock_keys, 2, &bad))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu: unknown field '%s'", idx, bad);
    const cJSON *repo = cJSON_GetObjectItemCaseSensitive(dep, "repo-id");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(dep, "version");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(dep, "revision");
    const cJSON *commit = cJSON_GetObjectItemCaseSensitive(lk, "commit");
    if (!cJSON_IsString(repo) || !hk__kernel_repo_id_valid(repo->valuestring))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu: 'repo-id' is not a valid org/name", idx);
    if ((ver != NULL) == (rev != NULL))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): exactly one of 'version' and "
                       "'revision' is needed", idx, repo->valuestring);
    if (ver && (!cJSON_IsNumber(ver) || ver->valuedouble < 0 || ver->valuedouble != (double)ver->valueint))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): 'version' must be a non-negative integer",
                       idx, repo->valuestring);
    if (rev && (!cJSON_IsString(rev) || !hk__revision_valid(rev->valuestring)))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): 'revision' must be a revision name", idx,
                       repo->valuestring);
    if (!cJSON_IsString(commit) || !hk__is_commit_id(commit->valuestring))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): 'commit' must be a full 40- or "
                       "64-hex git object id", idx, repo->valuestring);
    e->repo_id = hk__strdup(repo->valuestring);
    e->commit = hk__strdup(commit->valuestring);
    e->version = ver ? ver->valueint : HK_VERSION_UNSET;
    e->revision = rev ? hk__strdup(rev->valuestring) : NULL;
    if (!e->repo_id || !e->commit || (rev && !e->revision)) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

static int parse_old(hk_lock_entry *e, const cJSON *item, size_t idx) {
    const cJSON *repo = cJSON_GetObjectItemCaseSensitive(item, "repo_id");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(item, "sha");
    const cJSON *variants = cJSON_GetObjectItemCaseSensitive(item, "variants");
    if (!cJSON_IsString(repo) || !hk__kernel_repo_id_valid(repo->valuestring))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu: 'repo_id' is not a valid org/name", idx);
    if (!cJSON_IsString(sha) || !hk__is_commit_id(sha->valuestring))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): 'sha' must be a full commit id", idx,
                       repo->valuestring);
    e->repo_id = hk__strdup(repo->valuestring);
    e->commit = hk__strdup(sha->valuestring);
    e->version = HK_VERSION_UNSET;
    if (!e->repo_id || !e->commit) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (variants && !cJSON_IsObject(variants))
        return hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu (%s): 'variants' must be an object", idx,
                       repo->valuestring);
    int n = variants ? cJSON_GetArraySize(variants) : 0;
    if (n == 0) return HK_OK;
    e->variant_names = calloc((size_t)n, sizeof(char *));
    e->variant_hashes = calloc((size_t)n, sizeof(char *));
    if (!e->variant_names || !e->variant_hashes) return hk__fail(HK_ERR_NOMEM, "out of memory");
    const cJSON *v;
    cJSON_ArrayForEach(v, variants) {
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(v, "hash");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "hash_type");
        if (!cJSON_IsString(hash) || !hk__str_starts_with(hash->valuestring, "sha256-") ||
            !hk__is_hex(hash->valuestring + 7, 64))
            return hk__fail(HK_ERR_PARSE, "kernels.lock %s variant %s: 'hash' must be sha256-<64 hex>",
                           repo->valuestring, v->string);
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "git_lfs_concat") != 0))
            return hk__fail(HK_ERR_PARSE, "kernels.lock %s variant %s: unknown hash_type", repo->valuestring,
                           v->string);
        size_t k = e->num_variants;
        e->variant_names[k] = hk__strdup(v->string);
        e->variant_hashes[k] = hk__strdup(hash->valuestring);
        e->num_variants++;
        if (!e->variant_names[k] || !e->variant_hashes[k]) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return HK_OK;
}

static bool same_dependency(const hk_lock_entry *a, const hk_lock_entry *b) {
    if (strcmp(a->repo_id, b->repo_id) != 0) return false;
    if (a->revision || b->revision)
        return a->revision && b->revision && strcmp(a->revision, b->revision) == 0;
    return a->version == b->version;
}

HK_API int hk_lockfile_parse(hk_lockfile **out, const char *json, size_t len) {
    if (!out || !json) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_parse: NULL argument");
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) { /* cJSON leaves end at the failure: say where, as a truncated or hand-edited lock needs */
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : len, line = 1, col = 1;
        for (size_t i = 0; i < at; i++) {
            if (json[i] == '\n') line++, col = 1;
            else col++;
        }
        size_t used = len;
        while (used > 0 && (json[used - 1] == ' ' || json[used - 1] == '\n' || json[used - 1] == '\r' || json[used - 1] == '\t'))
            used--;
        int truncated = at + 1 >= used; /* cJSON stops at (or just before) the end of what is there */
        return hk__fail(HK_ERR_PARSE, "kernels.lock is not valid JSON: %s at line %zu, column %zu (byte %zu of %zu)%s",
                        truncated ? "it ends early" : "unexpected text", line, col, at, len,
                        truncated ? "; the file looks truncated: re-run `hubkern lock`" : "");
    }
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return hk__fail(HK_ERR_PARSE, "kernels.lock is not a JSON array");
    }
    hk_lockfile *lock = calloc(1, sizeof *lock);
    int n = cJSON_GetArraySize(root);
    int rc = HK_OK;
    if (!lock || (n > 0 && !(lock->entries = calloc((size_t)n, sizeof *lock->entries)))) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto done;
    }
    lock->cap = (size_t)n;
    lock->format = HK_LOCK_NEW;
    const cJSON *item;
    size_t idx = 0;
    cJSON_ArrayForEach(item, root) {
        if (!cJSON_IsObject(item)) {
            rc = hk__fail(HK_ERR_PARSE, "kernels.lock entry %zu is not an object", idx);
            goto done;
        }
        bool old = cJSON_GetObjectItemCaseSensitive(item, "repo_id") != NULL;
        hk_lock_format f = old ? HK_LOCK_OLD : HK_LOCK_NEW;
        if (idx == 0) lock->format = f;
        else if (f != lock->format) {
            rc = hk__fail(HK_ERR_PARSE, "kernels.lock mixes the old (repo_id/sha) and new "
                         "(dependency/lock) formats");
            goto done;
        }
        hk_lock_entry *e = &lock->entries[idx];
        lock->count = ++idx;
        rc = old ? parse_old(e, item, idx - 1) : parse_new(e, item, idx - 1);
        if (rc) goto done;
        for (size_t j = 0; j + 1 < idx; j++)
            if (same_dependency(&lock->entries[j], e)) {
                rc = hk__fail(HK_ERR_PARSE, "kernels.lock locks %s twice", e->repo_id);
                goto done;
            }
    }
done:
    cJSON_Delete(root);
    if (rc) hk_lockfile_free(lock);
    else *out = lock;
    return rc;
}

HK_API int hk_lockfile_read(hk_lockfile **out, const char *path) {
    if (!out || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_read: NULL argument");
    char *data = NULL;
    size_t len = 0;
    int rc = hk__read_file(&data, &len, path, HK_LOCK_MAX);
    if (rc) return rc;
    rc = hk_lockfile_parse(out, data, len);
    if (rc) hk__fail_context("%s", path);
    free(data);
    return rc;
}

HK_API int hk_lockfile_new(hk_lockfile **out) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_new: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    (*out)->format = HK_LOCK_NEW;
    return HK_OK;
}

HK_API int hk_lockfile_add(hk_lockfile *lock, const char *repo_id, int version, const char *revision,
                           const char *commit) {
    if (!lock) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_add: lock is NULL");
    int rc = HK_VEC_RESERVE(lock->entries, lock->cap, lock->count + 1);
    if (rc) return rc;
    hk_lock_entry *e = &lock->entries[lock->count];
    memset(e, 0, sizeof *e);
    e->version = version;
    e->repo_id = repo_id ? hk__strdup(repo_id) : NULL;
    e->revision = revision ? hk__strdup(revision) : NULL;
    e->commit = commit ? hk__strdup(commit) : NULL;
    if ((repo_id && !e->repo_id) || (revision && !e->revision) || (commit && !e->commit)) {
        entry_free(e);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    lock->count++;
    return HK_OK;
}

HK_API hk_lock_format hk_lockfile_format(const hk_lockfile *lock) { return lock ? lock->format : HK_LOCK_NEW; }
HK_API size_t hk_lockfile_count(const hk_lockfile *lock) { return lock ? lock->count : 0; }

HK_API const hk_lock_entry *hk_lockfile_entry(const hk_lockfile *lock, size_t i) {
    return lock && i < lock->count ? &lock->entries[i] : NULL;
}

HK_API const char *hk_lock_entry_repo_id(const hk_lock_entry *e) { return e ? e->repo_id : NULL; }
HK_API int hk_lock_entry_version(const hk_lock_entry *e) { return e ? e->version : HK_VERSION_UNSET; }
HK_API const char *hk_lock_entry_revision(const hk_lock_entry *e) { return e ? e->revision : NULL; }
HK_API const char *hk_lock_entry_commit(const hk_lock_entry *e) { return e ? e->commit : NULL; }
HK_API size_t hk_lock_entry_variant_count(const hk_lock_entry *e) { return e ? e->num_variants : 0; }

HK_API const char *hk_lock_entry_variant_name(const hk_lock_entry *e, size_t i) {
    return e && i < e->num_variants ? e->variant_names[i] : NULL;
}

HK_API const char *hk_lock_entry_variant_hash(const hk_lock_entry *e, size_t i) {
    return e && i < e->num_variants ? e->variant_hashes[i] : NULL;
}

HK_API const hk_lock_entry *hk_lockfile_find(const hk_lockfile *lock, const char *repo_id) {
    if (!lock || !repo_id) return NULL;
    for (size_t i = 0; i < lock->count; i++)
        if (strcmp(lock->entries[i].repo_id, repo_id) == 0) return &lock->entries[i];
    return NULL;
}

/* (repo-id, then version entries by number before revision entries by name) */
static int cmp_entry(const void *pa, const void *pb) {
    const hk_lock_entry *a = *(const hk_lock_entry *const *)pa, *b = *(const hk_lock_entry *const *)pb;
    int c = strcmp(a->repo_id, b->repo_id);
    if (c) return c;
    if (!a->revision && !b->revision) return (a->version > b->version) - (a->version < b->version);
    if (!a->revision) return -1;
    if (!b->revision) return 1;
    return strcmp(a->revision, b->revision);
}

static char *json_quote(const char *s) {
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    char *r = hk__strdup(t);
    cJSON_free(t);
    return r;
}

HK_API int hk_lockfile_write(const char *path, const hk_lockfile *lock) {
    if (!path || !lock) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_write: NULL argument");
    const hk_lock_entry *entries = lock->entries;
    size_t count = lock->count;
    const hk_lock_entry **order = calloc(count ? count : 1, sizeof *order);
    if (!order) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (size_t i = 0; i < count; i++) {
        const hk_lock_entry *e = &entries[i];
        if (!e->repo_id || !hk__kernel_repo_id_valid(e->repo_id) || !e->commit || !hk__is_commit_id(e->commit) ||
            (!e->revision && e->version < 0)) {
            rc = hk__fail(HK_ERR_INVALID_ARG, "lock entry %zu needs a valid repo id, a version or "
                         "revision, and a full commit id", i);
            goto done;
        }
        for (size_t j = 0; j < i; j++)
            if (same_dependency(&entries[j], e)) {
                rc = hk__fail(HK_ERR_INVALID_ARG, "%s is listed twice", e->repo_id);
                goto done;
            }
        order[i] = e;
    }
    qsort(order, count, sizeof *order, cmp_entry);
    /* the byte format of kernels' KernelLocks.to_json: 2-space indent, no trailing newline */
    hk_strbuf sb;
    hk__sb_init(&sb);
    if (count == 0) hk__sb_append(&sb, "[]");
    else hk__sb_append(&sb, "[\n");
    for (size_t i = 0; i < count; i++) {
        const hk_lock_entry *e = order[i];
        char *repo = json_quote(e->repo_id);
        hk__sb_printf(&sb, "  {\n    \"dependency\": {\n      \"repo-id\": %s,\n", repo ? repo : "\"\"");
        free(repo);
        if (e->revision) {
            char *rev = json_quote(e->revision);
            hk__sb_printf(&sb, "      \"revision\": %s\n", rev ? rev : "\"\"");
            free(rev);
        } else {
            hk__sb_printf(&sb, "      \"version\": %d\n", e->version);
        }
        hk__sb_printf(&sb, "    },\n    \"lock\": {\n      \"commit\": \"%s\"\n    }\n  }%s\n", e->commit,
                     i + 1 < count ? "," : "");
    }
    if (count) hk__sb_append(&sb, "]");
    if (sb.oom) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    else rc = hk__write_file_atomic(path, sb.data, sb.len);
    hk__sb_free(&sb);
done:
    free(order);
    return rc;
}

