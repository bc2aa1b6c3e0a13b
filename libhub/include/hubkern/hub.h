/* hubkern — Hub client: resolve a kernel version, choose its build variant and pull exactly that
 * variant into the huggingface_hub-compatible cache, verifying every byte.
 *
 * Typical use (this is what hk_get_kernel does before loading):
 *
 *     hk_init();                              // once per program (hubkern/common.h)
 *     hk_hub_options o = HK_HUB_OPTIONS_INIT; // or hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION)
 *     hk_hub *hub;                            // endpoint/token/cache/offline from the environment
 *     if (hk_hub_new(&hub, &o)) die(hk_last_error());
 *     hk_pull_spec s = HK_PULL_SPEC_INIT;
 *     s.repo_id = "kernels-community/relu";
 *     s.kernel_version = 1;                   // or s.revision = "main" / a tag / a 40-hex commit
 *     char *dir, *commit, *variant;
 *     if (hk_hub_fetch_variant(&dir, &commit, &variant, hub, &s)) die(hk_last_error());
 *     // dir = <cache>/kernels--kernels-community--relu/snapshots/<commit>/build/<variant>
 *     hk_free(dir); hk_free(commit); hk_free(variant);
 *     hk_hub_free(hub);
 *     hk_shutdown();
 *
 * Network rules (see docs/pull-and-cache.md): the token is sent only to the endpoint's own origin
 * (scheme, host and port), never after a redirect to another host, and never logged. Everything
 * after resolution uses the commit id. Offline (option or HF_HUB_OFFLINE) makes no network call.
 * A hk_hub handle may be used from one thread at a time; distinct handles are independent.
 *
 * ABI: hk_hub_options and hk_pull_spec start with `unsigned int version` (set by their _INIT macro
 * or _init function); every function taking one checks it (HK_ERR_INVALID_ARG for a version this
 * library does not know). New fields are only ever appended, with a new _VERSION. */
#ifndef HUBKERN_HUB_H
#define HUBKERN_HUB_H

#include "hubkern/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_hub hk_hub;
struct hk_env; /* hubkern/env.h */
struct hk_signature_policies; /* hubkern/signature.h */

/* Answers a set of clients share, as a CURLSH is shared by curl handles: what a client learned
 * about branches, tags, versions and publisher trust (reused for its freshness window) and about
 * commits (their listings, reused for good). Every client uses one: the one in
 * hk_hub_options.share, else the process's default share, so that by default repeated calls in
 * one process (each hk_get_kernel makes a client unless given one) ask the Hub once per window. A
 * share of its own isolates a set of clients from the rest of the process (a tenant, a test).
 * Keys include the endpoint and (a hash of) the token, so clients of other mirrors or other tokens
 * never see each other's answers in one share. Thread-safe; free it after every client using it
 * (hk_shutdown empties the default one). */
typedef struct hk_share hk_share;
HK_API int hk_share_new(hk_share **out);
HK_API void hk_share_free(hk_share *share); /* NULL-safe */

#define HK_HUB_OPTIONS_VERSION 4 /* 2: request_timeout_s, pull_timeout_s, the signature fields; 3: freshness_s; 4: share */

