/* The pull result handle and what fills it: variant choice among names, the file list, the files
 * a pull's patterns choose (pull_internal.h). */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "util/vec.h"
#include "client/pull_internal.h"
#include "env/detected.h"
#include "hubkern/variant.h"
#include "util/pathglob.h"
#include "util/strmap.h"

#include <dirent.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* ---- pull ------------------------------------------------------------------------------------ */

void hk_pull_result_free(hk_pull_result *r) {
    if (!r) return;
    free(r->repo);
    free(r->revision);
    free(r->commit);
    free(r->snapshot);
    for (size_t i = 0; i < r->nvariants; i++) {
        free(r->variants[i]);
        free(r->variant_paths[i]);
    }
    free(r->variants);
    free(r->variant_paths);
    free(r->files); /* the strings are the listing's or strs' */
    hk__client_tree_unref(r->listing);
    hk__arena_free(&r->strs);
    free(r->file_sizes);
    free(r->file_blobs);
    free(r->file_cached);
    free(r);
}

const char *hk_pull_result_repo(const hk_pull_result *r) { return r->repo; }
const char *hk_pull_result_revision(const hk_pull_result *r) { return r->revision; }
const char *hk_pull_result_commit(const hk_pull_result *r) { return r->commit; }
const char *hk_pull_result_snapshot(const hk_pull_result *r) { return r->snapshot; }
size_t hk_pull_result_variant_count(const hk_pull_result *r) { return r->nvariants; }
const char *hk_pull_result_variant(const hk_pull_result *r, size_t i) { return i < r->nvariants ? r->variants[i] : NULL; }
const char *hk_pull_result_variant_path(const hk_pull_result *r, size_t i) {
    return i < r->nvariants ? r->variant_paths[i] : NULL;
}
size_t hk_pull_result_file_count(const hk_pull_result *r) { return r->nfiles; }
const char *hk_pull_result_file(const hk_pull_result *r, size_t i) { return i < r->nfiles ? r->files[i] : NULL; }
/* The size and blob id of the files that came from a variant complete in the snapshot, read from
 * their links on first use (a pull does not pay for what its caller never asks). The result is
 * logically const: this fills in what it already stands for. */
static void read_local_details(const hk_pull_result *cr) {
    hk_pull_result *r = (hk_pull_result *)cr;
    if (!r->details_pending || !r->file_blobs) return;
    r->details_pending = false;
    for (size_t f = 0; f < r->nfiles; f++) {
        if (r->file_blobs[f]) continue;
        char *local = hk__path_join(r->snapshot, r->files[f]);
        struct stat st;
        char target[4096];
        ssize_t n = local ? readlink(local, target, sizeof target - 1) : -1;
        if (local && stat(local, &st) == 0) r->file_sizes[f] = (uint64_t)st.st_size;
        if (n > 0) {
            target[n] = '\0';
            const char *base = strrchr(target, '/');
            r->file_blobs[f] = hk__arena_strdup(&r->strs, base ? base + 1 : target); /* NULL: none known */
        }
        free(local);
    }
}

uint64_t hk_pull_result_file_size(const hk_pull_result *r, size_t i) {
    if (!r || !r->file_sizes || i >= r->nfiles) return 0;
    read_local_details(r);
    return r->file_sizes[i];
}
const char *hk_pull_result_file_blob(const hk_pull_result *r, size_t i) {
    if (!r || !r->file_blobs || i >= r->nfiles) return NULL;
    read_local_details(r);
    return r->file_blobs[i];
}
int hk_pull_result_file_cached(const hk_pull_result *r, size_t i) {
    return r && r->file_cached && i < r->nfiles ? r->file_cached[i] : 0;
}
size_t hk_pull_result_files_downloaded(const hk_pull_result *r) { return r->files_downloaded; }
uint64_t hk_pull_result_bytes_downloaded(const hk_pull_result *r) { return r->bytes_downloaded; }
uint64_t hk_pull_result_bytes_resumed(const hk_pull_result *r) { return r->bytes_resumed; }
uint64_t hk_pull_result_bytes_verified(const hk_pull_result *r) { return r->bytes_verified; }
uint64_t hk_pull_result_bytes_trusted(const hk_pull_result *r) { return r ? r->bytes_trusted : 0; }
int hk_pull_result_offline(const hk_pull_result *r) { return r->offline; }

