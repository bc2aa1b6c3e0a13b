/* hubkern — the local cache: where it is, what it holds, and how to check, repair, trim and carry it.
 *
 * The cache is byte-compatible with the huggingface_hub cache (<root>/<type>s--org--name/{blobs,
 * snapshots,refs}), so everything here works on caches that Python clients share, and on every repo
 * type (models, datasets, spaces, kernels). Typical use (this is `hubkern cache verify`):
 *
 *     hk_cache_options o = HK_CACHE_OPTIONS_INIT;   // or hk_cache_options_init(&o, HK_CACHE_OPTIONS_VERSION)
 *     o.line_fn = print_line;                        // one human-readable line per finding
 *     o.finding_fn = collect;                        // or each as fields (kind, repo, path, ...)
 *     hk_cache_report *rep;
 *     if (hk_cache_verify(&rep, &o)) die(hk_last_error());
 *     if (hk_cache_report_problems(rep)) ...         // not clean
 *     hk_cache_report_free(rep);
 *
 * Strings returned as `char **out` are newly allocated: free them with hk_free. Functions taking an
 * options struct check its version first: an unknown version is HK_ERR_INVALID_ARG with a message
 * naming the init call. A NULL options pointer means all defaults. */
#ifndef HUBKERN_CACHE_H
#define HUBKERN_CACHE_H

#include "hubkern/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- repo types and ids ------------------------------------------------------------------- */
/* Values are stable (they index the folder prefixes). */
typedef enum hk_repo_type {
    HK_REPO_MODEL = 0,
    HK_REPO_DATASET = 1,
    HK_REPO_SPACE = 2,
    HK_REPO_KERNEL = 3
} hk_repo_type;

/* "models" / "datasets" / "spaces" / "kernels": the Hub API segment and the cache folder prefix.
 * NULL for a value outside the enum. The string is static. */
HK_API const char *hk_repo_type_plural(hk_repo_type type);
/* Parse "model", "dataset", "space" or "kernel" (singular or plural) into *out.
 * HK_ERR_INVALID_ARG (message lists the accepted names) for anything else, NULL included. */
HK_API int hk_repo_type_parse(hk_repo_type *out, const char *name);
/* 1 when repo_id is "org/name" or "name" as the Hub accepts it ([A-Za-z0-9._-], no "--" or "..",
 * no leading or trailing '-' or '.', at most 96 characters a part); 0 otherwise (NULL included). */
HK_API int hk_repo_id_valid(const char *repo_id);

/* ---- where the cache is ------------------------------------------------------------------- */
/* The cache root for repos of `type`: explicit_root when given (non-empty), else KERNELS_CACHE
 * (kernel repos only), HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub,
 * ~/.cache/huggingface/hub. "~" is expanded, the result made absolute and, when it exists,
 * symlink-free. It need not exist. *out: free with hk_free. Errors: HK_ERR_NOMEM, HK_ERR_IO (no
 * current directory for a relative path). */
HK_API int hk_cache_root(char **out, const char *explicit_root, hk_repo_type type);
/* The folder of a repo in a cache root: "<root>/<type>s--org--name" (it need not exist). Returns a
 * string to free with hk_free, or NULL (last error set) when root or repo_id is NULL, repo_id is not
 * a repo id (hk_repo_id_valid: HK_ERR_INVALID_ARG), type is outside the enum or memory ran out. */
HK_API char *hk_cache_repo_dir(const char *root, hk_repo_type type, const char *repo_id);
/* The snapshot folder of a commit in a repo folder: "<repo_dir>/snapshots/<commit>" (it need not
 * exist). NULL (last error set: HK_ERR_UNSAFE_PATH) unless commit is 40 or 64 lowercase hex. Free
 * with hk_free. */
HK_API char *hk_cache_snapshot_dir(const char *repo_dir, const char *commit);
/* A variant's folder relative to its repo folder, as the findings of hk_cache_verify name it:
 * "snapshots/<commit>/build/<variant>". NULL (last error set: HK_ERR_UNSAFE_PATH) unless commit is
 * 40 or 64 lowercase hex and variant one path component. Free with hk_free. */
HK_API char *hk_cache_variant_entry(const char *commit, const char *variant);
/* The commit a cached ref names: the content of <repo_dir>/refs/<ref> (a branch, tag or "refs/pr/N"),
 * trimmed. *out_commit (40 or 64 hex characters): free with hk_free. Errors: HK_ERR_NOT_FOUND (no
 * such ref), HK_ERR_INVALID_ARG (a ref name that would leave refs/, or NULL arguments),
 * HK_ERR_PARSE (the file does not hold a commit id), HK_ERR_NOMEM. */
