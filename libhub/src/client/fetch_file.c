/* One verified file of a kernel repo at a commit (the arch check and the dependency tree read
 * metadata.json before a pull): listed, downloaded, hash-checked and linked into the snapshot,
 * nothing else fetched. A variant's metadata.json comes with its metadata.json.sigstore, and both
 * are linked only after the signature check passed (nothing unverified enters the snapshot). */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/signature.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const tree_entry *find_entry(const tree *t, const char *path) {
    for (size_t i = 0; i < t->n; i++)
        if (!t->e[i].dir && strcmp(t->e[i].path, path) == 0) return &t->e[i];
    return NULL;
}

static const char *entry_etag(const tree_entry *e) { return e->lfs_oid ? e->lfs_oid : e->oid; }

/* "build/<variant>/metadata.json" → "<variant>" (malloc'd), else NULL. */
static char *metadata_variant(const char *path) {
    const char *tail = "/metadata.json";
    size_t n = strlen(path), nt = strlen(tail);
    if (strncmp(path, "build/", 6) != 0 || n <= 6 + nt || strcmp(path + n - nt, tail) != 0) return NULL;
    char *v = hk__strndup(path + 6, n - 6 - nt);
    if (v && strchr(v, '/')) {
        free(v);
        return NULL;
    }
    return v;
}

/* Check the downloaded metadata.json (and bundle, when listed) of variant in a private folder of
 * links to their blobs, before anything is linked into the snapshot. */
static int check_staged_signature(hk_hub *hub, int mode, const char *repo_id, const char *repo_dir,
                                  const char *commit, const char *variant, const char *meta_etag,
                                  const char *bundle_etag) {
    char rnd[9];
    hk__random_hex8(rnd);
    char name[40];
    snprintf(name, sizeof name, "sig-%.12s.%s", commit, rnd);
    char *stage = hk__cache_staging_path(repo_dir, name);
    char *m_link = stage ? hk__path_join(stage, "metadata.json") : NULL;
    char *b_link = stage ? hk__path_join(stage, "metadata.json.sigstore") : NULL;
    char *m_blob = b_link ? hk__cache_blob_path(repo_dir, meta_etag, NULL) : NULL;
    char *b_blob = m_blob && bundle_etag ? hk__cache_blob_path(repo_dir, bundle_etag, NULL) : NULL;
    int rc = HK_OK;
    if (!stage || !m_link || !b_link || !m_blob || (bundle_etag && !b_blob))
        rc = hk_last_error_code() ? hk_last_error_code() : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__mkdirs(stage, 0777);
    if (rc == HK_OK && (symlink(m_blob, m_link) != 0 || (b_blob && symlink(b_blob, b_link) != 0)))
        rc = hk__fail(HK_ERR_IO, "cannot stage the signature check in %s", stage);
    if (rc == HK_OK) rc = hk__client_check_signature(hub, mode, repo_id, repo_dir, commit, variant, stage);
    if (stage) hk__rmtree(stage);
    free(stage);
    free(m_link);
    free(b_link);
    free(m_blob);
    free(b_blob);
    return rc;
}

/* ---- one file ---------------------------------------------------------------------------------- */

