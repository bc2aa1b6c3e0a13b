/* hk_lockfile_add_tree: lock a kernel and every kernel it depends on through any of its variants,
 * as kernels 0.17.2 locking.py lock_kernel_tree (not the machine's tree: every variant's). */
#include "kernel/kernel_internal.h"
#include "hubkern/signature.h"

#include "cache/cache_internal.h" /* hk__kernel_repo_id_valid */
#include "hubkern/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct frame {
    const char *repo;
    int version;
    const char *revision;
} frame;

typedef struct lock_walk {
    hk_lockfile *lock;
    hk_hub *hub;
    bool trust;
    frame stack[HK_DEP_MAX_DEPTH + 1];
    size_t depth;
    size_t nodes;
} lock_walk;

static bool locked_already(const hk_lockfile *lock, const char *repo, int version, const char *revision) {
    for (size_t i = 0; i < hk_lockfile_count(lock); i++) {
        const hk_lock_entry *e = hk_lockfile_entry(lock, i);
        if (strcmp(hk_lock_entry_repo_id(e), repo) != 0) continue;
        const char *r = hk_lock_entry_revision(e);
        if (revision ? r && strcmp(r, revision) == 0 : !r && hk_lock_entry_version(e) == version) return true;
    }
    return false;
}

static char *stack_path(const lock_walk *w, const char *last) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < w->depth; i++) hk__sb_printf(&sb, "%s%s", i ? " -> " : "", w->stack[i].repo);
    if (last) hk__sb_printf(&sb, "%s%s", sb.len ? " -> " : "", last);
    if (sb.oom) {
        hk__sb_free(&sb);
        return NULL;
    }
    return sb.data ? sb.data : hk__strdup("");
}

static int lock_node(lock_walk *w, const char *repo, int version, const char *revision);

/* Every variant's metadata.json at commit, and the dependencies each declares. */
static int lock_variants(lock_walk *w, const char *repo, const char *commit, const char *path) {
    char **names = NULL;
    size_t n = 0;
    int rc = hk_hub_list_variants(&names, &n, w->hub, repo, commit);
    if (rc) return hk__fail_context("%s: listing the variants at %s", path, commit);
    for (size_t v = 0; v < n && rc == HK_OK; v++) {
        hk_metadata_owned md;
        rc = hk__tree_fetch_metadata(&md, w->hub, repo, commit, names[v], HK_SIGNATURE_DEFAULT, true);
        if (rc) {
            hk__fail_context("%s: metadata.json of variant %s", path, names[v]);
            break;
        }
        if (md.num_deps > HK_DEP_MAX_FANOUT)
            rc = hk__fail(HK_ERR_DEPENDENCY, "%s: %s variant %s declares %zu kernel-depends (at most %d)", path,
                          repo, names[v], md.num_deps, HK_DEP_MAX_FANOUT);
        for (size_t d = 0; d < md.num_deps && rc == HK_OK; d++)
            rc = lock_node(w, md.deps[d].repo_id, md.deps[d].version, md.deps[d].revision);
        hk__metadata_free(&md);
    }
    hk_hub_strv_free(names);
    return rc;
}

static int lock_node(lock_walk *w, const char *repo, int version, const char *revision) {
    if (locked_already(w->lock, repo, version, revision)) return HK_OK; /* its tree is locked too */
    char *path = stack_path(w, repo);
    if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (size_t i = 0; i < w->depth && rc == HK_OK; i++) {
        const frame *f = &w->stack[i];
        if (strcmp(f->repo, repo) == 0 &&
            (revision ? f->revision && strcmp(f->revision, revision) == 0 : !f->revision && f->version == version))
            rc = hk__fail(HK_ERR_DEPENDENCY, "cyclic kernel dependency detected: %s", path);
    }
    if (rc == HK_OK && w->depth > HK_DEP_MAX_DEPTH)
        rc = hk__fail(HK_ERR_DEPENDENCY, "%s: the dependency tree is deeper than %d", path, HK_DEP_MAX_DEPTH);
    if (rc == HK_OK && ++w->nodes > HK_DEP_MAX_NODES)
        rc = hk__fail(HK_ERR_DEPENDENCY, "%s: the dependency tree has more than %d nodes", path, HK_DEP_MAX_NODES);
    if (rc == HK_OK && !hk__kernel_repo_id_valid(repo))
        rc = hk__fail(HK_ERR_INVALID_ARG, "%s: '%s' is not a valid repo id (org/name)", path, repo);
    if (rc == HK_OK && !w->trust) { /* before anything of it is downloaded */
        char org[128];
        snprintf(org, sizeof org, "%.*s", (int)(strchr(repo, '/') - repo), repo);
        int trusted = 0;
        rc = hk_hub_check_trust(&trusted, w->hub, org);
        if (rc) hk__fail_context("%s: checking the publisher of %s", path, repo);
        else if (!trusted)
            rc = hk__fail(HK_ERR_UNTRUSTED, "%s: '%s' is not from a trusted publisher (or its trust status could "
                         "not be verified); pass --trust-remote-code to lock it anyway", path, repo);
    }
    char *commit = NULL;
    if (rc == HK_OK) {
        rc = hk_hub_resolve(&commit, w->hub, repo, revision ? -1 : version, revision);
        if (rc) hk__fail_context("%s", path);
    }
    if (rc == HK_OK) {
        w->stack[w->depth++] = (frame){repo, version, revision};
        rc = lock_variants(w, repo, commit, path);
        w->depth--;
    }
    if (rc == HK_OK) rc = hk_lockfile_add(w->lock, repo, revision ? HK_VERSION_UNSET : version, revision, commit);
    hk_free(commit);
    free(path);
    return rc;
}

HK_API int hk_lockfile_add_tree(hk_lockfile *lock, const hk_get_kernel_options *opts) {
    if (!lock || !opts) return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_add_tree: NULL argument");
    hk_get_kernel_options ho;
    int rc = hk__get_kernel_options_take(&ho, opts, "hk_lockfile_add_tree");
    if (rc) return rc;
    const hk_get_kernel_options *o = &ho;
    if (!o->repo_id || !hk__kernel_repo_id_valid(o->repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "hk_lockfile_add_tree: a valid repo_id is required");
    if ((o->kernel_version != HK_VERSION_UNSET) == (o->revision != NULL) || (o->kernel_version < 0 && !o->revision))
        return hk__fail(HK_ERR_INVALID_ARG, "give exactly one of version and revision for %s", o->repo_id);
    lock_walk w;
    memset(&w, 0, sizeof w);
    w.lock = lock;
    w.trust = o->trust_remote_code != 0;
    bool owned = false;
    rc = hk__loader_hub(&w.hub, &owned, o);
    if (rc == HK_OK) rc = lock_node(&w, o->repo_id, o->kernel_version, o->revision);
    if (rc == HK_OK) hk_clear_error();
    if (owned) hk_hub_free(w.hub);
    return rc;
}
