/* hubkern cache rm: remove a whole repo, or one revision of it (its snapshot, the refs naming it,
 * its verification receipts, then the blobs left unused). */
#include "cache/maint_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* rm: the receipts of the whole repo (commit NULL) or of one commit, wherever they are kept. Other
 * repos' receipts and huggingface_hub's lock files beside them are left alone. Returns how many
 * receipt folders matched (removed, or listed by a dry run). */
static size_t remove_receipts(hk_prune_ctx *c, const char *commit, bool no_snapshot) {
    char *dirs[2];
    size_t n = hk__receipt_repo_dirs(dirs, c->root, hk__cache_folder_of(c->repo_dir)), found = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = commit ? hk__path_join(dirs[i], commit) : hk__strdup(dirs[i]);
        if (p && hk__is_dir(p)) {
            char *what = commit ? hk__asprintf("verification receipts of %s%s", commit,
                                              no_snapshot ? " (its snapshot was not in the cache)" : "")
                                : NULL;
            hk__cache_remove_path(c, p, what ? what : "verification receipts", 0);
            free(what);
            found++;
        }
        free(p);
        free(dirs[i]);
    }
    if (!commit && !c->dry_run) { /* .locks/<folder> once empty (never when lock files remain) */
        char *ld = hk__asprintf("%s/.locks/%s", c->root, hk__cache_folder_of(c->repo_dir));
        if (ld) rmdir(ld);
        free(ld);
    }
    return found;
}

int hk__cache_run_rm(hk_cache_report *rep, const char *root, const hk_cache_options *o) {
    const hk_cache_sink sink = hk__cache_sink_of(o);
    const char *repo_id = o->repo_id, *revision = o->revision;
    bool dry_run = o->dry_run != 0;
    hk_cache_repos repos;
    int rc = hk__cache_list_repos(&repos, root, repo_id);
    if (rc) return rc;
    if (repos.n == 0) {
        hk__cache_repos_free(&repos);
        return hk__fail(HK_ERR_NOT_FOUND, "%s is not in the cache %s", repo_id, root);
    }
    bool found_rev = false;
    for (size_t i = 0; rc == HK_OK && i < repos.n; i++) {
        const char *dir = repos.dirs[i];
        char *label = hk__cache_repo_label(repos.types[i], repos.ids[i]);
        hk_prune_ctx c = {rep, root, dir, label ? label : repos.ids[i], dry_run, &sink, NULL, 0, 0, NULL, 0, 0};
        if (!revision) {
            char *blobs = hk__path_join(dir, "blobs");
            uint64_t bytes = blobs ? hk__cache_dir_bytes(blobs) : 0;
            free(blobs);
            hk__cache_remove_path(&c, dir, "whole repo", bytes);
            remove_receipts(&c, NULL, false);
            found_rev = true;
        } else {
            char commit[65];
            size_t rl = strlen(revision);
            if ((rl == 40 || rl == 64) && hk__is_hex(revision, rl)) snprintf(commit, sizeof commit, "%s", revision);
            else if (hk__cache_read_ref(commit, dir, revision) != HK_OK) {
                hk_clear_error();
                free(label);
                continue;
            }
            char *snap = hk__asprintf("%s/snapshots/%s", dir, commit);
            bool had_snap = snap && hk__is_dir(snap);
            if (had_snap) {
                found_rev = true;
                char *what = hk__asprintf("snapshot %s", commit);
                hk__cache_remove_path(&c, snap, what ? what : commit, 0);
                free(what);
            }
            free(snap);
            /* receipts alone (snapshot removed by hand or by `hf cache rm`) are a match too: they
             * are what the caller asked to be rid of */
            if (remove_receipts(&c, commit, !had_snap)) found_rev = true;
            char *ne = hk__asprintf("%s/.no_exist/%s", dir, commit);
            if (ne && hk__path_exists(ne) && !dry_run) hk__rmtree(ne);
            free(ne);
            /* refs naming that commit */
            char *refs = hk__path_join(dir, "refs");
            DIR *d = refs ? opendir(refs) : NULL;
            struct dirent *de;
            while (d && (de = readdir(d)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char cm[65];
                if (hk__cache_read_ref(cm, dir, de->d_name) == HK_OK && strcmp(cm, commit) == 0) {
                    found_rev = true;
                    char *p = hk__path_join(refs, de->d_name);
                    char *what = hk__asprintf("ref %s", de->d_name);
                    if (p) hk__cache_remove_path(&c, p, what ? what : de->d_name, 0);
                    free(what);
                    free(p);
                }
                hk_clear_error();
            }
            if (d) closedir(d);
            free(refs);
            /* blobs no longer referenced */
            if (!dry_run) {
                char *snaps = hk__path_join(dir, "snapshots");
                if (snaps) rc = hk__cache_walk(snaps, hk__cache_collect_used, &c, false);
                free(snaps);
                if (rc == HK_OK) hk__cache_prune_blobs(&c);
            }
        }
        hk__prune_ctx_free(&c);
        free(label);
    }
    hk__cache_repos_free(&repos);
    if (rc == HK_OK && !found_rev)
        rc = hk__fail(HK_ERR_NOT_FOUND,
                     "revision '%s' of %s is not in the cache (no snapshot, ref or verification receipt "
                     "names it)", revision, repo_id);
    return rc;
}