int hk__hub_fetch_file(char **out_path, hk_hub *hub, const char *repo_id, const char *commit, const char *path,
                       int signature_mode) {
    *out_path = NULL;
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    if (!commit || !hk__is_commit_id(commit) || !path || !hk__path_is_safe_relative(path))
        return hk__fail(HK_ERR_INVALID_ARG, "hk__hub_fetch_file: a commit id and a safe relative path are required");
    char *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    char *local = repo_dir ? hk__cache_snapshot_path(repo_dir, commit, path) : NULL;
    char *dir = local ? hk__strdup(path) : NULL;
    if (!local || !dir) {
        rc = local ? hk__fail(HK_ERR_NOMEM, "out of memory") : hk_last_error_code();
        goto out;
    }
    if (hk__path_exists(local)) goto out; /* the snapshot link and its blob are here: no network */
    if (hub->offline) {
        rc = hk__fail(HK_ERR_OFFLINE, "%s of %s at %s is not in the cache (%s) and the client is offline; "
                     "download it online first", path, repo_id, commit, hub->cache_root);
        goto out;
    }
    /* the file's blob id and size come from a listing of its directory (one page, not recursive) */
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else strcpy(dir, "");
    const tree *t;
    tree *listed;
    /* the commit's listing when this process holds it already (the resolve listed it): no request */
    if (!hk__client_commit_tree_known(&t, hub, repo_id, commit)) {
        if ((rc = hk__client_list_tree(&listed, hub, repo_id, commit, dir, false))) goto out;
        t = listed;
    }
    char *variant = metadata_variant(path);
    char *bundle_path = variant ? hk__asprintf("%s.sigstore", path) : NULL;
    const tree_entry *e = find_entry(t, path), *b = bundle_path ? find_entry(t, bundle_path) : NULL;
    const char *etag = e ? entry_etag(e) : NULL;
    if (!e) {
        rc = hk__fail(HK_ERR_NOT_FOUND, "%s has no file %s at %s", repo_id, path, commit);
    } else if (variant && !bundle_path) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    } else {
        const tree_entry *want[2] = {e, b};
        hk_dl_item items[2];
        const char *paths[2] = {path, bundle_path};
        size_t n = b ? 2 : 1;
        memset(items, 0, sizeof items);
        for (size_t i = 0; i < n && rc == HK_OK; i++) {
            const char *et = entry_etag(want[i]);
            size_t el = et ? strlen(et) : 0;
            if (!((el == 64 && want[i]->lfs_oid) || (el == 40 && !want[i]->lfs_oid)) || !hk__is_hex(et, el))
                rc = hk__fail(HK_ERR_PROTOCOL, "the listing gives no usable content hash for %s (oid '%s')", paths[i],
                             et ? et : "(none)");
            items[i].etag = et;
            items[i].size = want[i]->size;
            items[i].paths = &paths[i];
            items[i].npaths = 1;
        }
        hk_dl_stats st = {0, 0, 0, 0};
        /* a variant's metadata.json: blobs first, links only after its signature check */
        if (rc == HK_OK) rc = hk__download_blobs(&st, hub, repo_id, repo_dir, commit, items, n, variant == NULL);
        if (rc == HK_OK && variant)
            rc = check_staged_signature(hub, signature_mode, repo_id, repo_dir, commit, variant, etag,
                                        b ? entry_etag(b) : NULL);
        for (size_t i = 0; rc == HK_OK && variant && i < n; i++)
            rc = hk_cache_link_snapshot(repo_dir, commit, paths[i], items[i].etag);
    }
    free(variant);
    free(bundle_path);
    hk__client_tree_unref(t);
out:
    free(dir);
    free(repo_dir);
    if (rc == HK_OK) *out_path = local;
    else free(local);
    return rc;
}

int hk__hub_peek_file(char **out, size_t *out_len, char **out_where, hk_hub *hub, const char *repo_id,
                      const char *commit, const char *path, size_t max) {
    *out = *out_where = NULL;
    *out_len = 0;
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    char *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    char *local = repo_dir ? hk__cache_snapshot_path(repo_dir, commit, path) : NULL;
    free(repo_dir);
    if (!local) return hk_last_error_code();
    if (hk__path_exists(local)) {
        *out_where = local;
        return hk__read_file(out, out_len, local, max);
    }
    free(local);
    if (hub->offline)
        return hk__fail(HK_ERR_OFFLINE, "%s of %s at %s is not in the cache and the client is offline", path,
                       repo_id, commit);
    char *epath = hk__pct_encode(path, true);
    char *url = epath ? hk__asprintf("%s/kernels/%s/resolve/%s/%s", hub->endpoint, repo_id, commit, epath) : NULL;
    free(epath);
    if (!url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    rc = hk__http_get(&r, hub, url, max);
    if (rc == HK_OK && (r.status < 200 || r.status > 299)) rc = hk__http_fail(&r, url);
    if (rc == HK_OK) {
        *out_len = r.body.len;
        *out = r.body.data ? hk__strndup(r.body.data, r.body.len) : hk__strdup("");
        if (!*out) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    hk__http_resp_free(&r);
    if (rc == HK_OK) *out_where = url;
    else free(url);
    return rc;
}