typedef struct hk_hub_options {
    unsigned int version;   /* HK_HUB_OPTIONS_VERSION */
    const char *endpoint;   /* NULL: HF_ENDPOINT, else https://huggingface.co (trailing '/' removed) */
    const char *token;      /* NULL: HF_TOKEN, HUGGING_FACE_HUB_TOKEN, then $HF_TOKEN_PATH or
                               $HF_HOME/token (unless HF_HUB_DISABLE_IMPLICIT_TOKEN); "": no token */
    const char *cache_dir;  /* NULL: KERNELS_CACHE, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, ... */
    int offline;            /* -1 (default): HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE; 0: online; 1: offline */
    const char *user_agent; /* NULL: "hubkern/<ver>; ..." (empty when telemetry is disabled); "": none */
    int max_parallel;       /* concurrent file transfers; 0: 8 */
    double etag_timeout_s;  /* API/metadata requests; 0: HF_HUB_ETAG_TIMEOUT, else 10 s (env wins) */
    double download_timeout_s; /* connect and stall limit of a download; 0: HF_HUB_DOWNLOAD_TIMEOUT, else 10 s */
    int max_retries;        /* per request; -1 (default): 5 (back-off 1,2,4,8,8 s x HUBKERN_RETRY_BASE_MS/1000) */
    hk_progress_fn progress; /* optional; called on the calling thread; non-zero return cancels */
    void *progress_userdata;
    /* Bounds of one tree listing over all its pages (a mirror cannot make the client hold more):
     * 0: HUBKERN_MAX_LISTING_ENTRIES / HUBKERN_MAX_LISTING_BYTES, else 1,000,000 entries and 256 MiB
     * of JSON. Past either: HK_ERR_PROTOCOL naming the bound. */
    uint64_t max_listing_entries;
    uint64_t max_listing_bytes;
    /* ---- version 2 ---- */
    /* Overall deadline of one API request (refs, listings, trust, ...: every retry, redirect and
     * byte of its answer), in seconds: > 0: this; 0: HUBKERN_REQUEST_TIMEOUT, else 300 s; < 0 (or
     * the variable set to 0): none. Past it: HK_ERR_TIMEOUT naming the deadline. The connect and
     * stall limits (etag_timeout_s, download_timeout_s) apply as well. */
    double request_timeout_s;
    /* Overall deadline of one hk_hub_pull / hk_hub_fetch_variant (every request, download, retry
     * and lock wait of it), in seconds: > 0: this; 0: HUBKERN_PULL_TIMEOUT, else none; < 0 (or the
     * variable set to 0): none. Past it: HK_ERR_TIMEOUT naming the deadline; a partial download is
     * kept and resumed by the next pull. */
    double pull_timeout_s;
    /* Signatures (hubkern/signature.h): the trusted_root.json (NULL: HUBKERN_SIGSTORE_TRUST_ROOT,
     * installed, shipped), a policy file (NULL: HUBKERN_SIGNATURE_POLICIES, if set) and policies
     * (NULL: none; copied), each in addition to kernels' built-in default policy. */
    const char *sigstore_trust_root;
    const char *signature_policy_file;
    const struct hk_signature_policies *signature_policies;
    /* ---- version 3 ---- */
    /* Freshness window, in seconds: for this long after the endpoint answered which commit a
     * branch, tag or version is at (and that a publisher is trusted), this process uses that answer
     * without asking again, so that a repeat hk_get_kernel of a loaded kernel sends no request.
     * > 0: this; 0: HUBKERN_FRESHNESS_S, else 60 s; < 0 (or the variable set to 0): off (within
     * one call each question is still asked once). Answers about a commit never change and are
     * reused whatever the window's length (with it off, within one call only). A positive trust
     * answer is also kept on disk for the window (other processes on the cache use it); a branch
     * is asked again by every new process (docs/pull-and-cache.md, "Request economy"). */
    double freshness_s;
    /* ---- version 4 ---- */
    hk_share *share;        /* the answers this client shares (hk_share above); NULL: the process's default */
} hk_hub_options;

#define HK_HUB_OPTIONS_INIT {HK_HUB_OPTIONS_VERSION, NULL, NULL, NULL, -1, NULL, 0, 0, 0, -1, NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL, 0, NULL}

/* Fill with defaults (everything NULL/0, offline = -1, max_retries = -1) and set opts->version.
 * HK_ERR_INVALID_ARG for a version this library does not know. */
HK_API int hk_hub_options_init(hk_hub_options *opts, unsigned int version);

/* Create a client. opts may be NULL (all defaults). Strings are copied. Initialises libcurl
 * through hk_init() semantics when the program has not called hk_init() (see hubkern/common.h). */
HK_API int hk_hub_new(hk_hub **out, const hk_hub_options *opts);
HK_API void hk_hub_free(hk_hub *hub);

