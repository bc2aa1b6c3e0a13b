/* The Hub client handle (hub_handle.c) and what its parts share: repo-id and commit checks,
 * resolution of a version / revision (refs.c), kernel-status.toml (status_toml.c), redirects
 * (redirect.c). Internal. */
#ifndef HK_CLIENT_HUB_INTERNAL_H
#define HK_CLIENT_HUB_INTERNAL_H

#include "hubkern/hub.h"
#include "internal.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

/* Default freshness window (HUBKERN_FRESHNESS_S, hk_hub_options.freshness_s): long enough for a
 * program's start-up to load its kernels with one round of requests, short enough that a moved
 * branch is seen within a minute. */
#define HK_FRESHNESS_DEFAULT_MS 60000L

/* Default HUBKERN_STALL_TIMEOUT: a blob's download that gets less than 64 KiB in this long fails
 * (downloads had no default deadline at all; a drip-fed body kept a pull going for good). */
#define HK_STALL_TIMEOUT_DEFAULT_MS 30000L

/* Largest API answer read into memory (one tree page, refs, revision). */
#define HK_API_MAX (64u << 20)

struct hk_hub {
    char *endpoint;       /* no trailing '/' */
    char *token;          /* NULL: none. Never logged. */
    char *newer_warned;   /* "repo_id vN" last warned about: the newer-version warning once per handle */
    char *token_source;   /* where token came from (hk_hub_token_source); NULL with no token */
    char *cache_root;     /* absolute */
    bool offline;
    bool read_only;       /* hk_hub_set_read_only: nothing is written into the cache (no memo files,
                             no .no_exist markers, no fetched files; pulls refused) */
    char *user_agent;     /* NULL: send none */
    int max_parallel;
    long etag_timeout_ms;
    long download_timeout_ms;
    long request_timeout_ms; /* whole API request incl. retries and body; 0: none */
    long pull_timeout_ms;    /* whole hk_hub_pull; 0: none */
    long stall_timeout_ms;   /* a downloading blob gets HK_XFER_PROGRESS_STEP bytes within this, or fails; 0: off */
    uint64_t pull_deadline_at; /* hk__now_ms() value the running pull must end by; 0: none */
    int max_retries;
    long retry_base_ms;   /* HUBKERN_RETRY_BASE_MS, default 1000: scales every back-off delay */
    uint64_t max_listing_entries; /* bound of one listing over all its pages */
    uint64_t max_listing_bytes;
    hk_progress_fn progress;
    void *progress_ud;
    CURL *api;            /* reused for API requests (keeps the connection alive) */
    uint64_t requests;    /* HTTP requests sent by this handle (API + files) */
    long freshness_ms;    /* window of branch/version/trust answers (client/memo.h); 0: off */
    hk_share *share;      /* where those answers are kept (not owned): the options', else the default */
    char token_tag[17];   /* names the token in memo keys without holding it */
    struct hk_sig_config *sig; /* signatures: trust root, policies (client/signature.h) */
};

/* 40 or 64 lowercase hex characters. */
/* HK_ERR_INVALID_ARG unless repo_id is "org/name" as the Hub accepts it. */
int hk__client_check_repo_id(const char *repo_id);
/* Takes the implicit libcurl initialisation when the program has not called hk_init (init.c). */
int hk__client_global_init(void);

/* refs.c ------------------------------------------------------------------------------------ */
/* Repo folder holding refs for repo_id: kernels--, else the legacy models-- one if it has
 * refs/<rev>. Caller frees. */
char *hk__client_local_repo_dir(const hk_hub *hub, const char *repo_id, const char *rev);
/* Resolve a version (>= 0) or a revision to a commit (40/64 hex + NUL into out_commit). */
int hk__client_resolve_commit(char out_commit[65], hk_hub *hub, const char *repo_id, int version,
                             const char *revision);

/* trust.c ----------------------------------------------------------------------------------- */
/* Is org's "trusted" answer from hub's endpoint within the freshness window (this process, or the
 * memo file in the cache)? */
bool hk__client_trust_known(const hk_hub *hub, const char *org);
/* Record a "trusted" answer of hub's endpoint for org (in process and on disk). */
void hk__client_trust_remember(const hk_hub *hub, const char *org);

/* status_toml.c ----------------------------------------------------------------------------- */
/* Read kernel-status.toml of repo_id at commit: *out_dest / *out_rev set (allocated) when the repo
 * redirects; both NULL when it has none (its absence is remembered under .no_exist/ like Python). */
int hk__client_check_status(char **out_dest, char **out_rev, hk_hub *hub, const char *repo_id, const char *commit);

/* redirect.c -------------------------------------------------------------------------------- */
/* Where a pull spec leads: the one resolution of a request, handed on to the pull (and by
 * hk_get_kernel to its dependency tree) so that nothing resolves it again. */
typedef struct hk__target {
    char *repo;      /* the repo the redirect chain ends at (spec->repo_id when nothing redirects) */
    char *revision;  /* the revision resolved there: "vN", the spec's revision or the last redirect's */
    char commit[65];
    int signature;   /* the signature mode in force there: the spec's, else the strictest default
                        of every repo on the way (hk__sig_request_mode); never HK_SIGNATURE_DEFAULT */
} hk__target;
/* Resolve spec's version/revision and, online, follow kernel-status.toml redirects, checking the
 * publisher of every repo on the way unless spec->trust_remote_code. floor: a signature mode
 * already in force for this request (a dependent's; 0: none). Offline nothing is followed (the
 * cache keeps no kernel-status.toml). *out is freed with hk__target_free, also on failure. */
int hk__client_resolve_target(hk__target *out, hk_hub *hub, const hk_pull_spec *spec, int floor);
void hk__target_free(hk__target *t);
/* hk__sig_request_mode with hub's signature configuration: the mode in force for repo_id within
 * a request (a dependency of a node under `floor`, say). */
int hk__client_request_signature(const hk_hub *hub, int requested, int floor, const char *repo_id);

/* pull.c ------------------------------------------------------------------------------------ */
/* hk_hub_pull of a resolved target: spec gives what to pull there (variant, all_variants, backend,
 * families, env), t where (repo, revision, commit) and the signature mode. */
int hk__client_pull_target(hk_pull_result **out, hk_hub *hub, const hk_pull_spec *spec, const hk__target *t);

#endif
