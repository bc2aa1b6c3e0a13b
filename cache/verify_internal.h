/* What `cache verify`'s one walk of a repo keeps (cache/verify.c) for the digest check of each
 * variant folder when the walk leaves it (cache/verify_variant.c). Internal to those two. */
#ifndef HK_CACHE_VERIFY_INTERNAL_H
#define HK_CACHE_VERIFY_INTERNAL_H

#include "cache/maint_internal.h"
#include "util/strmap.h"

/* What the walk saw at one entry of a variant folder. Only HK_VE_FILE, HK_VE_BLOB and HK_VE_INSIDE are
 * read by the digest check: nothing else is followed. */
typedef enum {
    HK_VE_FILE,   /* a regular file (a cache made without links) */
    HK_VE_DIR,    /* a folder */
    HK_VE_BLOB,   /* a canonical link to a regular file the walk of blobs/ found (blob: its name) */
    HK_VE_INSIDE, /* another link that resolves to a file inside blobs/ */
    HK_VE_GONE,   /* a link to nothing */
    HK_VE_OUT     /* a link out of blobs/ or to something not a regular file, or a device, socket, fifo */
} hk_verify_kind;

typedef struct hk_verify_entry {
    char *rel; /* below the variant folder */
    hk_verify_kind kind;
    size_t blob; /* HK_VE_BLOB: index into hk_verify_ctx.names */
} hk_verify_entry;

/* A blob of the walk of blobs/: good when its bytes matched its SHA-256 name in this run (a
 * digest check need not read them again); kept: the bytes of a small git blob that matched its
 * SHA-1 name (a metadata.json is one: the variant's check parses these instead of reading it). */
typedef struct hk_verify_blob {
    bool good;
    char *kept;
    size_t kept_len;
} hk_verify_blob;

typedef struct hk_verify_ctx {
    hk_cache_report *rep;
    const char *repo_dir;
    const char *label;
    const hk_cache_sink *sink;
    const char *root;
    /* what the blob walk found, for the link and digest checks of the same repo: every blob file
     * (a link to one of them needs no stat), and the SHA-256-named ones whose bytes matched their
     * name in this run (the digest check need not hash them again) */
    char **names;
    hk_verify_blob *info; /* one per name */
    size_t nnames, cap_names, cap_info, kept_bytes;
    hk_strmap blobs;
    int canonical_dirs; /* snapshots/ and blobs/ are real folders: -1 not asked yet */
    /* the entries of the variant folder the walk is in (rels below it), for its digest check once
     * the walk leaves it: vlen is the length of "<commit>/build/<variant>/", 0 outside a variant */
    hk_verify_entry *pend;
    size_t npend, cap_pend, vlen;
    /* that variant's metadata.json, read through its folder's descriptor when the walk met it as a
     * file or a link into blobs/ (meta_rc: HK_ERR_NOT_FOUND when not, or not met) */
    char *meta;
    size_t meta_len;
    int meta_rc;
    hk_strmap snaps; /* the snapshot folders the walk found (for the refs), named in snapnames */
    char **snapnames;
    size_t nsnapnames, cap_snapnames;
    const char *snaps_dir;
} hk_verify_ctx;

/* a problem with the entry dir/rel of the repo: reported and counted */
#define PROBLEM(c, dir, rel, ...) \
    (hk__cache_finding((c)->sink, HK_CACHE_PROBLEM, NULL, (c)->label, dir, rel, __VA_ARGS__), (c)->rep->problems++)
#define NOTE(c, dir, rel, ...) hk__cache_finding((c)->sink, HK_CACHE_NOTE, NULL, (c)->label, dir, rel, __VA_ARGS__)

/* The variant snapshots/<commit>/build/<variant> at vdir, from what the walk recorded in c->pend
 * and c->meta: its strays and, complete, its digest, reported as findings. HK_ERR_NOMEM (and no
 * finding) when memory ran out; else HK_OK, whatever was found. */
int hk__verify_walked_variant(hk_verify_ctx *c, const char *vdir, const char *commit, const char *variant);

#endif
