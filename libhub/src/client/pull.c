/* hk_hub_pull: resolve, follow redirects, list, choose the variant(s), download the blobs, stage the
 * variant, verify it against its metadata.json digest and only then publish it into
 * snapshots/<commit>/ and write refs/. Offline: the same answers from the cache.
 * (The staging-and-publishing half is in pull_publish.c; the result in pull_result.c.) */
#include "cache/cache_internal.h"
#include "util/vec.h"
#include "client/client.h"
#include "client/memo.h"
#include "client/pull_internal.h"
#include "client/signature.h"
#include "client/stage.h"
#include "util/pathglob.h"
#include "util/strmap.h"
#include "util/arena.h"
#include <stdint.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a pull fetches: each blob once, with the repo paths that name it (indexed by etag, so a
 * listing of n files costs O(n), not O(n^2)). The etags and paths are the listing's own strings
 * (the result holds the listing for as long as the plan lives): no copy per file. */
typedef struct pull_plan {
    hk_dl_item *items;
    size_t n, cap;
    hk_strmap by_etag;
    hk_arena strs; /* the path arrays of blobs more than one path names */
} pull_plan;

static void plan_free(pull_plan *p) {
    free(p->items);
    hk__strmap_free(&p->by_etag);
    hk__arena_free(&p->strs);
}

/* Add the files of the listing t (r->listing: the plan and r point into it) under prefix
 * ("build/<variant>") to the plan and to r's files: names checked (nothing leaves the variant), a
 * usable content hash for each, one size per blob. With the spec's patterns: only the files they
 * choose, and then metadata.json and its bundle too; none chosen: nothing added. *out_chosen /
 * *out_all: files chosen / files of the variant. */
