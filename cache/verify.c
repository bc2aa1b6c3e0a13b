/* hubkern cache verify: every blob against its name, every snapshot link, every ref, every
 * variant's entries and (complete variants) content against its metadata.json digest. Reads only:
 * it creates, changes and deletes nothing (repairs are `cache verify --repair`, in the CLI, which
 * pulls what is damaged again). */
#include "cache/verify_internal.h"
#include "util/text.h"
#include "util/vec.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Small git blobs are read whole, hashed from memory and kept for the repo's walk of snapshots/
 * up to these bounds; bigger ones are hashed as they are read. */
#define KEEP_ONE_MAX (256u << 10)
#define KEEP_REPO_MAX (8u << 20)

static void pending_clear(hk_verify_ctx *c) {
    for (size_t i = 0; i < c->npend; i++) free(c->pend[i].rel);
    c->npend = 0;
    free(c->meta);
    c->meta = NULL;
    c->meta_len = 0;
    c->meta_rc = HK_ERR_NOT_FOUND;
}

static void vctx_blobs_free(hk_verify_ctx *c) {
    hk__strmap_free(&c->blobs);
    hk__strmap_free(&c->snaps);
    for (size_t i = 0; i < c->nsnapnames; i++) free(c->snapnames[i]);
    free(c->snapnames);
    for (size_t i = 0; i < c->nnames; i++) free(c->names[i]), free(c->info[i].kept);
    free(c->names);
    free(c->info);
    pending_clear(c);
    free(c->pend);
}

/* Record an entry of the variant folder the walk is in (rel: below snapshots/). -1 when out of
 * memory (the walk ends with that error: a variant cannot be half checked). */
static int pending_add(hk_verify_ctx *c, const hk_walk_entry *e, hk_verify_kind kind, size_t blob) {
    const char *rel = e->rel;
    const hk_verify_blob *b = kind == HK_VE_BLOB ? &c->info[blob] : NULL;
    if (strcmp(rel + c->vlen, "metadata.json") == 0 && b && b->kept) {
        free(c->meta);
        c->meta = malloc(b->kept_len + 1);
        if (!c->meta) {
            hk__fail(HK_ERR_NOMEM, "out of memory");
            return -1;
        }
        memcpy(c->meta, b->kept, b->kept_len);
        c->meta[b->kept_len] = '\0';
        c->meta_len = b->kept_len;
        c->meta_rc = HK_OK;
    } else if (strcmp(rel + c->vlen, "metadata.json") == 0 &&
               (kind == HK_VE_FILE || kind == HK_VE_BLOB || kind == HK_VE_INSIDE)) {
        free(c->meta);
        c->meta_rc = hk__read_file_at(&c->meta, &c->meta_len, e->dirfd, e->name, kind == HK_VE_FILE ? O_NOFOLLOW : 0,
                                      HK_METADATA_JSON_MAX);
        if (c->meta_rc == HK_ERR_NOMEM) return -1;
        hk_clear_error();
    }
    char *copy = hk__strdup(rel + c->vlen);
    if (!copy || HK_VEC_RESERVE(c->pend, c->cap_pend, c->npend + 1)) {
        free(copy);
        hk__fail(HK_ERR_NOMEM, "out of memory");
        return -1;
    }
    c->pend[c->npend++] = (hk_verify_entry){copy, kind, blob};
    return HK_OK;
}

static bool in_variant(const hk_verify_ctx *c, const char *rel) { return c->vlen && strlen(rel) > c->vlen; }

/* Record a blob file by name; *out_name: the stored copy (NULL when out of memory: the checks that
 * would use it fall back to asking the file system). */