HK_API int hk_cache_resolve_ref(char **out_commit, const char *repo_dir, const char *ref);

/* Writing a cache-layout store (refs, snapshot links, CACHEDIR.TAG) is what a publisher or a mirror
 * does, not a loader: those primitives are in hubkern/sys/cache.h. */

/* ---- inspect, check and repair: ls, verify, prune, rm --------------------------------------- */
/* Receives one line of human-readable output per item (listing row, problem, note, removal);
 * `line` is valid during the call only. Called on the calling thread. */
typedef void (*hk_cache_line_fn)(void *userdata, const char *line);

/* What one verify finding or one prune / rm removal is about. Values are stable. */
typedef enum hk_cache_finding_kind {
    HK_CACHE_PROBLEM = 0,      /* verify: something is wrong (counted by hk_cache_report_problems) */
    HK_CACHE_NOTE = 1,         /* worth knowing, not wrong: a temp file, an incomplete variant; prune:
                                  what it keeps on purpose (an unfinished pull's blobs) */
    HK_CACHE_REMOVED = 2,      /* prune / rm: removed (counted by hk_cache_report_removed) */
    HK_CACHE_WOULD_REMOVE = 3, /* prune / rm dry run: would be removed */
    HK_CACHE_FAILED = 4        /* prune / rm: a removal that could not be made */
} hk_cache_finding_kind;

/* One finding of verify or one entry of prune / rm, as fields. Strings are valid during the call
 * only; NULL where the finding has none. */
typedef struct hk_cache_finding {
    hk_cache_finding_kind kind;
    const char *repo;    /* "kernel/org/name" (singular type / repo id), as `cache ls` prints it */
    const char *repo_id; /* "org/name" */
    const char *path;    /* the entry, relative to the repo folder: "blobs/<hash>",
                            "snapshots/<commit>/...", "refs/<ref>"; NULL for a whole repo, a
                            verification receipt (beside the repo folder) or none */
    const char *message; /* the text after the repo: what is wrong, kept or removed */
    const char *line;    /* the whole line, as line_fn receives it ("PROBLEM: kernel/org/name: ...") */
} hk_cache_finding;

/* Receives each finding of verify and each entry of prune / rm; called on the calling thread. */
typedef void (*hk_cache_finding_fn)(void *userdata, const hk_cache_finding *finding);

/* "problem", "note", "removed", "would_remove", "failed" (the names of docs/json.md); NULL for a
 * value outside the enum. The string is static. */
HK_API const char *hk_cache_finding_kind_name(hk_cache_finding_kind kind);

typedef struct hk_cache_options {
    unsigned int version;     /* HK_CACHE_OPTIONS_VERSION */
    const char *cache_dir;    /* NULL: hk_cache_root(NULL, HK_REPO_KERNEL) */
    const char *repo_id;      /* ls / verify: only this repo ("org/name", any type); NULL: all.
                                 rm: the repo to remove from (required) */
    const char *revision;     /* rm: remove this branch, tag or commit only; NULL: the whole repo */
    int dry_run;              /* prune / rm: 1 lists what would go and removes nothing */
    int detached;             /* prune: 1 also removes snapshots no ref names */
    int json;                 /* ls: 1 hands one JSON document to line_fn instead of one line a repo */
    hk_cache_line_fn line_fn; /* NULL: nothing is reported line by line (counts only) */
    void *line_userdata;
    /* version 2: verify's findings and prune / rm's entries as fields (each also goes to line_fn,
     * as its line, when both are set); NULL: none */
    hk_cache_finding_fn finding_fn;
    void *finding_userdata;
} hk_cache_options;

#define HK_CACHE_OPTIONS_VERSION 2 /* 2: finding_fn */
#define HK_CACHE_OPTIONS_INIT { HK_CACHE_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, NULL }

/* Fill opts with the defaults of HK_CACHE_OPTIONS_INIT for this version. HK_ERR_INVALID_ARG for a
 * NULL opts or a version this library does not know. */
HK_API int hk_cache_options_init(hk_cache_options *opts, unsigned int version);

/* The counts of one ls / verify / prune / rm run. Opaque: read it with the accessors below. */
typedef struct hk_cache_report hk_cache_report;

/* List the repos of the cache with their refs, snapshots and blob bytes. A missing cache root is an
 * empty cache. Errors: HK_ERR_IO (root unreadable), HK_ERR_NOMEM, HK_ERR_INVALID_ARG (options).
 * *out (may be NULL when only the lines matter): free with hk_cache_report_free; NULL on failure. */