static int plan_variant(pull_plan *p, hk_pull_result *r, size_t *fcap, const tree *t, const char *prefix,
                        const hk_pull_spec *spec, size_t *out_chosen, size_t *out_all) {
    int rc = HK_OK;
    size_t plen = strlen(prefix);
    *out_chosen = *out_all = 0;
    for (size_t i = 0; i < t->n; i++) {
        const tree_entry *e = &t->e[i];
        if (strncmp(e->path, prefix, plen) != 0 || e->path[plen] != '/' || e->dir || hk__client_excluded(e->path))
            continue;
        (*out_all)++;
        *out_chosen += hk__glob_select(e->path, spec->include, spec->exclude);
    }
    if (*out_chosen == 0) return HK_OK;
    for (size_t i = 0; rc == HK_OK && i < t->n; i++) {
        const tree_entry *e = &t->e[i];
        /* names: checked where the listing entered (tree.c check_entry_path) */
        if (strncmp(e->path, prefix, plen) != 0 || e->path[plen] != '/') continue; /* another variant's */
        if (e->dir || hk__client_excluded(e->path)) continue;
        if (*out_chosen < *out_all && !hk__glob_select(e->path, spec->include, spec->exclude) &&
            !hk__pull_variant_metadata_file(e->path, prefix))
            continue; /* left out by the patterns; the signed metadata never is */
        const char *etag = e->lfs_oid ? e->lfs_oid : e->oid;
        size_t el = etag ? strlen(etag) : 0;
        if (!etag || !((el == 64 && e->lfs_oid) || (el == 40 && !e->lfs_oid)) || !hk__is_hex(etag, el)) {
            rc = hk__fail(HK_ERR_PROTOCOL, "the listing gives no usable content hash for %s (oid '%s')", e->path,
                         etag ? etag : "(none)");
            break;
        }
        if ((rc = hk__client_add_listed_file(r, fcap, e->path))) break;
        size_t k = p->n;
        hk__strmap_get(&p->by_etag, etag, &k); /* indexed: a listing of n files costs O(n), not O(n^2) */
        if (k < p->n && p->items[k].size != e->size) {
            rc = hk__fail(HK_ERR_PROTOCOL, "the listing gives two sizes for blob %s", etag);
            break;
        }
        if (k == p->n) {
            if ((rc = HK_VEC_RESERVE(p->items, p->cap, p->n + 1)) != HK_OK) break;
            memset(&p->items[p->n], 0, sizeof *p->items);
            p->items[p->n].etag = etag;
            p->items[p->n].size = e->size;
            p->n++;
            if ((rc = hk__strmap_put(&p->by_etag, p->items[k].etag, k))) break;
        }
        /* a blob one path names points at the listing entry's own path field (no array); arrays for
         * more live in the arena, their capacity the next power of two of npaths (a blob named by
         * many paths costs O(paths), not O(paths^2)) */
        size_t np = p->items[k].npaths;
        if (np == 0) {
            p->items[k].paths = &e->path;
        } else if ((np & (np - 1)) == 0) {
            const char **grown =
                2 * np <= SIZE_MAX / sizeof(char *) ? hk__arena_alloc(&p->strs, 2 * np * sizeof(char *)) : NULL;
            if (!grown) {
                rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(grown, p->items[k].paths, np * sizeof(char *));
            grown[np] = e->path;
            p->items[k].paths = grown;
        } else {
            ((const char **)p->items[k].paths)[np] = e->path; /* an arena array with room (np >= 3) */
        }
        p->items[k].npaths++;
    }
    return rc;
}

/* The blobs a pull would reuse are hashed against their names first: a cached blob whose bytes
 * changed (a flipped byte, a truncated copy) is fetched again and renamed over the bad one instead
 * of failing the pull's digest check for good. Those that match are not hashed again by the stage.
 * force: every blob is fetched again. */
static int check_cached_blobs(hk_pull_result *r, const char *repo_dir, pull_plan *p, bool force, bool dry) {
    for (size_t i = 0; i < p->n; i++) {
        hk_dl_item *it = &p->items[i];
        if (force) {
            it->refetch = true;
            continue;
        }
        if (!hk__cache_blob_present(repo_dir, it->etag, it->size)) {
            it->absent = true; /* the download need not look again before the blob's lock */
            continue;
        }
        char *blob = hk__cache_blob_path(repo_dir, it->etag, NULL);
        if (!blob) return hk_last_error_code();
        char actual[129];
        bool checkable = false;
        int rc = hk__cache_hash_blob(actual, &checkable, blob, it->etag);
        if (rc == HK_ERR_NOMEM) {
            free(blob);
            return rc;
        }
        if (rc == HK_OK && checkable && strcmp(actual, it->etag) == 0) {
            it->hashed = true;
            r->bytes_verified += it->size;
        } else {
            hk__log(HK_LOG_WARN, "cached %s (%s) does not match its hash%s%s: %s", it->paths[0], blob,
                    rc ? ": " : "", rc ? hk_last_error() : "",
                    dry ? "a download would fetch it again" : "downloading it again");
            hk_clear_error();
            it->refetch = true;
        }
        free(blob);
    }
    return HK_OK;
}

/* Before anything is downloaded: the plan that keeps prune from taking this pull's finished but not
 * yet linked blobs, and its partial files, should the pull be interrupted (cache/pull_plan.c). */
static int record_plan(const hk_hub *hub, const char *repo_dir, const char *commit, const pull_plan *p) {
    bool fetches = false;
    for (size_t i = 0; i < p->n && !fetches; i++)
        fetches = p->items[i].refetch || p->items[i].absent || !hk__cache_blob_present(repo_dir, p->items[i].etag, p->items[i].size);
    if (!fetches) return HK_OK;
    const char **names = malloc((p->n + 1) * sizeof *names);
    if (!names) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) names[i] = p->items[i].etag;
    int rc = hk__pull_plan_write(hub->cache_root, repo_dir, commit, names, p->n);
    free(names);
    return rc;
}

/* r's place: the target's repo, revision and commit, and the snapshot folder; *repo_dir the
 * repo's folder in the cache (caller frees, also on failure). */