static const char *remember_blob(hk_verify_ctx *c, const char *rel) {
    char *copy = hk__strdup(rel);
    if (!copy || HK_VEC_RESERVE(c->names, c->cap_names, c->nnames + 1) ||
        HK_VEC_RESERVE(c->info, c->cap_info, c->nnames + 1) || hk__strmap_put(&c->blobs, copy, c->nnames)) {
        free(copy);
        hk_clear_error();
        return NULL;
    }
    c->info[c->nnames] = (hk_verify_blob){false, NULL, 0};
    c->names[c->nnames++] = copy;
    return copy;
}

/* A blob named by a git SHA-1 of at most KEEP_ONE_MAX bytes: *kept gets its bytes, actual their git
 * blob hash (one read to EOF and no fstat: the size the hash's header needs is what was read).
 * false: not such a blob, or out of memory; hash it as it is read. */
static bool small_git_blob(char **kept, size_t *kept_len, char actual[129], const hk_walk_entry *e, const char *rel) {
    *kept = NULL;
    if (strlen(rel) != 40 || !hk__is_hex(rel, 40)) return false;
    if (hk__read_file_at(kept, kept_len, e->dirfd, e->name, 0, KEEP_ONE_MAX) != HK_OK) {
        hk_clear_error(); /* bigger, unreadable: the streaming hash says which */
        return false;
    }
    unsigned char d[64];
    hk_hasher *h = hk__hasher_new(HK_HASH_GIT_BLOB, *kept_len);
    if (!h) {
        free(*kept);
        *kept = NULL;
        return false;
    }
    hk__hasher_update(h, *kept, *kept_len);
    hk__hex(actual, d, hk__hasher_finish(h, d));
    return true;
}

/* The entries of blobs/ and snapshots/ are looked at through their folder's descriptor (e->dirfd):
 * no path walk from the cache root for each. */
static int verify_blob(void *p, const hk_walk_entry *e, int post) {
    hk_verify_ctx *c = p;
    const char *rel = e->rel;
    const struct stat *st = &e->st;
    (void)post;
    if (S_ISDIR(st->st_mode)) return HK_WALK_CONTINUE;
    if (hk__str_ends_with(rel, ".incomplete") || hk__str_ends_with(rel, ".tmp")) {
        NOTE(c, "blobs", rel, "leftover temp file blobs/%s (prune removes it unless an unfinished pull will resume it)",
             rel);
        return HK_OK;
    }
    if (!S_ISREG(st->st_mode)) {
        PROBLEM(c, "blobs", rel, "blobs/%s is not a regular file", rel);
        return HK_OK;
    }
    c->rep->blobs++;
    const char *name = strchr(rel, '/') ? NULL : remember_blob(c, rel);
    char actual[129];
    bool checkable = false;
    uint64_t bytes = 0;
    char *kept = NULL;
    size_t kept_len = 0;
    int hrc = small_git_blob(&kept, &kept_len, actual, e, rel) ? HK_OK : HK_ERR_NOT_FOUND;
    if (kept) checkable = true, bytes = kept_len;
    else hrc = hk__cache_hash_blob_at(actual, &checkable, &bytes, e->dirfd, e->name, rel);
    struct stat full; /* the walk gives only the type: the size comes from the hash, else lstat */
    if (hrc == HK_OK && !checkable && fstatat(e->dirfd, e->name, &full, AT_SYMLINK_NOFOLLOW) == 0)
        bytes = (uint64_t)full.st_size;
    c->rep->bytes += bytes;
    if (hrc == HK_ERR_NOMEM) {
        free(kept);
        return -1; /* not a finding: the walk ends with that error */
    }
    if (hrc != HK_OK) {
        PROBLEM(c, "blobs", rel, "cannot read blobs/%s: %s", rel, hk_last_error());
        hk_clear_error();
    } else if (!checkable) {
        NOTE(c, "blobs", rel, "blobs/%s is not named by a content hash; not verifiable", rel);
    } else if (strcmp(actual, rel) != 0) {
        PROBLEM(c, "blobs", rel,
                "blobs/%s content hash is %s (corrupt blob; `hubkern cache verify --repair` fetches it again)", rel,
                actual);
    } else if (name) {
        hk_verify_blob *b = &c->info[c->nnames - 1];
        b->good = strlen(name) == 64;
        if (kept && c->kept_bytes + kept_len <= KEEP_REPO_MAX) {
            b->kept = kept, b->kept_len = kept_len;
            c->kept_bytes += kept_len;
            kept = NULL;
        }
    }
    free(kept);
    hk_clear_error();
    return HK_OK;
}