/* The effective endpoint and cache root of a client (valid while the handle lives). */
HK_API const char *hk_hub_endpoint(const hk_hub *hub);
HK_API const char *hk_hub_cache_root(const hk_hub *hub);
/* Whether the client is offline (option or environment). */
HK_API int hk_hub_is_offline(const hk_hub *hub);
/* on = 1: the client writes nothing into its cache, for tools that only ask (`hubkern info`): the
 * trust answer and a commit's absent kernel-status.toml are not remembered on disk, a metadata.json
 * that hk_kernel_tree_resolve reads is fetched into memory and not kept (its signature is then the
 * pull's and the load's check), and hk_hub_pull (and so hk_get_kernel) fails with
 * HK_ERR_INVALID_ARG. on = 0: the default. HK_ERR_INVALID_ARG for a NULL hub. */
HK_API int hk_hub_set_read_only(hk_hub *hub, int on);
/* Where the client's token came from, never the token itself: "option" (hk_hub_options.token),
 * "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", or the path of the token file read; NULL when the client
 * has no token. Valid while the handle lives. */
HK_API const char *hk_hub_token_source(const hk_hub *hub);

/* What to pull. Exactly one of kernel_version (>= 0) or revision must be given. */
#define HK_PULL_SPEC_VERSION 3 /* 2: force_download; 3: include, exclude, dry_run */

typedef struct hk_pull_spec {
    unsigned int version;      /* HK_PULL_SPEC_VERSION (the struct's version, not the kernel's) */
    const char *repo_id;       /* "org/name" of a kernel repo */
    int kernel_version;        /* major version N (branch vN); -1 (default): use revision */
    const char *revision;      /* branch, tag or commit; NULL (default): use kernel_version */
    const char *variant;       /* NULL: chosen for this machine; else this exact build variant */
    int all_variants;          /* 1: pull every variant under build/ */
    int trust_remote_code;     /* 1: skip the publisher trust check (trustedKernelPublisher) */
    const char *backend;       /* NULL: detected; else force "cpu", "cuda", ... for variant choice */
    unsigned variant_families; /* bit mask of HK_FAMILY_BIT(...) (hubkern/variant.h) the caller can
                                  load, for the choice when variant is NULL; 0 (default): any */
    const struct hk_env *env;  /* the machine to choose for (hubkern/env.h); NULL (default): this
                                  process's detected machine, detected once and cached */
    int signature;             /* HK_SIGNATURE_DEFAULT / _REQUIRE / _WARN / _OFF (hubkern/signature.h):
                                  the metadata.json.sigstore check of each pulled or cached variant */
    /* ---- version 2 ---- */
    int force_download;        /* 1: fetch every file of the variant(s) again even when cached and
                                  intact (huggingface_hub's force_download): each blob from byte 0
                                  into a temp file renamed over the cached one, so that no partial
                                  file is ever visible; kept partial downloads are not resumed */
    /* ---- version 3 ---- */
    /* Globs on repo paths ("build/<variant>/..."), as huggingface_hub's allow_patterns /
     * ignore_patterns (fnmatch: '*' also matches '/'; a pattern ending in '/' selects what is
     * under it), NULL-terminated; NULL: every file. They choose among the files of the chosen
     * variant(s) only: a file is pulled when it matches one of include (if given) and none of
     * exclude. A variant none of whose files is chosen is left out of the result (nothing of it
     * fetched); of every other one, metadata.json and metadata.json.sigstore are always pulled
     * and the signature checked, whatever the patterns say, and each chosen file is checked
     * against the metadata.json digest (the files left out are not missing). Such a variant is
     * published file by file; it is complete in the snapshot only when every file was chosen
     * (a later pull without patterns completes it; offline it is HK_ERR_OFFLINE, incomplete).
     * Offline, the patterns choose among the files the cached metadata.json digest lists: the
     * pull succeeds when each chosen one is cached (and matches the digest), else HK_ERR_OFFLINE
     * naming a missing one. */
    const char *const *include;
    const char *const *exclude;
    int dry_run;               /* 1: resolve, list and choose only: the result lists each file that
                                  would be pulled with its size and whether it is cached intact
                                  (hk_pull_result_file_size / _file_cached); nothing is downloaded
                                  or written into the cache, signatures are not checked; works
                                  with a read-only client (hk_hub_set_read_only) */
} hk_pull_spec;

