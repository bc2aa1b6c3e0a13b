/* The staging-and-publishing half of a pull (pull.c calls it): the digest check of the pulled
 * variants, whether a published variant is complete here, and staging a pull's files, checking
 * each staged variant's signature and digest and only then publishing it into the snapshot. */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/pull_internal.h"
#include "client/signature.h"
#include "client/stage.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Digest check of every pulled variant (verification receipts of hub's cache honoured); skip[i]:
 * already checked; fresh: blobs just written. */
int hk__pull_verify_variants(hk_pull_result *r, const hk_hub *hub, const bool *skip, const bool *partial,
                             const char *const *fresh, size_t nfresh, unsigned vflags) {
    for (size_t i = 0; i < r->nvariants; i++) {
        if (skip && skip[i]) continue;
        bool has = false, part = partial && partial[i];
        hk_verify_stats st;
        /* a variant only partly cached: the files there are hashed, no receipt read or written
         * (a receipt vouches for a whole variant) */
        int rc = hk__verify_variant_flags(&has, &st, r->variant_paths[i], part ? NULL : hub->cache_root, false, fresh,
                                          nfresh, vflags | (part ? HK_VERIFY_PRESENT_ONLY : 0));
        if (rc) return rc;
        if (has && r->offline) r->bytes_verified += st.bytes_hashed + st.bytes_fresh;
        r->bytes_trusted += st.bytes_trusted;
    }
    return HK_OK;
}

/* Offline, a variant some of whose files never arrived (an interrupted pull, or a metadata.json
 * fetched alone) is incomplete, not tampered with: say so, and what completes it. */
int hk__pull_offline_variant_complete(const char *vdir, const char *repo, const char *commit, const char *variant) {
    size_t missing = 0, listed = 0;
    char *first = NULL;
    int rc = hk__digest_missing_files(&missing, &listed, &first, vdir);
    if (rc) { /* no digest to count against: the digest check reports it */
        hk_clear_error();
        return HK_OK;
    }
    if (missing)
        rc = hk__fail(HK_ERR_OFFLINE, "offline: build/%s of %s at %.12s is incomplete in the cache (%zu of %zu files "
                      "missing, e.g. %s): an earlier pull did not finish; pull it online to complete it",
                      variant, repo, commit, missing, listed, first ? first : "?");
    free(first);
    return rc;
}

/* Is snapshots/<commit>/build/<variant> complete and intact, as its metadata.json digest proves?
 * (A commit never changes, so then no listing or download is needed.) */
bool hk__pull_variant_complete_locally(const hk_hub *hub, const char *variant_dir, hk_verify_stats *st,
                                       unsigned vflags) {
    bool has = false;
    memset(st, 0, sizeof *st);
    char *meta = hk__path_join(variant_dir, "metadata.json");
    bool present = meta && hk__path_exists(meta);
    free(meta);
    if (!present) return false;
    int rc = hk__verify_variant_flags(&has, st, variant_dir, hub->cache_root, true, NULL, 0, vflags);
    hk_clear_error();
    return rc == HK_OK && has;
}


typedef struct complete_ctx {
    const hk_hub *hub;
} complete_ctx;

static bool published_complete(const char *variant_dir, void *ud) {
    hk_verify_stats st;
    return hk__pull_variant_complete_locally(((complete_ctx *)ud)->hub, variant_dir, &st, 0);
}

/* Link the verified files of a variant pulled in part into the snapshot one by one (each link is
 * atomic; other files already there stay): the data files first, then the bundle, metadata.json
 * last, so that a reader finding metadata.json finds its signature next to it. */
static int publish_files(const char *repo_dir, const char *commit, const char *variant, const hk_dl_item *items,
                         size_t nitems) {
    char *prefix = hk__asprintf("build/%s", variant);
    if (!prefix) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (int pass = 0; pass < 3 && rc == HK_OK; pass++)
        for (size_t i = 0; rc == HK_OK && i < nitems; i++)
            for (size_t k = 0; rc == HK_OK && k < items[i].npaths; k++) {
                const char *path = items[i].paths[k];
                size_t pl = strlen(prefix);
                if (strncmp(path, prefix, pl) != 0 || path[pl] != '/') continue;
                int want = !hk__pull_variant_metadata_file(path, prefix) ? 0 : hk__str_ends_with(path, ".sigstore") ? 1 : 2;
                if (want == pass) rc = hk_cache_link_snapshot(repo_dir, commit, path, items[i].etag);
            }
    free(prefix);
    return rc;
}