static bool canonical_link(hk_verify_ctx *c, const char *rel, const char *target, const char **blob);

static int verify_snapshot_dir(hk_verify_ctx *c, const char *path, const char *rel);

/* Is rel (below snapshots/) a variant folder, <commit>/build/<variant>? */
static bool variant_shape(const char *rel) {
    if (rel[0] == '.') return false;
    const char *s1 = strchr(rel, '/');
    const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    return s2 && !strchr(s2 + 1, '/') && (size_t)(s2 - s1 - 1) == 5 && strncmp(s1 + 1, "build", 5) == 0 &&
           s2[1] != '.' && s2[1] != '\0';
}

static int verify_link(void *p, const hk_walk_entry *e, int post) {
    hk_verify_ctx *c = p;
    const char *path = e->path, *rel = e->rel;
    const struct stat *st = &e->st;
    bool rec = in_variant(c, rel);
    if (S_ISDIR(st->st_mode)) {
        if (post) return verify_snapshot_dir(c, path, rel) ? -1 : HK_WALK_CONTINUE;
        else if (rec) return pending_add(c, e, HK_VE_DIR, 0) ? -1 : HK_WALK_CONTINUE;
        else if (variant_shape(rel)) c->vlen = strlen(rel) + 1;
        return HK_WALK_CONTINUE;
    }
    if (!strchr(rel, '/')) {
        if (rel[0] != '.') c->rep->snapshots++;
        PROBLEM(c, "snapshots", rel, "snapshots/%s is a file directly inside snapshots/", rel);
        return HK_OK;
    }
    if (S_ISREG(st->st_mode)) {
        if (hk__str_ends_with(rel, ".tmp")) NOTE(c, "snapshots", rel, "leftover temp file snapshots/%s", rel);
        /* no-symlink ("degraded") caches hold plain files */
        return rec ? pending_add(c, e, HK_VE_FILE, 0) : HK_OK;
    }
    if (!S_ISLNK(st->st_mode)) return rec ? pending_add(c, e, HK_VE_OUT, 0) : HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlinkat(e->dirfd, e->name, target, sizeof target - 1);
    if (n <= 0) {
        PROBLEM(c, "snapshots", rel, "cannot read link snapshots/%s", rel);
        return rec ? pending_add(c, e, HK_VE_OUT, 0) : HK_OK;
    }
    target[n] = '\0';
    if (target[0] == '/') {
        PROBLEM(c, "snapshots", rel, "snapshots/%s is an absolute link (%s); caches must use relative links", rel,
                target);
        return rec ? pending_add(c, e, HK_VE_OUT, 0) : HK_OK;
    }
    const char *blob = NULL;
    bool canonical = canonical_link(c, rel, target, &blob), inside = canonical;
    if (!inside) {
        char resolved[PATH_MAX], blobs[PATH_MAX];
        char *bdir = hk__path_join(c->repo_dir, "blobs");
        if (bdir && realpath(bdir, blobs) && realpath(path, resolved)) {
            size_t bl = strlen(blobs);
            inside = strncmp(resolved, blobs, bl) == 0 && resolved[bl] == '/' && !strchr(resolved + bl + 1, '/');
        }
        free(bdir);
    }
    /* a canonical link to a blob file the walk of blobs/ found is there: no stat */
    size_t bi = 0;
    bool known = canonical && hk__strmap_get(&c->blobs, blob, &bi);
    struct stat ts;
    bool present = known || fstatat(e->dirfd, e->name, &ts, 0) == 0;
    hk_verify_kind kind = HK_VE_INSIDE;
    if (!present) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s: Blob missing", rel, target);
        kind = HK_VE_GONE;
    } else if (!inside) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s points outside blobs/", rel, target);
        kind = HK_VE_OUT;
    } else if (known) {
        kind = HK_VE_BLOB;
    } else if (canonical || !S_ISREG(ts.st_mode)) {
        kind = HK_VE_OUT; /* blobs/<name> is no regular file (verify_blob said so): not followed */
    }
    return rec ? pending_add(c, e, kind, bi) : HK_OK;
}