#define HK_PULL_SPEC_INIT {HK_PULL_SPEC_VERSION, NULL, -1, NULL, NULL, 0, 0, NULL, 0u, NULL, 0, 0, NULL, NULL, 0}

/* Defaults (kernel_version = -1, everything else NULL/0) and spec->version set; HK_ERR_INVALID_ARG
 * for a version this library does not know. */
HK_API int hk_pull_spec_init(hk_pull_spec *spec, unsigned int version);

/* Resolve a version or revision to a commit id (40 hex) without downloading anything.
 * Online: refs API (version N -> branch vN; warns when a newer major exists). Offline: refs/<rev>
 * in the cache. *out_commit: the commit id (40 or 64 hex chars), newly allocated: free with hk_free. */
HK_API int hk_hub_resolve(char **out_commit, hk_hub *hub, const char *repo_id, int version,
                          const char *revision);

/* Where a pull spec leads, without listing or downloading anything: resolve spec->kernel_version or
 * spec->revision to a commit and, online, follow kernel-status.toml redirects (kind = "redirect",
 * destination, revision; at most 5 hops) exactly as hk_hub_pull does, checking the publisher of
 * every repo on the way unless spec->trust_remote_code. *out_repo: the repo the chain ends at
 * (spec->repo_id when nothing redirects); *out_revision: the revision resolved there ("vN", the
 * spec's revision, or the last redirect's revision); *out_commit: the commit there. All three newly
 * allocated: free with hk_free. Offline: the cache keeps no kernel-status.toml, so nothing is
 * followed. Loaders choose the variant at (*out_repo, *out_commit), then pull that repo with
 * spec.variant set. */
HK_API int hk_hub_resolve_spec(char **out_repo, char **out_revision, char **out_commit, hk_hub *hub,
                               const hk_pull_spec *spec);

/* Versions (vN branches) of a repo, sorted ascending. Offline: from refs/vN in the cache.
 * *out: a list read with the accessors below; free with hk_hub_version_list_free. */
typedef struct hk_hub_version_list hk_hub_version_list;
HK_API int hk_hub_list_versions(hk_hub_version_list **out, hk_hub *hub, const char *repo_id);
HK_API size_t hk_hub_version_list_count(const hk_hub_version_list *list);
/* The major version N of entry i (branch vN); -1 when i is out of range. */
HK_API int hk_hub_version_list_number(const hk_hub_version_list *list, size_t i);
/* The commit of entry i (40 or 64 hex; valid until the list is freed); NULL when out of range. */
HK_API const char *hk_hub_version_list_commit(const hk_hub_version_list *list, size_t i);
HK_API void hk_hub_version_list_free(hk_hub_version_list *list);

/* Build variants (directory names under build/) at a commit; offline: from the snapshot.
 * *out is a NULL-terminated array; free with hk_hub_strv_free. */
HK_API int hk_hub_list_variants(char ***out, size_t *out_n, hk_hub *hub, const char *repo_id,
                                const char *commit);
HK_API void hk_hub_strv_free(char **v);

/* Publisher trust (GET /api/organizations/<org>/overview): *out_trusted = 1 when
 * trustedKernelPublisher is true. A 404 (user namespace) gives 0 and HK_OK. */
HK_API int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org);

/* Benchmark submissions that a hubkern mirror keeps for a kernel repo (GET
 * /api/kernels/<repo_id>/benchmarks; what `kernels benchmark --upload` posted, see docs/serve.md):
 * *out_json is the page as the mirror answers it, a JSON array of records newest first; at most
 * `limit` of them (0: the mirror's default, 100), older than `cursor` (NULL: from the newest).
 * *out_next_cursor (may be NULL) gets the cursor of the next page, or NULL on the last one. Both
 * allocated: free with hk_free. A repo id that is not org/name is HK_ERR_INVALID_ARG; offline,
 * HK_ERR_OFFLINE; an unknown repo, HK_ERR_REPO_NOT_FOUND. */
HK_API int hk_hub_list_benchmarks(char **out_json, char **out_next_cursor, hk_hub *hub, const char *repo_id,
                                  unsigned limit, const char *cursor);

