/* The pull result (pull_result.c) as pull.c fills it. Internal. */
#ifndef HK_CLIENT_PULL_INTERNAL_H
#define HK_CLIENT_PULL_INTERNAL_H

#include "client/download.h" /* hk_dl_item */
#include "client/tree.h"
#include "hubkern/hub.h"
#include "util/arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hk_pull_result {
    char *repo, *revision, *commit, *snapshot;
    char **variants, **variant_paths;
    size_t nvariants;
    /* the files' paths and blob ids point into the listing (online: the one the pull planned from,
     * held here) or into strs (the files of a variant complete here, read from the snapshot):
     * one copy of a listed name per process, however many hold it */
    const char **files;
    size_t nfiles;
    const tree *listing; /* a reference, or NULL */
    hk_arena strs;
    /* per file, filled once the file list is final (pull.c): size, blob id, cached before the pull */
    uint64_t *file_sizes;
    const char **file_blobs;
    unsigned char *file_cached;
    bool details_pending; /* some files' size and blob are still to be read from their links */
    size_t files_downloaded;
    uint64_t bytes_downloaded, bytes_resumed, bytes_verified, bytes_trusted;
    bool offline;
};

/* The bytes of an hk_pull_spec of a given struct version (fields past it are not read). */
size_t hk__pull_spec_size(unsigned version);
/* *.pyc and __pycache__ are never pulled (like the kernels library). */
bool hk__client_excluded(const char *path);
/* Choose which variants to pull among names (spec->all_variants, spec->variant, else this
 * machine's best). Fills r->variants; `where` names the repo and commit in messages. */
int hk__client_choose_variants(hk_pull_result *r, char **names, size_t n, const hk_pull_spec *spec, const char *where);
/* Append a copy of a repo path to r->files (*cap: its capacity). */
int hk__client_add_file(hk_pull_result *r, size_t *cap, const char *path);
/* Append path to r->files, not copied: it lives as long as r (a path of r->listing, or in r->strs). */
int hk__client_add_listed_file(hk_pull_result *r, size_t *cap, const char *path);
/* Append every file under dir/rel (no __pycache__, no *.pyc) to r->files. */
int hk__client_collect_local_files(hk_pull_result *r, size_t *cap, const char *dir, const char *rel);

/* ---- the files a pull's patterns choose (shared by the online and offline pulls) ---------- */
/* metadata.json or metadata.json.sigstore at the top of build/<variant>/ (prefix "build/<variant>")? */
bool hk__pull_variant_metadata_file(const char *path, const char *prefix);
/* Does the spec choose files by pattern? (Without, no variant is ever left out.) */
bool hk__pull_has_patterns(const hk_pull_spec *spec);
/* Keep, of r->files[from..], the files the spec's patterns choose and the variant's metadata.json
 * and bundle; none chosen: none kept. *out_chosen: how many were chosen, *out_all: of how many. */
/* Offline with patterns (vdir the variant folder, rel "build/<variant>"): the files they choose
 * among those the variant's metadata.json digest lists must all be cached, the others need not
 * be; HK_ERR_OFFLINE naming one that is not. *chosen counts the chosen; *partial: the variant
 * lacks some file, chosen or not. No digest to count against: HK_OK, 0 (the digest check reports
 * it). */
int hk__pull_offline_chosen_cached(size_t *chosen, bool *partial, const char *vdir, const char *rel,
                                   const hk_pull_spec *spec, const char *commit);
void hk__pull_keep_chosen(hk_pull_result *r, size_t from, const char *prefix, const hk_pull_spec *spec,
                          size_t *out_chosen, size_t *out_all);
/* Size, blob id and "cached before this pull" of the files among items (the pull's plan; none
 * offline); the others are files of a variant that was complete here, read from their links when
 * asked, so that a warm pull costs no call per file. */
int hk__pull_file_details(hk_pull_result *r, const hk_dl_item *items, size_t nitems);
/* Take the variants none of whose files the patterns chose out of the result. */
void hk__pull_drop_variants(hk_pull_result *r, const bool *dropped);

/* ---- staging, verifying and publishing the pulled variants (pull_publish.c) ---------------- */
struct hk_verify_stats;
/* Digest check of every pulled variant (receipts of hub's cache honoured); skip[i]: already
 * checked; partial[i]: only the files present are hashed; fresh: blobs just written. */
int hk__pull_verify_variants(hk_pull_result *r, const hk_hub *hub, const bool *skip, const bool *partial,
                             const char *const *fresh, size_t nfresh, unsigned vflags);
/* Offline: HK_ERR_OFFLINE when files the variant's digest lists are missing from vdir. */
int hk__pull_offline_variant_complete(const char *vdir, const char *repo, const char *commit, const char *variant);
/* Is the published variant_dir complete and intact as its metadata.json digest proves? */
bool hk__pull_variant_complete_locally(const hk_hub *hub, const char *variant_dir, struct hk_verify_stats *st,
                                       unsigned vflags);
/* Stage the files of the variants not checked[], check each staged variant's signature (sigmode)
 * and digest, then publish it (partial[v]: file by file). A failure leaves the snapshot as it was. */
int hk__pull_stage_verify_publish(hk_pull_result *r, hk_hub *hub, const char *repo, const char *repo_dir,
                                  const char *commit, const bool *checked, const bool *partial,
                                  const hk_dl_item *items, size_t nitems, int sigmode);

#endif