static int result_at(hk_pull_result *r, char **repo_dir, const hk_hub *hub, const hk__target *tg) {
    *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, tg->repo);
    r->repo = hk__strdup(tg->repo);
    r->revision = hk__strdup(tg->revision);
    r->commit = hk__strdup(tg->commit);
    r->snapshot = *repo_dir ? hk__cache_snapshot_path(*repo_dir, tg->commit, NULL) : NULL;
    if (!r->snapshot) return hk_last_error_code();
    if (!r->repo || !r->revision || !r->commit) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

static int pull_offline(hk_pull_result *r, hk_hub *hub, const hk_pull_spec *spec, const hk__target *t) {
    const char *commit = t->commit;
    int rc;
    if (!spec->trust_remote_code)
        hk__log(HK_LOG_WARN, "skipping the publisher trust check for %s: offline mode", spec->repo_id);
    const char *rev = t->revision;
    char *dir = hk__client_local_repo_dir(hub, t->repo, rev);
    r->repo = hk__strdup(t->repo);
    r->revision = hk__strdup(rev);
    r->commit = hk__strdup(commit);
    r->snapshot = dir ? hk__cache_snapshot_path(dir, commit, NULL) : NULL;
    free(dir);
    if (!r->snapshot) return hk_last_error_code();
    if (!r->repo || !r->revision || !r->commit) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (!hk__is_dir(r->snapshot))
        return hk__fail(HK_ERR_OFFLINE, "offline: %s at %s is not in the cache (missing %s); pull it while online first",
                       spec->repo_id, commit, r->snapshot);
    char **names = NULL;
    size_t n = 0;
    if ((rc = hk__client_list_variants_local(&names, &n, r->snapshot))) return rc;
    char *where = hk__asprintf("%s at %s (offline)", spec->repo_id, commit);
    rc = where ? hk__client_choose_variants(r, names, n, spec, where) : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(where);
    hk_hub_strv_free(names);
    if (rc) {
        if (rc == HK_ERR_NO_VARIANT)
            hk__fail_context("offline: only the variants pulled earlier are in %s/build", r->snapshot);
        return rc;
    }
    size_t cap = 0;
    bool dry = spec->dry_run != 0;
    bool *dropped = calloc(2 * (r->nvariants + 1), sizeof *dropped), *partial = dropped ? dropped + r->nvariants + 1 : NULL;
    if (!dropped) return hk__fail(HK_ERR_NOMEM, "out of memory");
    bool patterns = hk__pull_has_patterns(spec);
    for (size_t i = 0; rc == HK_OK && i < r->nvariants; i++) {
        r->variant_paths[i] = hk__asprintf("%s/build/%s", r->snapshot, r->variants[i]);
        char *rel = r->variant_paths[i] ? hk__asprintf("build/%s", r->variants[i]) : NULL;
        if (!rel) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        size_t from = r->nfiles, chosen = 0, all = 0;
        rc = hk__client_collect_local_files(r, &cap, r->snapshot, rel);
        /* offline, the patterns choose among the files the cached metadata.json lists (as online
         * among the listing's): the chosen ones must be here, the variant need not be complete */
        if (rc == HK_OK) hk__pull_keep_chosen(r, from, rel, spec, &chosen, &all);
        size_t listed = 0;
        if (rc == HK_OK && patterns)
            rc = hk__pull_offline_chosen_cached(&listed, &partial[i], r->variant_paths[i], rel, spec, commit);
        free(rel);
        dropped[i] = chosen == 0 && listed == 0 && patterns;
        if (rc || dropped[i]) continue;
        if (!patterns && (rc = hk__pull_offline_variant_complete(r->variant_paths[i], spec->repo_id, commit, r->variants[i])))
            break;
        if (dry) continue; /* a dry run checks no signature: that writes its receipt */
        char *rd = hk__client_local_repo_dir(hub, spec->repo_id, r->revision); /* signature: client/signature.c */
        rc = hk__client_check_signature(hub, t->signature, r->repo, rd, r->commit, r->variants[i], r->variant_paths[i]);
        free(rd);
    }
    if (rc == HK_OK) { /* the partial flags follow their variants */
        size_t w = 0;
        for (size_t v = 0; v < r->nvariants; v++)
            if (!dropped[v]) partial[w++] = partial[v];
        hk__pull_drop_variants(r, dropped);
    }
    if (rc == HK_OK) rc = hk__pull_file_details(r, NULL, 0);
    if (rc == HK_OK) rc = hk__pull_verify_variants(r, hub, NULL, partial, NULL, 0, dry ? HK_VERIFY_NO_WRITE : 0);
    free(dropped);
    if (rc == HK_ERR_DIGEST)
        hk__fail_context("offline: cached bytes of %s at %.12s no longer match what was verified (a damaged "
                         "blob); run `hubkern cache verify --repair`, or pull again online, which fetches the "
                         "damaged files again", spec->repo_id, commit);
    return rc;
}

