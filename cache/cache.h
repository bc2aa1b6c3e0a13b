/* The on-disk store, byte-compatible with the huggingface_hub cache (see
 * ../shared/reference/hub-protocol.md §7). Internal to hubkern: used by the client (pull),
 * the mirror server (serve/publish) and the loader. */
#ifndef HK_CACHE_H
#define HK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum hk_repo_type {
    HK_REPO_MODEL = 0,
    HK_REPO_DATASET = 1,
    HK_REPO_SPACE = 2,
    HK_REPO_KERNEL = 3
} hk_repo_type;

/* "models" / "datasets" / "spaces" / "kernels" (API segment and folder prefix). */
const char *hk_repo_type_plural(hk_repo_type t);
/* "" / "datasets/" / "spaces/" / "kernels/" (resolve-URL prefix). */
const char *hk_repo_type_url_prefix(hk_repo_type t);
/* Parse "model", "dataset", "space", "kernel" (singular or plural). */
int hk_repo_type_parse(hk_repo_type *out, const char *s);

/* Validate "org/name" or "name" as the Hub accepts it (no "..", no "--" confusion, [A-Za-z0-9._-]). */
bool hk_repo_id_valid(const char *repo_id);

/* Cache root: explicit, else KERNELS_CACHE (kernels only), HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
 * HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; made absolute and
 * symlink-free when it exists. Caller frees. */
int hk_cache_root(char **out, const char *explicit_root, hk_repo_type type);

/* <root>/<type>s--org--name. Caller frees. */
char *hk_cache_repo_dir(const char *root, hk_repo_type type, const char *repo_id);

/* refs/<rev> → 40-hex commit (trimmed). HK_ERR_NOT_FOUND if absent. out gets 41+ bytes. */
int hk_cache_read_ref(char out_commit[65], const char *repo_dir, const char *rev);
/* Write refs/<rev> atomically with no trailing newline (nested dirs for "refs/pr/1"), and make sure
 * snapshots/<commit>/ exists. Never call with rev == commit. */
int hk_cache_write_ref(const char *repo_dir, const char *rev, const char *commit);

/* Create snapshots/<commit>/<path> as a relative symlink to blobs/<etag> (replacing what is there;
 * accepting a concurrent identical link). */
int hk_cache_link_snapshot(const char *repo_dir, const char *commit, const char *path, const char *etag);

/* Write CACHEDIR.TAG at the root if absent. */
int hk_cache_ensure_tag(const char *root);

#endif