HK_API int hk_cache_ls(hk_cache_report **out, const hk_cache_options *opts);
/* Check the cache without changing anything in it (a verification receipt vouches only for files
 * whose stat identity is unchanged, so a damaged file is hashed again by the next load): re-hash every blob against its name (sha256 or git
 * blob sha1), check every snapshot link (relative, inside blobs/, target present), every ref (holds
 * exactly a commit whose snapshot exists), every variant's entries against its metadata.json digest
 * (stray files not in the digest, directories where the digest lists a file) and the full digest of
 * complete variants. Problems go to line_fn as "PROBLEM: ..." (and to finding_fn as
 * HK_CACHE_PROBLEM, notes as HK_CACHE_NOTE) and are counted
 * (hk_cache_report_problems); HK_OK even when problems were found. Errors: HK_ERR_NOT_FOUND
 * (opts->repo_id given and not cached), HK_ERR_IO, HK_ERR_NOMEM, HK_ERR_INVALID_ARG. */
HK_API int hk_cache_verify(hk_cache_report **out, const hk_cache_options *opts);
/* Repair and trim: remove temp files (*.incomplete, *.tmp) no live download holds and no unfinished
 * pull will resume (a pull records the blobs it will link in .locks/<repo folder>/hubkern-pulls/
 * before downloading and forgets them once published; such blobs and their <etag>.incomplete files
 * are kept, and reported, for 7 days), broken links,
 * snapshot entries a variant's metadata.json digest does not list (stray files, directories where a
 * file belongs: what a hostile or broken mirror can leave), blobs no snapshot link points to (and no
 * unfinished pull will), empty
 * directories, stale verification receipts; with detached, snapshots no ref names. Blobs that any
 * remaining snapshot entry points to are kept. Removals go to line_fn and finding_fn and are counted
 * (hk_cache_report_removed / _removed_bytes). Errors: HK_ERR_IO, HK_ERR_NOMEM, HK_ERR_INVALID_ARG. */
HK_API int hk_cache_prune(hk_cache_report **out, const hk_cache_options *opts);
/* Remove opts->repo_id entirely (revision NULL) or one revision of it (branch, tag or commit: its
 * snapshot, the refs naming it, its verification receipts, then blobs left unreferenced). Errors:
 * HK_ERR_INVALID_ARG (no repo_id, options), HK_ERR_NOT_FOUND (repo not cached, or nothing names the
 * revision), HK_ERR_IO, HK_ERR_NOMEM. */
HK_API int hk_cache_rm(hk_cache_report **out, const hk_cache_options *opts);

/* Accessors; each returns 0 for a NULL report. */
HK_API size_t hk_cache_report_repos(const hk_cache_report *r);     /* repo folders visited */
HK_API size_t hk_cache_report_snapshots(const hk_cache_report *r); /* ls / verify: snapshots seen */
HK_API size_t hk_cache_report_blobs(const hk_cache_report *r);     /* verify: blobs hashed */
HK_API size_t hk_cache_report_refs(const hk_cache_report *r);      /* ls / verify: refs seen */
HK_API uint64_t hk_cache_report_bytes(const hk_cache_report *r);   /* ls / verify: blob bytes on disk */
HK_API size_t hk_cache_report_problems(const hk_cache_report *r);  /* verify: problems found */
HK_API size_t hk_cache_report_removed(const hk_cache_report *r);   /* prune / rm: entries (that would be) removed */
HK_API uint64_t hk_cache_report_removed_bytes(const hk_cache_report *r);
HK_API void hk_cache_report_free(hk_cache_report *r); /* NULL is fine */

/* ---- bundles: carry cached repos to machines without network access ----------------------- */
typedef struct hk_bundle_options {
    unsigned int version;   /* HK_BUNDLE_OPTIONS_VERSION */
    const char *cache_dir;  /* NULL: hk_cache_root(NULL, repo_type) */
    hk_repo_type repo_type; /* the type of plain "org/name" repo ids given to hk_bundle_create, and
                               the default cache root; default HK_REPO_KERNEL */
} hk_bundle_options;

#define HK_BUNDLE_OPTIONS_VERSION 1
#define HK_BUNDLE_OPTIONS_INIT { HK_BUNDLE_OPTIONS_VERSION, NULL, HK_REPO_KERNEL }

/* Fill opts with the defaults of HK_BUNDLE_OPTIONS_INIT. HK_ERR_INVALID_ARG for a NULL opts or an
 * unknown version. */
HK_API int hk_bundle_options_init(hk_bundle_options *opts, unsigned int version);

/* What a bundle create or extract did. Opaque: read it with the accessors below. */
typedef struct hk_bundle_report hk_bundle_report;