size_t hk__pull_spec_size(unsigned version) {
    if (version < 2) return offsetof(hk_pull_spec, force_download);
    if (version < 3) return offsetof(hk_pull_spec, include);
    return sizeof(hk_pull_spec);
}

bool hk__client_excluded(const char *path) {
    if (hk__str_ends_with(path, ".pyc")) return true;
    return strstr(path, "/__pycache__/") != NULL || hk__str_starts_with(path, "__pycache__/") ||
           hk__str_ends_with(path, "/__pycache__");
}

/* Choose which variants to pull among names. Fills r->variants. */
int hk__client_choose_variants(hk_pull_result *r, char **names, size_t n, const hk_pull_spec *spec, const char *where) {
    size_t want = spec->all_variants ? n : 1;
    r->variants = calloc(want + 1, sizeof(char *));
    r->variant_paths = calloc(want + 1, sizeof(char *));
    if (!r->variants || !r->variant_paths) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (spec->all_variants) {
        for (size_t i = 0; i < n; i++)
            if (!(r->variants[r->nvariants++] = hk__strdup(names[i]))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        if (n == 0) return hk__fail(HK_ERR_NO_VARIANT, "%s has no build variants", where);
        return HK_OK;
    }
    if (spec->variant) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(names[i], spec->variant) == 0) {
                r->variants[r->nvariants++] = hk__strdup(names[i]);
                return r->variants[0] ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
            }
        }
        hk_strbuf sb;
        hk__sb_init(&sb);
        for (size_t i = 0; i < n; i++) hk__sb_printf(&sb, "%s%s", i ? ", " : "", names[i]);
        int rc = hk__fail(HK_ERR_NO_VARIANT, "%s has no variant '%s'; available: %s", where, spec->variant,
                         sb.data ? sb.data : "none");
        hk__sb_free(&sb);
        return rc;
    }
    /* the caller's machine description, else the process-wide detected one (env/detected.c) */
    const hk_env *env = spec->env;
    hk_choose_options co = HK_CHOOSE_OPTIONS_INIT;
    co.backend = spec->backend;
    co.families = spec->variant_families;
    char *best = NULL;
    int rc = env ? HK_OK : hk__env_cached(&env);
    if (rc == HK_OK) rc = hk_choose_variant(&best, env, (const char *const *)names, n, &co);
    if (rc) return hk__fail_context("%s", where);
    r->variants[r->nvariants++] = best;
    return HK_OK;
}

int hk__client_add_listed_file(hk_pull_result *r, size_t *cap, const char *path) {
    int rc = HK_VEC_RESERVE(r->files, *cap, r->nfiles + 1);
    if (rc) return rc;
    r->files[r->nfiles++] = path;
    return HK_OK;
}

int hk__client_add_file(hk_pull_result *r, size_t *cap, const char *path) {
    const char *copy = hk__arena_strdup(&r->strs, path);
    return copy ? hk__client_add_listed_file(r, cap, copy) : hk__fail(HK_ERR_NOMEM, "out of memory");
}

int hk__client_collect_local_files(hk_pull_result *r, size_t *cap, const char *dir, const char *rel) {
    char *path = rel[0] ? hk__asprintf("%s/%s", dir, rel) : hk__strdup(dir);
    DIR *d = path ? opendir(path) : NULL;
    int rc = HK_OK;
    struct dirent *de;
    while (d && rc == HK_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (strcmp(de->d_name, "__pycache__") == 0 || hk__str_ends_with(de->d_name, ".pyc")) continue;
        char *childrel = rel[0] ? hk__asprintf("%s/%s", rel, de->d_name) : hk__strdup(de->d_name);
        char *child = childrel ? hk__asprintf("%s/%s", dir, childrel) : NULL;
        if (child && hk__is_dir(child)) rc = hk__client_collect_local_files(r, cap, dir, childrel);
        else if (child) rc = hk__client_add_file(r, cap, childrel);
        free(child);
        free(childrel);
    }
    if (d) closedir(d);
    free(path);
    return rc;
}

/* ---- the files a pull's patterns choose ------------------------------------------------------- */

