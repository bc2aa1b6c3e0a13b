/* kernel-status.toml (kernel-hub-format.md §13): the three string keys of a redirect, read with a
 * minimal TOML subset; whether it exists at a commit read from that commit's listing, and its
 * absence remembered under .no_exist/ as huggingface_hub does. */
#include "cache/cache_internal.h"
#include "client/client.h"

#include <stdlib.h>
#include <string.h>

/* ---- kernel-status.toml --------------------------------------------------------------------- */
/* Minimal TOML reading for the three string keys of a redirect. */
static char *toml_string(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, key, kl) != 0) continue;
        p += kl;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '=') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        char q = *p;
        if (q != '"' && q != '\'') continue;
        const char *e = strchr(p + 1, q);
        if (!e) return NULL;
        return hk__strndup(p + 1, (size_t)(e - p - 1));
    }
    return NULL;
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
        tree t;
        int lrc = hk__client_commit_tree(&t, hub, repo_id, commit);
        if (lrc) return hk__fail_context("checking kernel-status.toml of %s", repo_id);
        const tree_entry *e = hk__client_tree_find(&t, "kernel-status.toml");
        bool present = e && !e->dir;
        hk__client_tree_free(&t);
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
    const char *text = r.body.data ? r.body.data : "";
    char *kind = toml_string(text, "kind");
    if (!kind || strcmp(kind, "redirect") != 0) {
        rc = hk__fail(HK_ERR_PARSE, "kernel-status.toml of %s: unknown kind '%s'", repo_id, kind ? kind : "(none)");
    } else {
        *out_dest = toml_string(text, "destination");
        *out_rev = toml_string(text, "revision");
        if (!*out_dest) rc = hk__fail(HK_ERR_PARSE, "kernel-status.toml of %s has no destination", repo_id);
        else if (!*out_rev && !(*out_rev = hk__strdup("main"))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        /* the file is unsigned and any mirror can serve it: its names are checked here, where they
         * enter, before anything is asked or a path is built from them */
        else if (!hk_repo_id_valid(*out_dest) || !strchr(*out_dest, '/'))
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
