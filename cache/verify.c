/* hubkern cache verify: every blob against its name, every snapshot link, every ref, every
 * variant's entries and (complete variants) content against its metadata.json digest. Reads only:
 * it creates, changes and deletes nothing (repairs are `cache verify --repair`, in the CLI, which
 * pulls what is damaged again). */
#include "cache/maint_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct vctx {
    hk_cache_report *rep;
    const char *repo_dir;
    const char *label;
    const hk_cache_sink *sink;
    const char *root;
} vctx;

/* a problem with the entry dir/rel of the repo: reported and counted */
#define PROBLEM(c, dir, rel, ...) \
    (hk__cache_finding((c)->sink, HK_CACHE_PROBLEM, NULL, (c)->label, dir, rel, __VA_ARGS__), (c)->rep->problems++)
#define NOTE(c, dir, rel, ...) hk__cache_finding((c)->sink, HK_CACHE_NOTE, NULL, (c)->label, dir, rel, __VA_ARGS__)

static int verify_blob(void *p, const char *path, const char *rel, const struct stat *st) {
    vctx *c = p;
    if (S_ISDIR(st->st_mode)) return HK_OK;
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
    c->rep->bytes += (uint64_t)st->st_size;
    char actual[129];
    bool checkable = false;
    if (hk__cache_hash_blob(actual, &checkable, path, rel) != HK_OK) {
        PROBLEM(c, "blobs", rel, "cannot read blobs/%s: %s", rel, hk_last_error());
        hk_clear_error();
    } else if (!checkable) {
        NOTE(c, "blobs", rel, "blobs/%s is not named by a content hash; not verifiable", rel);
    } else if (strcmp(actual, rel) != 0) {
        PROBLEM(c, "blobs", rel,
                "blobs/%s content hash is %s (corrupt blob; `hubkern cache verify --repair` fetches it again)", rel,
                actual);
    }
    return HK_OK;
}

static bool canonical_link(const char *repo_dir, const char *bdir, const char *rel, const char *target);

static int verify_link(void *p, const char *path, const char *rel, const struct stat *st) {
    vctx *c = p;
    if (S_ISDIR(st->st_mode)) return HK_OK;
    if (!strchr(rel, '/')) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s is a file directly inside snapshots/", rel);
        return HK_OK;
    }
    if (S_ISREG(st->st_mode)) {
        if (hk__str_ends_with(rel, ".tmp")) NOTE(c, "snapshots", rel, "leftover temp file snapshots/%s", rel);
        return HK_OK; /* no-symlink ("degraded") caches hold plain files */
    }
    if (!S_ISLNK(st->st_mode)) return HK_OK;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) {
        PROBLEM(c, "snapshots", rel, "cannot read link snapshots/%s", rel);
        return HK_OK;
    }
    target[n] = '\0';
    if (target[0] == '/') {
        PROBLEM(c, "snapshots", rel, "snapshots/%s is an absolute link (%s); caches must use relative links", rel,
                target);
        return HK_OK;
    }
    char resolved[PATH_MAX], blobs[PATH_MAX];
    char *bdir = hk__path_join(c->repo_dir, "blobs");
    bool inside = bdir && canonical_link(c->repo_dir, bdir, rel, target);
    if (!inside && bdir && realpath(bdir, blobs) && realpath(path, resolved)) {
        size_t bl = strlen(blobs);
        inside = strncmp(resolved, blobs, bl) == 0 && resolved[bl] == '/' && !strchr(resolved + bl + 1, '/');
    }
    free(bdir);
    struct stat ts;
    if (stat(path, &ts) != 0) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s: Blob missing", rel, target);
    } else if (!inside) {
        PROBLEM(c, "snapshots", rel, "snapshots/%s -> %s points outside blobs/", rel, target);
    }
    return HK_OK;
}

/* Is target, the link at snapshots/<rel>, "../" x (the link's depth below the repo folder) +
 * "blobs/<name>" while snapshots/ and blobs/ are real folders? The walk reached the link through
 * real folders only (it follows no link), so then the link resolves into blobs/ without the two
 * realpath() calls (about 15 syscalls each) that the general check costs per link. */
static bool canonical_link(const char *repo_dir, const char *bdir, const char *rel, const char *target) {
    size_t ups = 1; /* snapshots/ itself */
    for (const char *p = rel; *p; p++) ups += *p == '/';
    for (size_t i = 0; i < ups; i++) {
        if (strncmp(target, "../", 3) != 0) return false;
        target += 3;
    }
    if (strncmp(target, "blobs/", 6) != 0) return false;
    target += 6;
    if (!*target || strchr(target, '/') || strcmp(target, ".") == 0 || strcmp(target, "..") == 0) return false;
    struct stat st;
    char *snaps = hk__path_join(repo_dir, "snapshots");
    bool real = snaps && lstat(snaps, &st) == 0 && S_ISDIR(st.st_mode) && lstat(bdir, &st) == 0 && S_ISDIR(st.st_mode);
    free(snaps);
    return real;
}

typedef struct stray_ctx {
    vctx *c;
    const char *commit, *variant;
    const char *dir; /* "snapshots/<commit>/build/<variant>" */
} stray_ctx;

