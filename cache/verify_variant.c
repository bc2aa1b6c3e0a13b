/* `cache verify`'s digest check of one variant folder, from what the walk of snapshots/ saw in it
 * (cache/verify.c records it): strays, and for a complete variant every listed file against the
 * digest list of hk__digest_list_parse, the one the pull's check reads. A file whose blob the walk
 * of blobs/ hashed equal to its SHA-256 name is compared by that name; no link is followed out of
 * blobs/. */
#include "cache/verify_internal.h"
#include "util/text.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* Is rel inside the folder prefix (an entry's rel, or NULL)? */
static bool below(const char *prefix, const char *rel) {
    size_t n = prefix ? strlen(prefix) : 0;
    return n && strncmp(rel, prefix, n) == 0 && rel[n] == '/';
}

/* One listed file the walk found: compared with its digest entry without a second read where
 * this run already hashed its blob, else hashed (a link only into blobs/, a file not followed).
 * Appends a violation to msg; *missing counts files that are not there at all. */
static int check_entry(hk_strbuf *msg, size_t *violations, size_t *missing, const hk_verify_ctx *c, const char *vdir,
                        const hk_digest_list *dl, const hk_digest_entry *f, const hk_verify_entry *v) {
    char b64[100] = "";
    int hrc = HK_OK;
    if (v->kind == HK_VE_GONE) {
        hk__sb_printf(msg, "\n  MissingFile: %s (its link points to no blob)", f->rel);
        (*violations)++, (*missing)++;
        return HK_OK;
    }
    if (v->kind == HK_VE_OUT) {
        hk__sb_printf(msg, "\n  NotChecked: %s does not lead to a regular file inside blobs/ (not followed)", f->rel);
        (*violations)++;
        return HK_OK;
    }
    if (v->kind == HK_VE_BLOB && dl->kind == HK_HASH_SHA256 && c->info[v->blob].good) {
        unsigned char bytes[32];
        hrc = hk__unhex(bytes, c->names[v->blob], 32);
        if (hrc == HK_OK) hk__base64(b64, bytes, 32);
    } else {
        char *path = hk__path_join(vdir, v->rel);
        hrc = path ? hk__hash_file_b64_at(b64, sizeof b64, dl->kind, AT_FDCWD, path, v->kind == HK_VE_FILE ? O_NOFOLLOW : 0)
                   : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(path);
    }
    if (hrc == HK_ERR_NOMEM) return hrc; /* not a violation: the run fails with it */
    if (hrc != HK_OK) {
        hk__sb_printf(msg, "\n  MissingFile: %s (%s)", f->rel, hk_last_error());
        (*violations)++;
    } else if (!f->want || strcmp(f->want, b64) != 0) {
        hk__sb_printf(msg, "\n  HashMismatch: %s: expected %s, got %s", f->rel, f->want ? f->want : "(not a string)", b64);
        (*violations)++;
    }
    hk_clear_error();
    return HK_OK;
}

/* A variant of a snapshot (snapshots/<commit>/build/<variant> at vdir), from what the walk saw in
 * it (c->pend): entries its digest lacks (strays), and for complete variants the digest itself;
 * incomplete ones (interrupted pulls) are only noted. The list is hk__digest_list_parse's, the
 * one the pull's check reads; the skip rules are the digest's (hk__digest_skips). */
