/* The public entry of cache bundles (hubkern/cache.h): options, the report and its accessors,
 * listing a bundle. The archive helpers that every part shares are in bundle_archive.c. */
#include "cache/bundle_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hk_bundle_options_init(hk_bundle_options *opts, unsigned int version) {
    HK__OPTIONS_INIT_BODY(hk_bundle_options, opts, version, HK_BUNDLE_OPTIONS_VERSION, HK_BUNDLE_OPTIONS_INIT);
}

/* Check the options and resolve the cache root of a create or extract. */
static int begin(char **root, hk_bundle_report **rep, hk_bundle_report **out, const hk_bundle_options *opts,
                 const hk_bundle_options *defaults) {
    *root = NULL;
    *rep = NULL;
    if (out) *out = NULL;
    const hk_bundle_options *o = opts ? opts : defaults;
    int rc = hk__check_options_version("hk_bundle_options", o->version, HK_BUNDLE_OPTIONS_VERSION);
    if (rc) return rc;
    if (!hk_repo_type_plural(o->repo_type))
        return hk__fail(HK_ERR_INVALID_ARG, "hk_bundle_options: unknown repo type %d", (int)o->repo_type);
    if ((rc = hk_cache_root(root, o->cache_dir, o->repo_type))) return rc;
    if (!(*rep = calloc(1, sizeof **rep))) {
        free(*root);
        *root = NULL;
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return HK_OK;
}

static int finish(int rc, char *root, hk_bundle_report *rep, hk_bundle_report **out) {
    free(root);
    if (rc == HK_OK) hk_clear_error();
    if (rc == HK_OK && out) *out = rep;
    else free(rep);
    return rc;
}

int hk_bundle_create(hk_bundle_report **out, const char *out_path, const char *const *repos, size_t n_repos,
                     const hk_bundle_options *opts) {
    hk_bundle_options defaults = HK_BUNDLE_OPTIONS_INIT;
    char *root;
    hk_bundle_report *rep;
    int rc = begin(&root, &rep, out, opts, &defaults);
    if (rc) return rc;
    rc = hk__bundle_run_create(rep, out_path, root, (opts ? opts : &defaults)->repo_type, repos, n_repos);
    return finish(rc, root, rep, out);
}

int hk_bundle_extract(hk_bundle_report **out, const char *in_path, const hk_bundle_options *opts) {
    hk_bundle_options defaults = HK_BUNDLE_OPTIONS_INIT;
    char *root;
    hk_bundle_report *rep;
    int rc = begin(&root, &rep, out, opts, &defaults);
    if (rc) return rc;
    rc = hk__bundle_run_extract(rep, in_path, root);
    return finish(rc, root, rep, out);
}

uint32_t hk_bundle_report_repos(const hk_bundle_report *r) { return r ? r->repos : 0; }
uint32_t hk_bundle_report_blobs_added(const hk_bundle_report *r) { return r ? r->blobs_added : 0; }
uint32_t hk_bundle_report_blobs_present(const hk_bundle_report *r) { return r ? r->blobs_present : 0; }
uint32_t hk_bundle_report_links(const hk_bundle_report *r) { return r ? r->links : 0; }
uint32_t hk_bundle_report_refs(const hk_bundle_report *r) { return r ? r->refs : 0; }
uint64_t hk_bundle_report_bytes(const hk_bundle_report *r) { return r ? r->bytes : 0; }
void hk_bundle_report_free(hk_bundle_report *r) { free(r); }

int hk_bundle_list(const char *in_path, hk_bundle_entry_fn fn, void *ud) {
    if (!in_path || !fn) return hk__fail(HK_ERR_INVALID_ARG, "hk_bundle_list: give a bundle path and a callback");
    struct archive *ar = NULL;
    int rc = hk__bundle_open_reader(&ar, in_path);
    while (rc == HK_OK) {
        struct archive_entry *e;
        int r = archive_read_next_header(ar, &e);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK) {
            rc = hk__fail(HK_ERR_PARSE, "bundle %s is corrupt: %s", in_path, archive_error_string(ar));
            break;
        }
        mode_t t = archive_entry_filetype(e);
        char kind = t == AE_IFREG ? 'f' : t == AE_IFDIR ? 'd' : t == AE_IFLNK ? 'l' : '?';
        fn(ud, archive_entry_pathname(e), kind, (uint64_t)archive_entry_size(e), archive_entry_symlink(e));
    }
    if (ar) archive_read_free(ar);
    return rc;
}