static void report_stray(void *p, const char *path, const char *rel, bool is_dir) {
    stray_ctx *s = p;
    if (is_dir)
        PROBLEM(s->c, s->dir, rel,
                "variant %s at %.8s: %s is a directory where the metadata.json digest lists a file (`hubkern cache "
                "prune` removes it)", s->variant, s->commit, rel);
    else
        PROBLEM(s->c, s->dir, rel,
                "variant %s at %.8s: stray file %s is not in the metadata.json digest (`hubkern cache prune` removes "
                "it)", s->variant, s->commit, rel);
}

/* entries the digest lacks, in every variant; the digest of complete variants; incomplete ones
 * (interrupted pulls) are only noted */
static void verify_variants(vctx *c, const char *snapdir, const char *commit) {
    char *build = hk__asprintf("%s/%s/build", snapdir, commit);
    DIR *d = build ? opendir(build) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *vdir = hk__path_join(build, de->d_name);
        char *meta = vdir ? hk__path_join(vdir, "metadata.json") : NULL;
        char *text = NULL;
        char *entry = hk__asprintf("snapshots/%s/build/%s", commit, de->d_name);
        stray_ctx sc = {c, commit, de->d_name, entry};
        /* reads only: a receipt vouches for each file's stat identity, which a damaged file no
         * longer has, and the digest check of a load still finds entries the digest lacks */
        if (vdir && entry) (void)hk__cache_variant_strays(vdir, report_stray, &sc);
        if (meta && hk__read_file(&text, NULL, meta, 16u << 20) == HK_OK) {
            cJSON *j = cJSON_Parse(text);
            cJSON *files = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "digest"), "files");
            size_t missing = 0;
            cJSON *f;
            cJSON_ArrayForEach(f, files) {
                char *fp = hk__path_join(vdir, f->string);
                struct stat st;
                if (!fp || !hk__path_is_safe_relative(f->string) || stat(fp, &st) != 0) missing++;
                free(fp);
            }
            if (missing) {
                NOTE(c, entry, NULL, "variant %s at %.8s is incomplete (%zu file%s not pulled): pull it to complete it",
                     de->d_name, commit, missing, missing == 1 ? "" : "s");
            } else if (files) {
                bool has = false;
                /* always every byte: receipts are neither read nor written here */
                if (hk__verify_variant_digest(&has, NULL, vdir) != HK_OK) {
                    PROBLEM(c, entry, NULL, "%s (`hubkern cache verify --repair` fetches the damaged files again)",
                            hk_last_error());
                }
            }
            cJSON_Delete(j);
        }
        hk_clear_error();
        free(text);
        free(meta);
        free(vdir);
        free(entry);
    }
    if (d) closedir(d);
    free(build);
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
        vctx c = {rep, dir, label ? label : repos.ids[i], &sink, root};
        rep->repos++;
        char *blobs = hk__path_join(dir, "blobs");
        char *snaps = hk__path_join(dir, "snapshots");
        if (!hk__is_dir(snaps)) {
            PROBLEM(&c, "snapshots", NULL, "no snapshots/ directory");
        }
        if (blobs) rc = hk__cache_walk(blobs, verify_blob, &c, false);
        if (rc == HK_OK && snaps) rc = hk__cache_walk(snaps, verify_link, &c, false);
        /* refs */
        char *refs = hk__path_join(dir, "refs");
        DIR *d = NULL;
        struct dirent *de;
        d = snaps ? opendir(snaps) : NULL;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            rep->snapshots++;
            verify_variants(&c, snaps, de->d_name);
        }
        if (d) closedir(d);
        if (refs) {
            DIR *rd = opendir(refs);
            while (rd && (de = readdir(rd)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char *rp = hk__path_join(refs, de->d_name);
                if (rp && hk__is_dir(rp)) {
                    free(rp);
                    continue; /* nested refs (refs/pr/N) are read by Python the same way; skip */
                }
                char *data = NULL;
                size_t len = 0;
                rep->refs++;
                if (hk__str_ends_with(de->d_name, ".tmp")) {
                    NOTE(&c, "refs", de->d_name, "leftover temp file refs/%s", de->d_name);
                } else if (!rp || hk__read_file(&data, &len, rp, 256) != HK_OK) {
                    PROBLEM(&c, "refs", de->d_name, "cannot read refs/%s", de->d_name);
                } else if (!((len == 40 || len == 64) && hk__is_hex(data, len))) {
                    PROBLEM(&c, "refs", de->d_name, "refs/%s does not hold exactly a commit id (Python would misread it)",
                            de->d_name);
                } else {
                    char *sd = hk__asprintf("%s/%s", snaps, data);
                    if (!sd || !hk__is_dir(sd)) {
                        PROBLEM(&c, "refs", de->d_name, "refs/%s names %s but snapshots/%s is missing", de->d_name, data,
                                data);
                    }
                    free(sd);
                }
                hk_clear_error();
                free(data);
                free(rp);
            }
            if (rd) closedir(rd);
        }
        free(refs);
        free(blobs);
        free(snaps);
        free(label);
    }
    hk__cache_repos_free(&repos);
    return rc;
}