int hk__verify_walked_variant(hk_verify_ctx *c, const char *vdir, const char *commit, const char *variant) {
    char *entry = hk__asprintf("snapshots/%s/build/%s", commit, variant);
    hk_digest_list dl = {0};
    int prc = entry && c->meta_rc == HK_OK ? hk__digest_list_parse(&dl, c->meta, c->meta_len, vdir) : HK_ERR_NOT_FOUND;
    char *perr = prc == HK_ERR_DIGEST ? hk__strdup(hk_last_error()) : NULL;
    /* state of each listed file: 0 not seen, 1 a file or link, 2 a folder */
    unsigned char *seen = dl.has_files ? calloc(dl.n + 1, 1) : NULL;
    hk_strbuf msg;
    hk__sb_init(&msg);
    int rc = HK_OK;
    /* out of memory anywhere here fails the run: a variant is checked whole or not at all */
    if (!entry || prc == HK_ERR_NOMEM || (dl.has_files && !seen) || (prc == HK_ERR_DIGEST && !perr))
        rc = hk__fail(HK_ERR_NOMEM, "out of memory checking %s", vdir);
    if (rc || !dl.has_files) goto done;
    size_t violations = 0, missing = 0;
    const char *skip_digest = NULL, *skip_stray = NULL; /* folders whose entries are not looked at */
    for (size_t i = 0; i < c->npend; i++) {
        const hk_verify_entry *v = &c->pend[i];
        const char *name = strrchr(v->rel, '/');
        bool top = !name, dir = v->kind == HK_VE_DIR;
        name = name ? name + 1 : v->rel;
        const hk_digest_entry *f = hk__digest_list_find(&dl, v->rel);
        if (!below(skip_stray, v->rel)) { /* strays: as hk__cache_variant_strays */
            skip_stray = NULL;
            if (hk__digest_skips(name, top) || hk__str_ends_with(name, ".tmp")) {
                if (dir) skip_stray = v->rel;
            } else if (dir && f) {
                PROBLEM(c, entry, v->rel,
                        "variant %s at %.8s: %s is a directory where the metadata.json digest lists a file (`hubkern "
                        "cache prune` removes it)", variant, commit, v->rel);
                skip_stray = v->rel;
            } else if (!dir && !f) {
                PROBLEM(c, entry, v->rel,
                        "variant %s at %.8s: stray file %s is not in the metadata.json digest (`hubkern cache prune` "
                        "removes it)", variant, commit, v->rel);
            }
        }
        if (below(skip_digest, v->rel)) continue;
        skip_digest = NULL;
        if (hk__digest_skips(name, top)) {
            if (dir) skip_digest = v->rel;
        } else if (dir) {
            if (f) seen[f - dl.e] = 2;
        } else if (!f) {
            hk__sb_printf(&msg, "\n  UnknownFile: %s", v->rel);
            violations++;
        } else {
            seen[f - dl.e] = 1;
            if (!perr && (rc = check_entry(&msg, &violations, &missing, c, vdir, &dl, f, v)) != HK_OK) break;
        }
    }
    if (rc == HK_OK && msg.oom) rc = hk__fail(HK_ERR_NOMEM, "out of memory checking %s", vdir);
    if (rc) goto done;
    for (size_t k = 0; k < dl.n; k++) {
        if (seen[k] == 1) continue;
        hk__sb_printf(&msg, "\n  MissingFile: %s", dl.e[k].rel);
        violations++;
        missing += seen[k] == 0; /* a folder in its place is damage, not an unfinished pull */
    }
    if (msg.oom) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory checking %s", vdir);
    } else if (perr) { /* a list no pull accepts, whatever the files */
        PROBLEM(c, entry, NULL, "%s (`hubkern cache verify --repair` fetches the damaged files again)", perr);
    } else if (missing) {
        /* files not there at all: an interrupted pull, not damage */
        NOTE(c, entry, NULL, "variant %s at %.8s is incomplete (%zu file%s not pulled): pull it to complete it", variant,
             commit, missing, missing == 1 ? "" : "s");
    } else if (violations) {
        PROBLEM(c, entry, NULL,
                "%s does not match its metadata.json digest (%zu violation%s):%s (`hubkern cache verify --repair` "
                "fetches the damaged files again)", vdir, violations, violations == 1 ? "" : "s",
                msg.data ? msg.data : "");
    }
done:
    hk__sb_free(&msg);
    free(seen);
    free(perr);
    hk__digest_list_free(&dl);
    if (rc == HK_OK) hk_clear_error();
    free(entry);
    return rc;
}
