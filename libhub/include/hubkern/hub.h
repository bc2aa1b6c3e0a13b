/* hubkern — Hub client: resolve a kernel version, choose its build variant and pull exactly that
 * variant into the huggingface_hub-compatible cache, verifying every byte.
 *
 * Typical use (this is what hk_get_kernel does before loading):
 *
 *     hk_hub_options o;
 *     hk_hub_options_init(&o);                // endpoint/token/cache/offline from the environment
 *     hk_hub *hub;
 *     if (hk_hub_new(&hub, &o)) die(hk_last_error());
 *     hk_pull_spec s;
 *     hk_pull_spec_init(&s);
 *     s.repo_id = "kernels-community/relu";
 *     s.version = 1;                          // or s.revision = "main" / a tag / a 40-hex commit
 *     char *dir, *commit, *variant;
 *     if (hk_hub_fetch_variant(&dir, &commit, &variant, hub, &s)) die(hk_last_error());
 *     // dir = <cache>/kernels--kernels-community--relu/snapshots/<commit>/build/<variant>
 *     hk_free(dir); hk_free(commit); hk_free(variant);
 *     hk_hub_free(hub);
 *
 * Network rules (see docs/pull-and-cache.md): the token is sent only to the endpoint's own origin
 * (scheme, host and port), never after a redirect to another host, and never logged. Everything
 * after resolution uses the commit id. Offline (option or HF_HUB_OFFLINE) makes no network call.
 * A hk_hub handle may be used from one thread at a time; distinct handles are independent. */
#ifndef HUBKERN_HUB_H
#define HUBKERN_HUB_H

#include "hubkern/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_hub hk_hub;

typedef struct hk_hub_options {
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
} hk_hub_options;

/* Fill with defaults (everything NULL/0, offline = -1, max_retries = -1). */
HK_API void hk_hub_options_init(hk_hub_options *opts);

/* Create a client. opts may be NULL (all defaults). Strings are copied. */
HK_API int hk_hub_new(hk_hub **out, const hk_hub_options *opts);
HK_API void hk_hub_free(hk_hub *hub);

/* The effective endpoint and cache root of a client (valid while the handle lives). */
HK_API const char *hk_hub_endpoint(const hk_hub *hub);
HK_API const char *hk_hub_cache_root(const hk_hub *hub);
/* Whether the client is offline (option or environment). */
HK_API int hk_hub_is_offline(const hk_hub *hub);

/* What to pull. Exactly one of version (>= 0) or revision must be given. */
typedef struct hk_pull_spec {
    const char *repo_id;       /* "org/name" of a kernel repo */
    int version;               /* major version N (branch vN); -1 (default): use revision */
    const char *revision;      /* branch, tag or commit; NULL (default): use version */
    const char *variant;       /* NULL: chosen for this machine; else this exact build variant */
    int all_variants;          /* 1: pull every variant under build/ */
    int trust_remote_code;     /* 1: skip the publisher trust check (trustedKernelPublisher) */
    const char *backend;       /* NULL: detected; else force "cpu", "cuda", ... for variant choice */
    unsigned variant_families; /* bit mask of HK_FAMILY_BIT(...) (hubkern/variant.h) the caller can
                                  load, for the choice when variant is NULL; 0 (default): any */
} hk_pull_spec;

HK_API void hk_pull_spec_init(hk_pull_spec *spec);

/* Resolve a version or revision to a commit id (40 hex) without downloading anything.
 * Online: refs API (version N -> branch vN; warns when a newer major exists). Offline: refs/<rev>
 * in the cache. out_commit receives 40 (or 64) hex chars + NUL. */
HK_API int hk_hub_resolve(char out_commit[65], hk_hub *hub, const char *repo_id, int version,
                          const char *revision);

/* Where a pull spec leads, without listing or downloading anything: resolve spec->version or
 * spec->revision to a commit and, online, follow kernel-status.toml redirects (kind = "redirect",
 * destination, revision; at most 5 hops) exactly as hk_hub_pull does, checking the publisher of
 * every repo on the way unless spec->trust_remote_code. *out_repo: the repo the chain ends at
 * (spec->repo_id when nothing redirects); *out_revision: the revision resolved there ("vN", the
 * spec's revision, or the last redirect's revision). Both newly allocated: free with hk_free.
 * Offline: the cache keeps no kernel-status.toml, so nothing is followed. Loaders choose the
 * variant at (*out_repo, out_commit), then pull that repo with spec.variant set. */
HK_API int hk_hub_resolve_spec(char **out_repo, char **out_revision, char out_commit[65], hk_hub *hub,
                               const hk_pull_spec *spec);

/* Versions (vN branches) of a repo, sorted ascending. Offline: from refs/vN in the cache. */
typedef struct hk_hub_version {
    int version;
    char commit[65];
} hk_hub_version;
/* *out is an array of *out_n entries; free with hk_free. */
HK_API int hk_hub_list_versions(hk_hub_version **out, size_t *out_n, hk_hub *hub, const char *repo_id);

/* Build variants (directory names under build/) at a commit; offline: from the snapshot.
 * *out is a NULL-terminated array; free with hk_hub_strv_free. */
HK_API int hk_hub_list_variants(char ***out, size_t *out_n, hk_hub *hub, const char *repo_id,
                                const char *commit);
HK_API void hk_hub_strv_free(char **v);

/* Publisher trust (GET /api/organizations/<org>/overview): *out_trusted = 1 when
 * trustedKernelPublisher is true. A 404 (user namespace) gives 0 and HK_OK. */
HK_API int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org);

/* ---- pull --------------------------------------------------------------------------------- */
typedef struct hk_pull_result hk_pull_result;

/* Resolve, choose the variant(s), download everything under build/<variant>/ (no *.pyc, no __pycache__) in
 * parallel, verify sizes, content hashes and the metadata.json digest, write refs/vN (or
 * refs/<branch>). Offline: resolve from refs and snapshots only and verify the digest there. */
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
HK_API size_t hk_pull_result_files_downloaded(const hk_pull_result *r);
HK_API uint64_t hk_pull_result_bytes_downloaded(const hk_pull_result *r);
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