/* Stage every file of the variants not yet checked (links to their verified blobs), check each
 * staged variant against its metadata.json digest, and only then publish it into the snapshot.
 * A failure leaves the snapshot as it was. After publishing, the snapshot's copy is checked once
 * more through the verification receipts so that the receipt is written for it (the sha256 blobs,
 * hashed at download or by the staged check, are not read again). */
int hk__pull_stage_verify_publish(hk_pull_result *r, hk_hub *hub, const char *repo, const char *repo_dir,
                                  const char *commit, const bool *checked, const bool *partial,
                                  const hk_dl_item *items, size_t nitems, int sigmode) {
    bool any = false;
    for (size_t v = 0; v < r->nvariants; v++) any |= !checked[v];
    if (!any) return HK_OK;
    hk_stage stage;
    int rc = hk__stage_open(&stage, hub->cache_root, repo_dir, commit);
    if (rc) return rc;
    const char **fresh = calloc(nitems + 1, sizeof *fresh), **sha = calloc(nitems + 1, sizeof *sha);
    /* per variant: what its staged check hashed, vouching for the published copy's same blobs */
    hk_receipt **prior = calloc(r->nvariants + 1, sizeof *prior);
    size_t nfresh = 0, nsha = 0;
    if (!fresh || !sha || !prior) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == HK_OK && i < nitems; i++) {
        if (items[i].downloaded || items[i].hashed) fresh[nfresh++] = items[i].etag;
        if (strlen(items[i].etag) == 64) sha[nsha++] = items[i].etag;
        for (size_t k = 0; rc == HK_OK && k < items[i].npaths; k++)
            rc = hk__stage_link(&stage, items[i].paths[k], items[i].etag);
    }
    size_t whole = 0; /* variants published whole, each checked again there */
    for (size_t v = 0; v < r->nvariants; v++) whole += !checked[v] && !partial[v];
    for (size_t v = 0; rc == HK_OK && v < r->nvariants; v++) {
        if (checked[v]) continue;
        char *sdir = hk__stage_variant_dir(&stage, r->variants[v]);
        if (!sdir) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        if (!hk__is_dir(sdir) && hk__mkdirs(sdir, 0777) != HK_OK) rc = hk_last_error_code();
        /* the signature first: a forged metadata.json never reaches the JSON parser (client/signature.c) */
        if (rc == HK_OK && (rc = hk__client_check_signature(hub, sigmode, repo, repo_dir, commit, r->variants[v], sdir)))
            hk__fail_context("nothing of it was published to the snapshot");
        bool has = false;
        hk_verify_stats st;
        /* one variant: its digest list waits for the published check with its receipt (not parsed
         * twice); several: each list is parsed again there, rather than all of them held at once */
        unsigned vf = partial[v] ? HK_VERIFY_PRESENT_ONLY : whole == 1 ? HK_VERIFY_KEEP_LIST : 0;
        if (rc == HK_OK && (rc = hk__verify_variant_prior(&has, &st, sdir, NULL, false, fresh, nfresh, vf, &prior[v])))
            hk__fail_context("build/%s of %s at %.12s (nothing of it was published to the snapshot)", r->variants[v],
                            repo, commit);
        free(sdir);
    }
    complete_ctx cc = {hub};
    for (size_t v = 0; rc == HK_OK && v < r->nvariants; v++) {
        if (checked[v]) continue;
        if (partial[v]) { /* some files only: added to the snapshot's copy, which keeps the others */
            rc = publish_files(repo_dir, commit, r->variants[v], items, nitems);
            continue;
        }
        if ((rc = hk__stage_publish(&stage, r->variants[v], published_complete, &cc))) break;
        bool has = false;
        hk_verify_stats st;
        if ((rc = hk__verify_variant_prior(&has, &st, r->variant_paths[v], hub->cache_root, true, sha, nsha, 0,
                                           &prior[v])))
            hk__fail_context("build/%s of %s at %.12s changed while it was published", r->variants[v], repo, commit);
    }
    for (size_t v = 0; prior && v < r->nvariants; v++) hk__receipt_free(prior[v]);
    free(prior);
    free(fresh);
    free(sha);
    hk__stage_discard(&stage);
    return rc;
}