/* ---- pull --------------------------------------------------------------------------------- */
typedef struct hk_pull_result hk_pull_result;

/* Resolve, choose the variant(s), download everything under build/<variant>/ (no *.pyc, no __pycache__) in
 * parallel, verify sizes, content hashes and the metadata.json digest, write refs/vN (or
 * refs/<branch>). A cached blob whose bytes no longer match its name (a flipped byte, a truncated
 * copy) is downloaded again and renamed over the bad one, so a pull repairs what it reuses.
 * Offline: resolve from refs and snapshots only and verify the digest there: a variant with files
 * missing (an interrupted pull) is HK_ERR_OFFLINE ("incomplete: pull it online"), one whose bytes
 * do not match is HK_ERR_DIGEST naming the file (`hubkern cache verify --repair`, or pull online). */
HK_API int hk_hub_pull(hk_pull_result **out, hk_hub *hub, const hk_pull_spec *spec);

/* THE ENTRY POINT FOR LOADERS: pull (or find offline) and return, newly allocated (free each with
 * hk_free): the local variant directory (snapshots/<commit>/build/<variant>, whose files are
 * symlinks into blobs/), the commit id and the variant name. With all_variants set, the first
 * variant chosen for this machine is returned. */
HK_API int hk_hub_fetch_variant(char **out_variant_dir, char **out_commit, char **out_variant,
                                hk_hub *hub, const hk_pull_spec *spec);

/* Accessors (strings valid until hk_pull_result_free). */
HK_API const char *hk_pull_result_repo(const hk_pull_result *r);      /* after kernel-status redirects */
HK_API const char *hk_pull_result_revision(const hk_pull_result *r);  /* "v1", a branch, or the commit */
HK_API const char *hk_pull_result_commit(const hk_pull_result *r);
HK_API const char *hk_pull_result_snapshot(const hk_pull_result *r);  /* .../snapshots/<commit> */
HK_API size_t hk_pull_result_variant_count(const hk_pull_result *r);
HK_API const char *hk_pull_result_variant(const hk_pull_result *r, size_t i);
HK_API const char *hk_pull_result_variant_path(const hk_pull_result *r, size_t i);
HK_API size_t hk_pull_result_file_count(const hk_pull_result *r);    /* files in the pulled variant(s) */
HK_API const char *hk_pull_result_file(const hk_pull_result *r, size_t i); /* path in the repo */
/* File i's size in bytes, and its blob id (huggingface_hub's etag: the LFS sha256, else the git
 * blob sha1; valid until the result is freed); 0 / NULL when out of range. */
HK_API uint64_t hk_pull_result_file_size(const hk_pull_result *r, size_t i);
HK_API const char *hk_pull_result_file_blob(const hk_pull_result *r, size_t i);
/* 1 when file i was in the cache and intact before this pull (nothing transferred for it; with
 * dry_run: nothing would be), else 0. */
HK_API int hk_pull_result_file_cached(const hk_pull_result *r, size_t i);
HK_API size_t hk_pull_result_files_downloaded(const hk_pull_result *r);
/* Bytes transferred by this pull; the prefixes of partial downloads an earlier, interrupted pull
 * kept (blobs/<etag>.incomplete) and this one resumed are not counted: they are ..._bytes_resumed. */
HK_API uint64_t hk_pull_result_bytes_downloaded(const hk_pull_result *r);
HK_API uint64_t hk_pull_result_bytes_resumed(const hk_pull_result *r);
HK_API uint64_t hk_pull_result_bytes_verified(const hk_pull_result *r); /* hashed against etag/digest */
/* Bytes of cached files not read again: the variant's verification receipt showed each one unchanged
 * (same st_dev, st_ino, size, mtime and ctime) since it was hashed against this metadata.json digest.
 * HUBKERN_VERIFY=always makes this 0 (every byte hashed). */
HK_API uint64_t hk_pull_result_bytes_trusted(const hk_pull_result *r);
HK_API int hk_pull_result_offline(const hk_pull_result *r);          /* resolved from the cache only */
HK_API void hk_pull_result_free(hk_pull_result *r);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_HUB_H */