/* Write the repos (repo ids "org/name" of opts->repo_type, or cache folder names such as
 * "kernels--org--name") into a tar archive at out_path, compressed as its name says: .tar (none),
 * .tar.gz / .tgz (gzip), .tar.zst / .tzst (zstd), .tar.bz2 / .tbz2 (bzip2), .tar.xz / .txz (xz);
 * any other name is HK_ERR_INVALID_ARG (it would say a compression the file lacks). Blobs come first, then snapshot links, then refs; temp files, locks and
 * .incomplete blobs are left out. Every repo is checked before anything is written, so a typo leaves
 * an existing out_path alone; a failure while writing deletes out_path. Errors: HK_ERR_INVALID_ARG
 * (no path, no repos, a bad id, an unknown name ending), HK_ERR_NOT_FOUND (a repo not cached), HK_ERR_UNSUPPORTED (no such
 * compressor), HK_ERR_IO, HK_ERR_NOMEM. *out (may be NULL): free with hk_bundle_report_free. */
HK_API int hk_bundle_create(hk_bundle_report **out, const char *out_path, const char *const *repos, size_t n_repos,
                            const hk_bundle_options *opts);
/* Import a bundle into the cache (created if needed). The archive is treated as hostile: only the
 * cache layout is accepted, every blob is re-hashed against its name, every link must point at a blob
 * the bundle carries or the cache has, and refs are written last, only when everything else landed;
 * on failure nothing that references unverified data is recorded. Errors: HK_ERR_NOT_FOUND (no such
 * file), HK_ERR_PARSE (not a tar, corrupt, a ref that is no commit), HK_ERR_UNSAFE_PATH (an entry
 * outside the layout), HK_ERR_INTEGRITY (a hash or size that does not match, a missing blob),
 * HK_ERR_IO, HK_ERR_DISK_FULL, HK_ERR_NOMEM. *out (may be NULL): free with hk_bundle_report_free. */
HK_API int hk_bundle_extract(hk_bundle_report **out, const char *in_path, const hk_bundle_options *opts);

/* Visits one entry of a bundle: its path in the archive, kind 'f' (file), 'd' (directory), 'l'
 * (symlink; link_target set) or '?', and size. Strings are valid during the call only. */
typedef void (*hk_bundle_entry_fn)(void *userdata, const char *path, char kind, uint64_t size, const char *link_target);
/* Visit each entry of a bundle without extracting anything. Errors: HK_ERR_INVALID_ARG (NULL
 * in_path or fn), HK_ERR_NOT_FOUND, HK_ERR_PARSE, HK_ERR_NOMEM. */
HK_API int hk_bundle_list(const char *in_path, hk_bundle_entry_fn fn, void *userdata);

HK_API uint32_t hk_bundle_report_repos(const hk_bundle_report *r);
/* create: blobs written into the bundle; extract: blobs new to the cache */
HK_API uint32_t hk_bundle_report_blobs_added(const hk_bundle_report *r);
/* extract: blobs the cache already had (their content was verified in the archive anyway) */
HK_API uint32_t hk_bundle_report_blobs_present(const hk_bundle_report *r);
HK_API uint32_t hk_bundle_report_links(const hk_bundle_report *r); /* snapshot entries */
HK_API uint32_t hk_bundle_report_refs(const hk_bundle_report *r);
HK_API uint64_t hk_bundle_report_bytes(const hk_bundle_report *r); /* blob bytes read or written */
HK_API void hk_bundle_report_free(hk_bundle_report *r);           /* NULL is fine */

/* ---- verification receipts ---------------------------------------------------------------- */
/* A receipt records the stat identity (size, device, inode, mtime, ctime) of each file of a kernel
 * variant that passed its metadata.json digest check, so that later loads need not read unchanged
 * files again. Receipts live beside the cache (<root>/.locks/<repo folder>/hubkern-receipts/, or
 * below HUBKERN_RECEIPTS_DIR), never inside snapshots. */

/* 0 when HUBKERN_VERIFY=always (receipts are neither read nor written: every load hashes every
 * byte), 1 otherwise. */
HK_API int hk_receipts_enabled(void);
/* Where the receipt of kernel repo repo_id, commit, variant is kept in the cache at cache_dir (NULL:
 * the default kernel cache root). The file need not exist. *out: free with hk_free. Errors:
 * HK_ERR_INVALID_ARG (a NULL, invalid or path-unsafe id, commit or variant), HK_ERR_NOMEM. */
HK_API int hk_cache_receipt_path(char **out, const char *cache_dir, const char *repo_id, const char *commit,
                                 const char *variant);
/* Delete that receipt, so that the next load or pull hashes every byte of the variant again (a
 * missing receipt is fine). Errors: as hk_cache_receipt_path; HK_ERR_IO when it cannot be deleted. */
HK_API int hk_cache_receipt_forget(const char *cache_dir, const char *repo_id, const char *commit,
                                   const char *variant);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_CACHE_H */