/* One piece: the online pull is one sequence over shared state (the listing, the plan, the
 * per-variant flags) from the choice of variants to the ref; its steps are the functions above. */
static int pull_online(hk_pull_result *r, hk_hub *hub, const hk_pull_spec *spec_in, const hk__target *tg) {
    hk_pull_spec spec = *spec_in;
    const char *repo = tg->repo, *commit = tg->commit;
    char *repo_dir = NULL;
    int rc = result_at(r, &repo_dir, hub, tg);
    if (rc) {
        free(repo_dir);
        return rc;
    }
    bool dry = spec.dry_run != 0;
    unsigned vflags = dry ? HK_VERIFY_NO_WRITE : 0;
    /* variants from the listing (skipped when the named variant is already complete here) */
    char **names = NULL;
    size_t n = 0;
    bool force = spec.force_download != 0;
    char *local = spec.variant && !spec.all_variants && !force ? hk__asprintf("%s/build/%s", r->snapshot, spec.variant)
                                                               : NULL;
    hk_verify_stats local_st;
    memset(&local_st, 0, sizeof local_st);
    bool local_ok = local && hk__pull_variant_complete_locally(hub, local, &local_st, vflags);
    if (local_ok) {
        names = calloc(2, sizeof *names);
        if (names) names[0] = hk__strdup(spec.variant);
        n = 1;
        rc = names && names[0] ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    } else if ((rc = hk__client_commit_tree(&r->listing, hub, repo, commit)) == HK_OK) {
        /* the one listing of the commit (shared with the kernel-status.toml check and the memo,
         * client/tree.c): its build/ folders are the variants, its files under them what is
         * pulled; r holds it, so the plan and r's files point into it */
        rc = hk__client_variants_from_commit_tree(&names, &n, r->listing);
    }
    free(local);
    if (rc) {
        free(repo_dir);
        return rc;
    }
    if (rc == HK_OK) {
        qsort(names, n, sizeof *names, hk__client_cmp_str); /* (already sorted from a listing) */
        char *where = hk__asprintf("%s at %s", repo, commit);
        rc = where ? hk__client_choose_variants(r, names, n, &spec, where) : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(where);
    }
    hk_hub_strv_free(names);
    /* files of each chosen variant, grouped by blob; per variant: done (complete here, or none of
     * its files chosen), pulled in part (the patterns left some out), dropped (none chosen) */
    pull_plan plan;
    memset(&plan, 0, sizeof plan);
    hk__strmap_init(&plan.by_etag);
    size_t fcap = 0;
    bool *flags = rc == HK_OK ? calloc(3 * (r->nvariants + 1), sizeof *flags) : NULL;
    bool *checked = flags, *partial = flags ? flags + r->nvariants + 1 : NULL,
         *dropped = flags ? flags + 2 * (r->nvariants + 1) : NULL;
    if (rc == HK_OK && !flags) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t v = 0; rc == HK_OK && v < r->nvariants; v++) {
        char *prefix = hk__asprintf("build/%s", r->variants[v]);
        r->variant_paths[v] = hk__asprintf("%s/build/%s", r->snapshot, r->variants[v]);
        if (!prefix || !r->variant_paths[v]) {
            free(prefix);
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        hk_verify_stats vs = local_st;
        size_t chosen = 0, all = 0;
        if (!force && ((local_ok && strcmp(r->variants[v], spec.variant) == 0) ||
                       hk__pull_variant_complete_locally(hub, r->variant_paths[v], &vs, vflags))) {
            /* warm: the commit's variant is here and matches its digest */
            hk__log(HK_LOG_DEBUG, "%s is complete in the cache; nothing to fetch", r->variant_paths[v]);
            size_t from = r->nfiles;
            rc = hk__client_collect_local_files(r, &fcap, r->snapshot, prefix);
            if (rc == HK_OK) hk__pull_keep_chosen(r, from, prefix, &spec, &chosen, &all);
            r->bytes_verified += vs.bytes_hashed;
            r->bytes_trusted += vs.bytes_trusted;
            checked[v] = true;
            dropped[v] = rc == HK_OK && chosen == 0 && hk__pull_has_patterns(&spec);
            free(prefix);
            /* a cached variant is checked again (its signature receipt may vouch); a dry run checks none */
            if (rc == HK_OK && !dry && !dropped[v])
                rc = hk__client_check_signature(hub, tg->signature, repo, repo_dir, commit, r->variants[v],
                                                r->variant_paths[v]);
            continue;
        }
        if (!r->listing) rc = hk__client_commit_tree(&r->listing, hub, repo, commit);
        if (rc == HK_OK) rc = plan_variant(&plan, r, &fcap, r->listing, prefix, &spec, &chosen, &all);
        dropped[v] = checked[v] = rc == HK_OK && chosen == 0 && hk__pull_has_patterns(&spec);
        partial[v] = chosen < all;
        free(prefix);
    }
    if (rc == HK_OK && plan.n == 0) { /* nothing planned (every variant is here): r need not keep it */
        hk__client_tree_unref(r->listing);
        r->listing = NULL;
    }
    /* the blob index is for grouping the listing only: not held through the downloads and checks */
    hk__strmap_free(&plan.by_etag);
    hk__strmap_init(&plan.by_etag);
    if (rc == HK_OK) rc = check_cached_blobs(r, repo_dir, &plan, force, dry);
    if (rc == HK_OK && !dry) rc = record_plan(hub, repo_dir, commit, &plan);
    if (rc == HK_OK && !dry) { /* blobs only: the links are made in the stage, after every byte arrived */
        hk_dl_stats st = {0, 0, 0, 0};
        rc = hk__download_blobs(&st, hub, repo, repo_dir, commit, plan.items, plan.n, false);
        r->bytes_downloaded = st.bytes_downloaded;
        r->bytes_resumed = st.bytes_resumed;
        r->bytes_verified += st.bytes_verified;
        r->files_downloaded = st.files_downloaded;
    }
    if (rc == HK_OK && !dry) {
        if (hub->progress) {
            hk_progress p = {"verify", NULL, 0, 0, 0, (uint32_t)r->nvariants, 0};
            hub->progress(hub->progress_ud, &p);
        }
        rc = hk__pull_stage_verify_publish(r, hub, repo, repo_dir, commit, checked, partial, plan.items, plan.n, tg->signature);
    }
    if (rc == HK_OK) rc = hk__pull_file_details(r, plan.items, plan.n);
    if (rc == HK_OK) hk__pull_drop_variants(r, dropped);
    free(flags);
    plan_free(&plan);
    /* refs only once the variant is complete and verified, so that offline use never finds a
     * half-pulled snapshot through refs/vN; a dry run writes none, nor a pull that chose nothing */
    if (rc == HK_OK && !dry && r->nvariants && strcmp(r->revision, commit) != 0)
        rc = hk_cache_write_ref(repo_dir, r->revision, commit);
    if (rc == HK_OK && !dry) hk__pull_plan_remove(hub->cache_root, repo_dir, commit); /* nothing left to resume */
    free(repo_dir);
    return rc;
}

