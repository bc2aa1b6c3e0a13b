/* Kernel dependency trees (metadata.json kernel-depends), as kernels 0.17.2 deps.py
 * resolve_kernel_tree: resolve every node (publisher, commit, variant, metadata, archs) before
 * anything is installed, refuse cycles; then install and load depth-first, dependencies before
 * their dependents, each variant once per process (the handle registry in kernel.c). */
#include "kernel/kernel_internal.h"
#include "hubkern/signature.h"

#include "cache/cache_internal.h"
#include "client/client.h"
#include "hubkern/hub.h"
#include "util/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void node_free(hk__tnode *n) {
    free(n->decl_repo);
    free(n->repo_id);
    free(n->revision);
    free(n->commit);
    free(n->variant);
    free(n->dir);
    if (n->has_md) hk__metadata_free(&n->md);
    memset(n, 0, sizeof *n);
}

HK_API void hk_kernel_tree_free(hk_kernel_tree *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) node_free(&t->v[i]);
    free(t->v);
    free(t);
}

int hk__tree_new(hk_kernel_tree **out) {
    *out = calloc(1, sizeof **out);
    return *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

int hk__tree_push(size_t *out_idx, hk_kernel_tree *t, const char *decl_repo, int version, const char *revision,
                  int parent) {
    int rc = HK_VEC_RESERVE(t->v, t->cap, t->n + 1);
    if (rc) return rc;
    hk__tnode *n = &t->v[t->n];
    memset(n, 0, sizeof *n);
    n->decl_repo = hk__strdup(decl_repo);
    n->version = revision ? HK_VERSION_UNSET : version;
    n->revision = revision ? hk__strdup(revision) : NULL;
    n->parent = parent;
    n->depth = parent < 0 ? 0 : t->v[parent].depth + 1;
    if (!n->decl_repo || (revision && !n->revision)) {
        node_free(n);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    *out_idx = t->n++;
    return HK_OK;
}

/* "org/root -> org/a -> org/b" for node i (caller frees). */
char *hk__tree_path(const hk_kernel_tree *t, size_t i) {
    size_t chain[HK_DEP_MAX_DEPTH + 2], n = 0;
    for (int j = (int)i; j >= 0 && n < HK_ARRAY_LEN(chain); j = t->v[j].parent) chain[n++] = (size_t)j;
    hk_strbuf sb;
    hk__sb_init(&sb);
    while (n-- > 0) hk__sb_printf(&sb, "%s%s", sb.len ? " -> " : "", t->v[chain[n]].decl_repo);
    if (sb.oom) {
        hk__sb_free(&sb);
        return NULL;
    }
    return sb.data ? sb.data : hk__strdup("");
}

static bool same_decl(const hk__tnode *n, const hk_dep_spec *d) {
    if (strcmp(n->decl_repo, d->repo_id) != 0) return false;
    if (n->revision || d->revision) return n->revision && d->revision && strcmp(n->revision, d->revision) == 0;
    return n->version == d->version;
}

/* metadata.json read from memory without storing it (hk_has_kernel downloads nothing into the
 * cache): the cached copy when there is one, else one GET of the file (client/fetch_file.c). */
static int peek_metadata(hk_metadata_owned *md, hk_hub *hub, const char *repo, const char *commit,
                         const char *rel) {
    char *data = NULL, *where = NULL;
    size_t len = 0;
    int rc = hk__hub_peek_file(&data, &len, &where, hub, repo, commit, rel, 1u << 20);
    if (rc == HK_OK) rc = hk__metadata_parse(md, data, len, where);
    free(data);
    free(where);
    return rc;
}

/* The variant's metadata.json through the client (the cache first; offline only the cache); with
 * store false nothing is written to the cache. */
int hk__tree_fetch_metadata(hk_metadata_owned *md, hk_hub *hub, const char *repo, const char *commit,
                            const char *variant, int signature, bool store) {
    char *rel = hk__asprintf("build/%s/metadata.json", variant);
    if (!rel) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (!store) {
        int rc = peek_metadata(md, hub, repo, commit, rel);
        free(rel);
        return rc;
    }
    char *path = NULL;
    int rc = hk__hub_fetch_file(&path, hub, repo, commit, rel, signature);
    free(rel);
    char *data = NULL;
    size_t len = 0;
    if (rc == HK_OK) rc = hk__read_file(&data, &len, path, 1u << 20);
    if (rc == HK_OK) rc = hk__metadata_parse(md, data, len, path);
    free(data);
    hk_free(path);
    return rc;
}

/* The commit a dependency resolves to: the lock's entry for exactly this declaration, else its
 * version (branch vN) or revision on the Hub (offline: the cache's refs). */
static int dep_commit(char **out, const hk__tree_ctx *c, const hk__tnode *n, const char *path) {
    if (c->lock) {
        for (size_t i = 0; i < hk_lockfile_count(c->lock); i++) {
            const hk_lock_entry *e = hk_lockfile_entry(c->lock, i);
            if (strcmp(hk_lock_entry_repo_id(e), n->decl_repo) != 0) continue;
            const char *rev = hk_lock_entry_revision(e);
            bool same = n->revision ? rev && strcmp(rev, n->revision) == 0
                                    : !rev && hk_lock_entry_version(e) == n->version;
            if (!same) continue;
            *out = hk__strdup(hk_lock_entry_commit(e));
            return *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        char want[64];
        if (n->revision) snprintf(want, sizeof want, "revision %.40s", n->revision);
        else snprintf(want, sizeof want, "version %d", n->version);
        return hk__fail(HK_ERR_LOCKFILE, "%s: dependency %s (%s) is not locked in %s: the lock predates "
                       "this dependency tree; re-lock with `hubkern lock` (or `kernels lock`)",
                       path, n->decl_repo, want, c->lockpath ? c->lockpath : "the lockfile");
    }
    return hk_hub_resolve(out, c->hub, n->decl_repo, n->revision ? -1 : n->version, n->revision);
}

/* Publisher check of a dependency (kernels HubResolver: before anything is downloaded). Offline,
 * or pinned by a lock read from the cache, trust cannot be asked: it was established when the
 * cache was filled (kernels warns and skips likewise). */
static int dep_trust(const hk__tree_ctx *c, const char *repo, const char *path) {
    if (c->trust) return HK_OK;
    if (c->lock || hk_hub_is_offline(c->hub)) {
        hk__log(HK_LOG_WARN, "skipping the publisher trust check for '%s' (offline)", repo);
        return HK_OK;
    }
    char org[128];
    const char *slash = strchr(repo, '/');
    snprintf(org, sizeof org, "%.*s", slash ? (int)(slash - repo) : (int)strlen(repo), repo);
    int trusted = 0;
    int rc = hk_hub_check_trust(&trusted, c->hub, org);
    if (rc) return hk__fail_context("%s: checking the publisher of %s", path, repo);
    if (!trusted)
        return hk__fail(HK_ERR_UNTRUSTED,
                       "%s: dependency '%s' is not from a trusted publisher (or its trust status could "
                       "not be verified); pass trust_remote_code = 1 (--trust-remote-code) to load it anyway",
                       path, repo);
    return HK_OK;
}

/* Node i from LOCAL_KERNELS when it lists the declared repo (*done true then): kernels'
 * RepoPathsResolver comes before the Hub's for every node. */
static int resolve_local_dep(bool *done, hk_kernel_tree *t, size_t i, const hk__tree_ctx *c, const char *path) {
    *done = false;
    if (!c->local) return HK_OK;
    char *dir = NULL;
    int rc = hk__local_kernels_lookup(&dir, t->v[i].decl_repo);
    if (rc || !dir) return rc;
    *done = true;
    hk__log(HK_LOG_INFO, "%s: %s from LOCAL_KERNELS path %s", path, t->v[i].decl_repo, dir);
    rc = hk__local_tree_node(t, i, dir, c->env, c->o);
    if (rc) hk__fail_context("%s: LOCAL_KERNELS %s=%s", path, t->v[i].decl_repo, dir);
    if (rc == HK_OK && !c->o->skip_arch_check) {
        hk_load_request req;
        hk__loader_fill_request(&req, c->o, c->env);
        rc = hk__kernel_check_metadata_fitness(&t->v[i].md.pub, &req);
        if (rc) hk__fail_context("%s: dependency %s variant %s at %s", path, t->v[i].repo_id, t->v[i].variant, dir);
    }
    free(dir);
    return rc;
}

/* Resolve dependency node i (repo, commit, variant, metadata, arch check). */
static int resolve_dep(hk_kernel_tree *t, size_t i, const hk__tree_ctx *c) {
    char *path = hk__tree_path(t, i);
    if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    bool local = false;
    int lrc = resolve_local_dep(&local, t, i, c, path);
    if (lrc || local) {
        free(path);
        return lrc;
    }
    hk__tnode *n = &t->v[i];
    /* the request's mode, carried down: a dependency never gets a laxer one than its dependent */
    n->signature = hk__client_request_signature(c->hub, c->o->signature, t->v[n->parent].signature, n->decl_repo);
    int rc = dep_trust(c, n->decl_repo, path);
    if (rc == HK_OK && !(n->repo_id = hk__strdup(n->decl_repo))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) {
        rc = dep_commit(&n->commit, c, n, path);
        if (rc && rc != HK_ERR_LOCKFILE) hk__fail_context("%s", path);
    }
    char **names = NULL;
    size_t nn = 0;
    if (rc == HK_OK) {
        rc = hk_hub_list_variants(&names, &nn, c->hub, n->repo_id, n->commit);
        if (rc) hk__fail_context("%s: listing the variants at %s", path, n->commit);
    }
    if (rc == HK_OK) {
        hk_get_kernel_options o = *c->o; /* the call's options, taken once at its entry */
        o.repo_id = n->repo_id;
        o.variant = NULL; /* an explicit variant names the root's build only */
        char *where = hk__asprintf("%s (%s@%s)", path, n->repo_id, n->commit);
        rc = where ? hk__loader_choose(&n->variant, c->env, &o, (const char *const *)names, nn, where)
                   : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(where);
    }
    if (names) hk_hub_strv_free(names);
    if (rc == HK_OK) {
        rc = hk__tree_fetch_metadata(&n->md, c->hub, n->repo_id, n->commit, n->variant, n->signature, c->store);
        if (rc) hk__fail_context("%s: metadata.json of %s variant %s", path, n->repo_id, n->variant);
        else n->has_md = true;
    }
    if (rc == HK_OK && !c->o->skip_arch_check) {
        hk_load_request req;
        hk__loader_fill_request(&req, c->o, c->env);
        rc = hk__kernel_check_metadata_fitness(&n->md.pub, &req);
        if (rc) hk__fail_context("%s: dependency %s variant %s at %s", path, n->repo_id, n->variant, n->commit);
    }
    free(path);
    return rc;
}

int hk__tree_expand(hk_kernel_tree *t, size_t i, const hk__tree_ctx *c) {
    if (!t->v[i].has_md) return HK_OK; /* the root's metadata unreadable before the pull: no tree */
    size_t nd = t->v[i].md.num_deps;
    if (nd == 0) return HK_OK;
    if (nd > HK_DEP_MAX_FANOUT) {
        char *path = hk__tree_path(t, i);
        int rc = hk__fail(HK_ERR_DEPENDENCY, "%s: %s variant %s declares %zu kernel-depends (at most %d)",
                          path ? path : "?", t->v[i].repo_id, t->v[i].variant, nd, HK_DEP_MAX_FANOUT);
        free(path);
        return rc;
    }
    for (size_t d = 0; d < nd; d++) {
        const hk_dep_spec *dep = &t->v[i].md.deps[d];
        char *path = hk__tree_path(t, i);
        if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
        int rc = HK_OK;
        for (int a = (int)i; a >= 0 && rc == HK_OK; a = t->v[a].parent)
            if (same_decl(&t->v[a], dep))
                rc = hk__fail(HK_ERR_DEPENDENCY, "cyclic kernel dependency detected: %s -> %s", path, dep->repo_id);
        if (rc == HK_OK && t->v[i].depth + 1 > HK_DEP_MAX_DEPTH)
            rc = hk__fail(HK_ERR_DEPENDENCY, "%s -> %s: the dependency tree is deeper than %d", path,
                          dep->repo_id, HK_DEP_MAX_DEPTH);
        if (rc == HK_OK && t->n >= HK_DEP_MAX_NODES)
            rc = hk__fail(HK_ERR_DEPENDENCY, "%s -> %s: the dependency tree has more than %d nodes", path,
                          dep->repo_id, HK_DEP_MAX_NODES);
        free(path);
        size_t child = 0;
        if (rc == HK_OK) rc = hk__tree_push(&child, t, dep->repo_id, dep->version, dep->revision, (int)i);
        if (rc == HK_OK) rc = resolve_dep(t, child, c);
        if (rc == HK_OK) rc = hk__tree_expand(t, child, c);
        if (rc) return rc;
        /* the same repo declared again further down: kernels resolves this entry too, then keys its
         * tree by repo id (deps.py `kernel_deps[dep.repo_id] =`), so the last entry wins; drop this
         * one's subtree (it is the tail of t->v: expansion is depth-first) */
        for (size_t later = d + 1; later < nd; later++)
            if (strcmp(t->v[i].md.deps[later].repo_id, dep->repo_id) == 0) {
                while (t->n > child) node_free(&t->v[--t->n]);
                break;
            }
    }
    return HK_OK;
}

int hk__tree_check_minver(const hk_kernel_tree *t) {
    /* t->v is in kernels' walk order: expansion pushes each node, then its subtree */
    for (size_t i = 0; i < t->n; i++) {
        if (!t->v[i].has_md) continue;
        int rc = hk__metadata_check_minver(&t->v[i].md, t->v[i].variant);
        if (rc) {
            char *path = hk__tree_path(t, i);
            hk__fail_context("%s", path ? path : t->v[i].decl_repo);
            free(path);
            return rc;
        }
    }
    return HK_OK;
}

/* ---- installing and loading ------------------------------------------------------------------ */

/* Install (pull, verified) and load node i's dependencies, depth-first; then node i itself unless
 * it is the root (i == 0: the caller loads it). *out_deps: the handles of i's direct
 * dependencies, one reference each. */
static int load_children(hk_kernel ***out_deps, size_t *out_n, hk_kernel_tree *t, size_t i, const hk__tree_ctx *c);

static int load_node(hk_kernel **out, hk_kernel_tree *t, size_t i, const hk__tree_ctx *c) {
    hk_kernel **deps = NULL;
    size_t nd = 0;
    int rc = load_children(&deps, &nd, t, i, c);
    if (rc) return rc;
    hk__tnode *n = &t->v[i];
    char *c2 = NULL, *v2 = NULL;
    uint64_t bytes[2] = {0, 0};
    /* the node as the tree resolved it (no second resolution, no redirect followed that the
     * resolution did not follow), under the mode it inherited; a branch or version declaration is
     * recorded as a ref so that the same tree resolves offline (a lock pins commits: no ref) */
    if (!n->dir) { /* a LOCAL_KERNELS node has its directory already, and no commit */
        char label[32];
        snprintf(label, sizeof label, "v%d", n->version);
        hk__target tg = {n->repo_id, c->lock ? n->commit : n->revision ? n->revision : label, "", n->signature};
        snprintf(tg.commit, sizeof tg.commit, "%s", n->commit);
        hk_pull_spec s = hk__loader_pull_spec(c->o, &tg, n->variant);
        s.trust_remote_code = 1; /* its publisher was checked (or, offline, warned about) while resolving */
        rc = hk__loader_fetch_variant(&n->dir, &c2, &v2, bytes, c->hub, &s, &tg);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        hk__loader_fill_request(&req, c->o, c->env);
        req.variant_dir = n->dir;
        req.variant_name = n->variant;
        req.commit = n->commit;
        req.repo_id = n->repo_id;
        req.bytes_verified = bytes[0];
        req.bytes_trusted = bytes[1];
        rc = hk__kernel_load_variant(out, &req);
    }
    if (rc) {
        char *path = hk__tree_path(t, i);
        hk__fail_context("loading dependency %s", path ? path : n->repo_id);
        free(path);
    }
    hk_free(c2);
    hk_free(v2);
    if (rc == HK_OK) hk__kernel_set_deps(*out, deps, nd);
    else hk__kernel_unref_all(deps, nd);
    return rc;
}

static int load_children(hk_kernel ***out_deps, size_t *out_n, hk_kernel_tree *t, size_t i, const hk__tree_ctx *c) {
    *out_deps = NULL;
    *out_n = 0;
    size_t nd = t->v[i].has_md ? t->v[i].md.num_deps : 0;
    if (nd == 0) return HK_OK;
    hk_kernel **deps = calloc(nd, sizeof *deps);
    if (!deps) return hk__fail(HK_ERR_NOMEM, "out of memory");
    size_t k = 0;
    int rc = HK_OK;
    for (size_t j = i + 1; j < t->n && rc == HK_OK && k < nd; j++)
        if (t->v[j].parent == (int)i) {
            rc = load_node(&deps[k], t, j, c);
            if (rc == HK_OK) k++;
        }
    if (rc) {
        hk__kernel_unref_all(deps, k);
        return rc;
    }
    *out_deps = deps;
    *out_n = k;
    return HK_OK;
}

int hk__tree_load_root_deps(hk_kernel ***out_deps, size_t *out_n, hk_kernel_tree *t, const hk__tree_ctx *c) {
    return load_children(out_deps, out_n, t, 0, c);
}

/* ---- accessors -------------------------------------------------------------------------------- */

static const hk__tnode *node_at(const hk_kernel_tree *t, size_t i) { return t && i < t->n ? &t->v[i] : NULL; }

HK_API size_t hk_kernel_tree_count(const hk_kernel_tree *t) { return t ? t->n : 0; }
HK_API const char *hk_kernel_tree_repo_id(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->repo_id : NULL;
}
HK_API int hk_kernel_tree_version(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->version : HK_VERSION_UNSET;
}
HK_API const char *hk_kernel_tree_revision(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->revision : NULL;
}
HK_API const char *hk_kernel_tree_commit(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->commit : NULL;
}
HK_API const char *hk_kernel_tree_variant(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->variant : NULL;
}
HK_API int hk_kernel_tree_depth(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->depth : -1;
}
HK_API int hk_kernel_tree_signature(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->signature : -1;
}
HK_API int hk_kernel_tree_parent(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n ? n->parent : -1;
}
HK_API const hk_kernel_metadata *hk_kernel_tree_metadata(const hk_kernel_tree *t, size_t i) {
    const hk__tnode *n = node_at(t, i);
    return n && n->has_md ? &n->md.pub : NULL;
}