bool hk__pull_variant_metadata_file(const char *path, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(path, prefix, pl) != 0 || path[pl] != '/') return false;
    return strcmp(path + pl + 1, "metadata.json") == 0 || strcmp(path + pl + 1, "metadata.json.sigstore") == 0;
}

bool hk__pull_has_patterns(const hk_pull_spec *spec) {
    return (spec->include && spec->include[0]) || (spec->exclude && spec->exclude[0]);
}

void hk__pull_keep_chosen(hk_pull_result *r, size_t from, const char *prefix, const hk_pull_spec *spec,
                          size_t *out_chosen, size_t *out_all) {
    size_t chosen = 0, all = r->nfiles - from, w = from;
    for (size_t i = from; i < r->nfiles; i++) chosen += hk__glob_select(r->files[i], spec->include, spec->exclude);
    for (size_t i = from; i < r->nfiles; i++) {
        bool keep = chosen && (hk__glob_select(r->files[i], spec->include, spec->exclude) ||
                               hk__pull_variant_metadata_file(r->files[i], prefix));
        if (keep) r->files[w++] = r->files[i]; /* a dropped one's copy stays in strs until r goes */
    }
    r->nfiles = w;
    *out_chosen = chosen;
    *out_all = all;
}

int hk__pull_file_details(hk_pull_result *r, const hk_dl_item *items, size_t nitems) {
    r->file_sizes = calloc(r->nfiles + 1, sizeof *r->file_sizes);
    r->file_blobs = calloc(r->nfiles + 1, sizeof *r->file_blobs);
    r->file_cached = calloc(r->nfiles + 1, sizeof *r->file_cached);
    if (!r->file_sizes || !r->file_blobs || !r->file_cached) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_strmap bypath;
    hk__strmap_init(&bypath);
    int rc = HK_OK;
    for (size_t i = 0; rc == HK_OK && i < nitems; i++)
        for (size_t k = 0; rc == HK_OK && k < items[i].npaths; k++)
            rc = hk__strmap_put(&bypath, items[i].paths[k], i);
    for (size_t f = 0; rc == HK_OK && f < r->nfiles; f++) {
        size_t i;
        if (!hk__strmap_get(&bypath, r->files[f], &i)) {
            r->file_cached[f] = 1;
            r->details_pending = true;
            continue;
        }
        r->file_sizes[f] = items[i].size;
        r->file_cached[f] = items[i].hashed && !items[i].refetch;
        r->file_blobs[f] = items[i].etag; /* the listing's, which r holds */
    }
    hk__strmap_free(&bypath);
    return rc;
}

void hk__pull_drop_variants(hk_pull_result *r, const bool *dropped) {
    size_t w = 0;
    for (size_t v = 0; v < r->nvariants; v++) {
        if (dropped[v]) {
            free(r->variants[v]);
            free(r->variant_paths[v]);
            continue;
        }
        r->variants[w] = r->variants[v];
        r->variant_paths[w++] = r->variant_paths[v];
    }
    for (size_t v = w; v < r->nvariants; v++) r->variants[v] = r->variant_paths[v] = NULL;
    r->nvariants = w;
}

int hk__pull_offline_chosen_cached(size_t *chosen, bool *partial, const char *vdir, const char *rel,
                                   const hk_pull_spec *spec, const char *commit) {
    size_t missing = 0, listed = 0, all_missing = 0, all_listed = 0;
    char *first = NULL;
    *chosen = 0;
    *partial = false;
    int rc = hk__digest_missing_chosen(&missing, &listed, &first, vdir, rel, spec->include, spec->exclude);
    if (rc == HK_OK) rc = hk__digest_missing_files(&all_missing, &all_listed, NULL, vdir);
    if (rc == HK_ERR_NOMEM) return rc;
    if (rc) {
        hk_clear_error();
        return HK_OK;
    }
    *chosen = listed;
    *partial = all_missing > 0;
    if (missing)
        rc = hk__fail(HK_ERR_OFFLINE, "offline: %zu of the %zu files of %s at %.12s the patterns choose %s not in the "
                      "cache (e.g. %s/%s); pull them online (the same command without HF_HUB_OFFLINE)", missing, listed,
                      spec->repo_id, commit, missing == 1 ? "is" : "are", rel, first ? first : "?");
    free(first);
    return rc;
}