/* The checks of a spec that only the pull needs (hk__client_resolve_target checks the rest). */
static int check_pull_spec(const hk_pull_spec *spec) {
    int rc = hk__check_options_version("hk_pull_spec", spec->version, HK_PULL_SPEC_VERSION);
    if (rc) return rc;
    if (spec->variant && !hk__variant_name_valid(spec->variant))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a variant name", spec->variant);
    return HK_OK;
}

int hk__client_pull_target(hk_pull_result **out, hk_hub *hub, const hk_pull_spec *spec, const hk__target *t) {
    *out = NULL;
    int rc = check_pull_spec(spec);
    if (rc) return rc;
    if (hub->read_only && !spec->dry_run)
        return hk__fail(HK_ERR_INVALID_ARG, "cannot pull %s with a read-only client (hk_hub_set_read_only): it "
                        "writes nothing into the cache", spec->repo_id);
    hk_pull_result *r = calloc(1, sizeof *r);
    if (!r) return hk__fail(HK_ERR_NOMEM, "out of memory");
    r->offline = hub->offline;
    bool deadline = hk__pull_deadline_begin(hub); /* HUBKERN_PULL_TIMEOUT / pull_timeout_s (http.c) */
    hk__memo_op_begin(); /* each question once in this pull, whatever the freshness window */
    rc = hub->offline ? pull_offline(r, hub, spec, t) : pull_online(r, hub, spec, t);
    hk__memo_op_end();
    hk__pull_deadline_end(hub, deadline);
    if (rc) {
        hk_pull_result_free(r);
        return hk__fail_context("pulling %s", spec->repo_id);
    }
    *out = r;
    hk_clear_error();
    return HK_OK;
}

