/* hubkern cache ls: the repos of a cache with their refs, snapshots (and, as JSON, variants) and
 * blob bytes. */
#include "cache/maint_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

int hk__cache_run_ls(hk_cache_report *rep, const char *root, const hk_cache_options *o) {
    hk_cache_line_fn fn = o->line_fn;
    void *ud = o->line_userdata;
    bool json = o->json != 0;
    hk_cache_repos repos;
    int rc = hk__cache_list_repos(&repos, root, o->repo_id);
    if (rc) return rc;
    cJSON *jroot = json ? cJSON_CreateObject() : NULL;
    cJSON *jrepos = json ? cJSON_AddArrayToObject(jroot, "repos") : NULL;
    if (json) cJSON_AddStringToObject(jroot, "cache", root);
    for (size_t i = 0; i < repos.n; i++) {
        const char *dir = repos.dirs[i];
        char *blobs = hk__path_join(dir, "blobs");
        uint64_t bytes = blobs ? hk__cache_dir_bytes(blobs) : 0;
        free(blobs);
        rep->repos++;
        rep->bytes += bytes;
        cJSON *jr = json ? cJSON_CreateObject() : NULL;
        if (jr) {
            char *id = hk__cache_repo_label(repos.types[i], repos.ids[i]);
            cJSON_AddStringToObject(jr, "id", id ? id : repos.ids[i]); /* hf cache ls's "id" */
            free(id);
            cJSON_AddStringToObject(jr, "repo_id", repos.ids[i]);
            cJSON_AddStringToObject(jr, "repo_type", hk__repo_type_singular(repos.types[i]));
            cJSON_AddStringToObject(jr, "path", dir);
            cJSON_AddNumberToObject(jr, "size", (double)bytes);
            cJSON_AddItemToArray(jrepos, jr);
        }
        hk_strbuf line;
        hk__sb_init(&line);
        hk__sb_printf(&line, "%s/%s  %.1f MB", hk__repo_type_singular(repos.types[i]), repos.ids[i], bytes / 1e6);
        /* refs */
        cJSON *jrefs = jr ? cJSON_AddObjectToObject(jr, "refs") : NULL;
        char *refsdir = hk__path_join(dir, "refs");
        DIR *d = refsdir ? opendir(refsdir) : NULL;
        struct dirent *de;
        hk__sb_append(&line, "  refs:");
        size_t nrefs = 0;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            char commit[65];
            if (hk__cache_read_ref(commit, dir, de->d_name) != HK_OK) {
                hk_clear_error();
                continue;
            }
            hk__sb_printf(&line, " %s=%.8s", de->d_name, commit);
            if (jrefs) cJSON_AddStringToObject(jrefs, de->d_name, commit);
            nrefs++;
            rep->refs++;
        }
        if (!nrefs) hk__sb_append(&line, " none");
        if (d) closedir(d);
        free(refsdir);
        /* snapshots */
        cJSON *jsnaps = jr ? cJSON_AddArrayToObject(jr, "snapshots") : NULL;
        char *snapdir = hk__path_join(dir, "snapshots");
        d = snapdir ? opendir(snapdir) : NULL;
        hk__sb_append(&line, "  snapshots:");
        size_t nsnap = 0;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            hk__sb_printf(&line, " %.8s", de->d_name);
            if (jsnaps) {
                cJSON *js = cJSON_CreateObject();
                cJSON_AddStringToObject(js, "commit", de->d_name);
                char *b = hk__asprintf("%s/%s/build", snapdir, de->d_name);
                cJSON *jv = cJSON_AddArrayToObject(js, "variants");
                DIR *vd = b ? opendir(b) : NULL;
                struct dirent *ve;
                while (vd && (ve = readdir(vd)) != NULL)
                    if (ve->d_name[0] != '.') cJSON_AddItemToArray(jv, cJSON_CreateString(ve->d_name));
                if (vd) closedir(vd);
                free(b);
                cJSON_AddItemToArray(jsnaps, js);
            }
            nsnap++;
            rep->snapshots++;
        }
        if (!nsnap) hk__sb_append(&line, " none");
        if (d) closedir(d);
        free(snapdir);
        if (!json && line.data) hk__cache_emit(fn, ud, "%s", line.data);
        hk__sb_free(&line);
    }
    if (json) {
        char *s = cJSON_PrintUnformatted(jroot);
        if (s) hk__cache_emit(fn, ud, "%s", s);
        free(s);
        cJSON_Delete(jroot);
    }
    hk__cache_repos_free(&repos);
    return HK_OK;
}
