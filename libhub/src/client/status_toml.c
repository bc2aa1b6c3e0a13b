/* kernel-status.toml (kernel-hub-format.md §13): the three string keys of a redirect, read as TOML
 * 1.0 (util/toml.c); whether it exists at a commit read from that commit's listing, and its
 * absence remembered under .no_exist/ as huggingface_hub does. */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "util/toml.h"

#include <stdlib.h>
#include <string.h>

/* ---- kernel-status.toml --------------------------------------------------------------------- */
/* The file is read by the project's TOML 1.0 reader, as kernels reads it with tomllib: a key inside
 * a multi-line string or a [table], a key given twice, an escaped character, all mean what TOML
 * says (a line-by-line reader once found a "destination" that Python does not). */
static int status_key(char **out, const hk_toml *root, const char *key, const char *repo_id) {
    *out = NULL;
    const hk_toml *v = hk__toml_get(root, key);
    if (!v) return HK_OK;
    if (v->kind != HK_TOML_STRING)
        return hk__fail(HK_ERR_PARSE, "kernel-status.toml of %s: '%s' is not a string", repo_id, key);
    return (*out = hk__strndup(v->str, v->str_len)) ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

/* No kernel-status.toml at commit: recorded as .no_exist/<commit>/kernel-status.toml, as
 * huggingface_hub does, so that a later resolve of that commit asks nothing. */
static void remember_absent(const hk_hub *hub, const char *repo_id, const char *commit) {
    if (hub->read_only) return; /* asked again next time instead */
    char *dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    char *marker = dir ? hk__cache_no_exist_path(dir, commit, "kernel-status.toml") : NULL;
    char *mdir = marker ? hk__strdup(marker) : NULL;
    char *snaps = dir ? hk__cache_repo_subdir(dir, "snapshots") : NULL;
    if (snaps) hk__mkdirs(snaps, 0777); /* a repo folder without snapshots/ reads as corrupt */
    free(snaps);
    if (mdir) {
        *strrchr(mdir, '/') = '\0';
        if (hk__mkdirs(mdir, 0777) == HK_OK && !hk__path_exists(marker)) hk__write_file_atomic(marker, "", 0);
    }
    hk_clear_error();
    free(mdir);
    free(marker);
    free(dir);
}

/* *out_dest / *out_rev set when the repo redirects. */
int hk__client_check_status(char **out_dest, char **out_rev, hk_hub *hub, const char *repo_id, const char *commit) {
    *out_dest = *out_rev = NULL;
    /* A commit never changes: its recorded absence (below, and huggingface_hub's own marker) answers
     * without a request, which is what keeps a warm pull to one request. */
    if (hk__is_commit_id(commit)) {
        char *dir0 = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
        char *known = dir0 ? hk__cache_no_exist_path(dir0, commit, "kernel-status.toml") : NULL;
        bool absent = known && hk__path_exists(known);
        hk_clear_error();
        free(known);
        free(dir0);
        if (absent) return HK_OK;
    }
    /* The listing of the commit says whether the file is there; the pull and the variant choice
     * need that listing anyway (one request for all three, client/tree.c), and the file itself is
     * asked for only when it exists. */
    if (hk__is_commit_id(commit)) {
        const tree *t;
        int lrc = hk__client_commit_tree(&t, hub, repo_id, commit);
        if (lrc) return hk__fail_context("checking kernel-status.toml of %s", repo_id);
        const tree_entry *e = hk__client_tree_find(t, "kernel-status.toml");
        bool present = e && !e->dir;
        hk__client_tree_unref(t);
        if (!present) {
            remember_absent(hub, repo_id, commit);
            return HK_OK;
        }
    }
    char *url = hk__asprintf("%s/kernels/%s/resolve/%s/kernel-status.toml", hub->endpoint, repo_id, commit);
    if (!url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    int rc = hk__http_get(&r, hub, url, 1u << 20);
    free(url);
    if (rc) {
        hk__http_resp_free(&r);
        return hk__fail_context("checking kernel-status.toml of %s", repo_id);
    }
    if (r.status == 404) {
        /* no redirect; remember the absence like Python does */
        const char *rc_commit = r.h.x_repo_commit && hk__is_commit_id(r.h.x_repo_commit) ? r.h.x_repo_commit : commit;
        remember_absent(hub, repo_id, rc_commit);
        hk__http_resp_free(&r);
        return HK_OK;
    }
    if (r.status != 200) {
        char *what = hk__asprintf("checking kernel-status.toml of %s", repo_id);
        rc = hk__http_fail(&r, what ? what : "kernel-status.toml");
        free(what);
        hk__http_resp_free(&r);
        return rc;
    }
    char *what = hk__asprintf("kernel-status.toml of %s", repo_id);
    hk_toml *doc = NULL;
    char *kind = NULL;
    rc = what ? hk__toml_parse(&doc, r.body.data ? r.body.data : "", r.body.len, what) : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(what);
    if (rc == HK_OK) rc = status_key(&kind, doc, "kind", repo_id);
    if (rc == HK_OK) rc = status_key(out_dest, doc, "destination", repo_id);
    if (rc == HK_OK) rc = status_key(out_rev, doc, "revision", repo_id);
    hk__toml_free(doc);
    if (rc) {
    } else if (!kind || strcmp(kind, "redirect") != 0) {
        rc = hk__fail(HK_ERR_PARSE, "kernel-status.toml of %s: unknown kind '%.80s'", repo_id, kind ? kind : "(none)");
    } else {
        if (!*out_dest || !**out_dest) rc = hk__fail(HK_ERR_PARSE, "kernel-status.toml of %s has no destination", repo_id);
        else if (!*out_rev && !(*out_rev = hk__strdup("main"))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        /* the file is unsigned and any mirror can serve it: its names are checked here, where they
         * enter, before anything is asked or a path is built from them */
        else if (!hk__kernel_repo_id_valid(*out_dest))
            rc = hk__fail(HK_ERR_PROTOCOL, "kernel-status.toml of %s redirects to '%.80s', which is not a kernel repo "
                          "id (org/name); fix that file", repo_id, *out_dest);
        else if (!hk__revision_valid(*out_rev))
            rc = hk__fail(HK_ERR_PROTOCOL, "kernel-status.toml of %s redirects to revision '%.80s', which is not a "
                          "revision name; fix that file", repo_id, *out_rev);
    }
    free(kind);
    hk__http_resp_free(&r);
    if (rc) {
        free(*out_dest);
        free(*out_rev);
        *out_dest = *out_rev = NULL;
    }
    return rc;
}