int hk_hub_pull(hk_pull_result **out, hk_hub *hub, const hk_pull_spec *spec_in) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_pull: NULL out");
    *out = NULL;
    if (!hub || !spec_in) return hk__fail(HK_ERR_INVALID_ARG, "hub and spec are required");
    int rc = check_pull_spec(spec_in);
    if (rc) return rc;
    if (hub->read_only && !(spec_in->version >= 3 && spec_in->dry_run)) /* before any request: nothing of the pull could be kept */
        return hk__fail(HK_ERR_INVALID_ARG, "cannot pull %s with a read-only client (hk_hub_set_read_only): it "
                        "writes nothing into the cache", spec_in->repo_id);
    /* an older spec ends before the fields added since: only its own bytes are read */
    hk_pull_spec full = HK_PULL_SPEC_INIT;
    memcpy(&full, spec_in, hk__pull_spec_size(spec_in->version));
    full.version = HK_PULL_SPEC_VERSION;
    const hk_pull_spec *spec = &full;
    hk__target t;
    bool deadline = hk__pull_deadline_begin(hub); /* the resolution counts against the pull's deadline */
    hk__memo_op_begin();
    rc = hk__client_resolve_target(&t, hub, spec, 0);
    if (rc == HK_OK) rc = hk__client_pull_target(out, hub, spec, &t);
    else hk__fail_context("pulling %s", spec->repo_id);
    hk__memo_op_end();
    hk__pull_deadline_end(hub, deadline);
    hk__target_free(&t);
    return rc;
}

int hk_hub_fetch_variant(char **out_variant_dir, char **out_commit, char **out_variant, hk_hub *hub,
                         const hk_pull_spec *spec) {
    if (out_variant_dir) *out_variant_dir = NULL;
    if (out_commit) *out_commit = NULL;
    if (out_variant) *out_variant = NULL;
    hk_pull_result *r = NULL;
    int rc = hk_hub_pull(&r, hub, spec);
    if (rc) return rc;
    if (r->nvariants == 0) { /* the spec's patterns chose no file */
        hk_pull_result_free(r);
        return hk__fail(HK_ERR_NOT_FOUND, "no file of %s matches the include/exclude patterns", spec->repo_id);
    }
    char *d = hk__strdup(r->variant_paths[0]), *c = hk__strdup(r->commit), *v = hk__strdup(r->variants[0]);
    hk_pull_result_free(r);
    if (!d || !c || !v) {
        free(d);
        free(c);
        free(v);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (out_variant_dir) *out_variant_dir = d;
    else free(d);
    if (out_commit) *out_commit = c;
    else free(c);
    if (out_variant) *out_variant = v;
    else free(v);
    return HK_OK;
}
