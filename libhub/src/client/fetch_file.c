/* One verified file of a kernel repo at a commit (the arch check reads metadata.json before a
 * pull): listed, downloaded, hash-checked and linked into the snapshot, nothing else fetched. */
#include "cache/cache.h"
#include "client/client.h"

#include <stdlib.h>
#include <string.h>

/* ---- one file ---------------------------------------------------------------------------------- */

int hk__hub_fetch_file(char **out_path, hk_hub *hub, const char *repo_id, const char *commit, const char *path) {
    *out_path = NULL;
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    if (!commit || !hk__is_commit_id(commit) || !path || !hk__path_is_safe_relative(path))
        return hk__fail(HK_ERR_INVALID_ARG, "hk__hub_fetch_file: a commit id and a safe relative path are required");
    char *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    char *local = repo_dir ? hk__asprintf("%s/snapshots/%s/%s", repo_dir, commit, path) : NULL;
    char *dir = hk__strdup(path);
    if (!local || !dir) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
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
    tree t;
    if ((rc = hk__client_list_tree(&t, hub, repo_id, commit, dir, false))) goto out;
    const tree_entry *e = NULL;
    for (size_t i = 0; i < t.n && !e; i++)
        if (!t.e[i].dir && strcmp(t.e[i].path, path) == 0) e = &t.e[i];
    const char *etag = e ? (e->lfs_oid ? e->lfs_oid : e->oid) : NULL;
    size_t el = etag ? strlen(etag) : 0;
    if (!e) {
        rc = hk__fail(HK_ERR_NOT_FOUND, "%s has no file %s at %s", repo_id, path, commit);
    } else if (!((el == 64 && e->lfs_oid) || (el == 40 && !e->lfs_oid)) || !hk__is_hex(etag, el)) {
        rc = hk__fail(HK_ERR_PROTOCOL, "the listing gives no usable content hash for %s (oid '%s')", path,
                     etag ? etag : "(none)");
    } else {
        char *paths[1] = {(char *)path};
        hk_dl_item item;
        memset(&item, 0, sizeof item);
        item.etag = (char *)etag;
        item.size = e->size;
        item.paths = paths;
        item.npaths = 1;
        hk_dl_stats st = {0, 0, 0};
        rc = hk__download_blobs(&st, hub, repo_id, repo_dir, commit, &item, 1, true);
    }
    hk__client_tree_free(&t);
out:
    free(dir);
    free(repo_dir);
    if (rc == HK_OK) *out_path = local;
    else free(local);
    return rc;
}