/* Is target, the link at snapshots/<rel>, "../" x (the link's depth below the repo folder) +
 * "blobs/<name>" while snapshots/ and blobs/ are real folders (asked once a repo)? The walk reached
 * the link through real folders only (it follows no link), so then the link resolves into blobs/
 * without the two realpath() calls (about 15 syscalls each) that the general check costs per link.
 * *blob: the <name>. */
static bool canonical_link(hk_verify_ctx *c, const char *rel, const char *target, const char **blob) {
    size_t ups = 1; /* snapshots/ itself */
    for (const char *p = rel; *p; p++) ups += *p == '/';
    for (size_t i = 0; i < ups; i++) {
        if (strncmp(target, "../", 3) != 0) return false;
        target += 3;
    }
    if (strncmp(target, "blobs/", 6) != 0) return false;
    target += 6;
    if (!*target || strchr(target, '/') || strcmp(target, ".") == 0 || strcmp(target, "..") == 0) return false;
    if (c->canonical_dirs < 0) {
        struct stat st;
        char *snaps = hk__path_join(c->repo_dir, "snapshots");
        char *bdir = hk__path_join(c->repo_dir, "blobs");
        c->canonical_dirs = snaps && bdir && lstat(snaps, &st) == 0 && S_ISDIR(st.st_mode) && lstat(bdir, &st) == 0 &&
                            S_ISDIR(st.st_mode);
        free(snaps);
        free(bdir);
    }
    *blob = target;
    return c->canonical_dirs == 1;
}

/* A folder of snapshots/, after its entries (the walk's post-order call): a snapshot is counted;
 * a variant, <commit>/build/<variant>, is checked once its links have been. */
static int verify_snapshot_dir(hk_verify_ctx *c, const char *path, const char *rel) {
    if (rel[0] == '.') return HK_OK;
    const char *s1 = strchr(rel, '/');
    if (!s1) {
        c->rep->snapshots++;
        /* kept (the map borrows its keys); a miss only costs the refs check a stat */
        char *copy = hk__strdup(rel);
        if (!copy || HK_VEC_RESERVE(c->snapnames, c->cap_snapnames, c->nsnapnames + 1) ||
            hk__strmap_put(&c->snaps, copy, 0)) {
            free(copy);
            hk_clear_error();
        } else {
            c->snapnames[c->nsnapnames++] = copy;
        }
        return HK_OK;
    }
    if (!variant_shape(rel)) return HK_OK;
    char *commit = hk__strndup(rel, (size_t)(s1 - rel));
    int rc = commit ? hk__verify_walked_variant(c, path, commit, strrchr(rel, '/') + 1)
                    : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(commit);
    pending_clear(c);
    c->vlen = 0;
    return rc;
}

/* One file of refs/: it must hold exactly a commit id whose snapshot folder is there. */
static int verify_ref(void *p, const hk_walk_entry *e, int post) {
    hk_verify_ctx *c = p;
    const char *name = e->name;
    struct stat st;
    (void)post;
    if (name[0] == '.') return HK_WALK_SKIP;
    /* nested refs (refs/pr/N) are read by Python the same way; skip (a link: as what it leads to) */
    if (S_ISDIR(e->st.st_mode) || (S_ISLNK(e->st.st_mode) && fstatat(e->dirfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode)))
        return HK_WALK_SKIP;
    char *data = NULL;
    size_t len = 0;
    int rrc;
    c->rep->refs++;
    if (hk__str_ends_with(name, ".tmp")) {
        NOTE(c, "refs", name, "leftover temp file refs/%s", name);
    } else if ((rrc = hk__read_file_at(&data, &len, e->dirfd, name, 0, 256)) != HK_OK) {
        if (rrc == HK_ERR_NOMEM) return -1; /* the walk ends with that error */
        PROBLEM(c, "refs", name, "cannot read refs/%s", name);
    } else if (!((len == 40 || len == 64) && hk__is_hex(data, len))) {
        PROBLEM(c, "refs", name, "refs/%s does not hold exactly a commit id (Python would misread it)", name);
    } else if (!hk__strmap_get(&c->snaps, data, NULL)) {
        char *sd = hk__asprintf("%s/%s", c->snaps_dir, data);
        if (!sd) {
            free(data);
            hk__fail(HK_ERR_NOMEM, "out of memory");
            return -1;
        }
        if (!hk__is_dir(sd))
            PROBLEM(c, "refs", name, "refs/%s names %s but snapshots/%s is missing", name, data, data);
        free(sd);
    }
    hk_clear_error();
    free(data);
    return HK_OK;
}

int hk__cache_run_verify(hk_cache_report *rep, const char *root, const hk_cache_options *o) {
    const hk_cache_sink sink = hk__cache_sink_of(o);
    const char *repo_id = o->repo_id;
    hk_cache_repos repos;
    int rc = hk__cache_list_repos(&repos, root, repo_id);
    if (rc) return rc;
    if (repo_id && repos.n == 0) {
        hk__cache_repos_free(&repos);
        return hk__fail(HK_ERR_NOT_FOUND, "%s is not in the cache %s", repo_id, root);
    }
    for (size_t i = 0; i < repos.n && rc == HK_OK; i++) {
        const char *dir = repos.dirs[i];
        char *label = hk__cache_repo_label(repos.types[i], repos.ids[i]);
        hk_verify_ctx c = {rep, dir, label ? label : repos.ids[i], &sink, root, .canonical_dirs = -1,
                           .meta_rc = HK_ERR_NOT_FOUND};
        hk__strmap_init(&c.blobs);
        hk__strmap_init(&c.snaps);
        rep->repos++;
        char *blobs = hk__path_join(dir, "blobs");
        char *snaps = hk__path_join(dir, "snapshots");
        char *refs = hk__path_join(dir, "refs");
        if (!blobs || !snaps || !refs || !label) rc = hk__fail(HK_ERR_NOMEM, "out of memory"); /* never a repo unchecked */
        if (rc == HK_OK && !hk__is_dir(snaps)) {
            PROBLEM(&c, "snapshots", NULL, "no snapshots/ directory");
        }
        if (rc == HK_OK) rc = hk__cache_walk_entries(blobs, verify_blob, &c, 0);
        /* links, then (after its links) each variant, in one walk */
        if (rc == HK_OK) rc = hk__cache_walk_entries(snaps, verify_link, &c, HK_WALK_POSTORDER);
        /* refs: through the folder's descriptor, a snapshot known from the walk needs no stat */
        c.snaps_dir = snaps;
        if (rc == HK_OK && hk__walk(refs, 0, HK_WALK_TYPE_ONLY, verify_ref, &c) != HK_OK) {
            if (hk_last_error_code() == HK_ERR_NOMEM) rc = HK_ERR_NOMEM;
            else hk_clear_error(); /* no refs/ folder: nothing to check */
        }
        free(refs);
        free(blobs);
        free(snaps);
        free(label);
        vctx_blobs_free(&c);
    }
    hk__cache_repos_free(&repos);
    return rc;
}
