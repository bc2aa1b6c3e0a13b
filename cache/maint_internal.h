/* Private to the cache maintenance files (walk.c, ls.c, verify.c, strays.c, remove.c, prune.c, rm.c,
 * maint.c): the report, the repo and tree walks they share, and the removal context of prune and rm.
 * Not used outside cache/. */
#ifndef HK_CACHE_MAINT_INTERNAL_H
#define HK_CACHE_MAINT_INTERNAL_H

#include "cache/cache_internal.h"
#include "util/walk.h"
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct hk_cache_report {
    size_t repos, snapshots, blobs, refs;
    uint64_t bytes;  /* blob bytes on disk */
    size_t problems; /* verify: mismatches, broken links, bad refs, stray entries */
    size_t removed;  /* prune/rm: entries removed */
    uint64_t removed_bytes;
};

/* The runs behind the public calls (maint.c checks the options and resolves the root first). */
int hk__cache_run_ls(hk_cache_report *rep, const char *root, const hk_cache_options *o);
int hk__cache_run_verify(hk_cache_report *rep, const char *root, const hk_cache_options *o);
int hk__cache_run_prune(hk_cache_report *rep, const char *root, const hk_cache_options *o);
int hk__cache_run_rm(hk_cache_report *rep, const char *root, const hk_cache_options *o);

/* ---- reporting (walk.c) ----------------------------------------------------------------------- */
/* One formatted line to fn (nothing when fn is NULL): ls's rows. */
void hk__cache_emit(hk_cache_line_fn fn, void *ud, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Where a run's findings go: the options' line_fn (as lines) and finding_fn (as fields). */
typedef struct hk_cache_sink {
    hk_cache_line_fn line_fn;
    void *line_ud;
    hk_cache_finding_fn finding_fn;
    void *finding_ud;
} hk_cache_sink;
static inline hk_cache_sink hk__cache_sink_of(const hk_cache_options *o) {
    hk_cache_sink s = {o->line_fn, o->line_userdata, o->finding_fn, o->finding_userdata};
    return s;
}
/* One finding about repo (its label "kernel/org/name", or NULL) and the entry dir/rel (relative to
 * the repo folder; rel NULL: dir alone; dir NULL: no entry), the message formatted from fmt. Its
 * line is "<lead><repo>: <message>", lead by kind ("PROBLEM: ", "note: ", "removed ", "would
 * remove ", "cannot remove ") unless given. */
void hk__cache_finding(const hk_cache_sink *s, hk_cache_finding_kind kind, const char *lead, const char *repo,
                       const char *dir, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* ---- shared walking (walk.c) ------------------------------------------------------------------ */

/* The repo folders of a cache root (sorted by name), optionally only those of repo_id. */
typedef struct hk_cache_repos {
    char **dirs;
    char **ids;
    hk_repo_type *types;
    size_t n;
} hk_cache_repos;
/* A missing root is an empty list; HK_ERR_IO when it cannot be read. */
int hk__cache_list_repos(hk_cache_repos *out, const char *root, const char *repo_id);
void hk__cache_repos_free(hk_cache_repos *r);

/* Visit every entry below dir (util/walk.h: depth-first, no symlink following; rel is relative to
 * dir); directories before their entries, or after them with post_dirs. st holds only the entry's
 * file type (HK_WALK_TYPE_ONLY): a visitor that needs more stats the path. Stops at the first
 * non-HK_OK and returns it. A dir that is not there has nothing to visit (HK_OK); one that cannot be
 * read is an error. */
typedef int (*hk_cache_visit_fn)(void *ud, const char *path, const char *rel, const struct stat *st);
int hk__cache_walk(const char *dir, hk_cache_visit_fn fn, void *ud, bool post_dirs);
/* The same walk with util/walk.h's callback (the entry's folder descriptor, for *at() calls, and
 * its post-order call), flags HK_WALK_*. */
int hk__cache_walk_entries(const char *dir, hk_walk_fn fn, void *ud, unsigned flags);

/* Bytes of the blobs directly in dir (regular files without a '.' in their name: not temp files). */
uint64_t hk__cache_dir_bytes(const char *dir);
/* "kernels--org--name" of ".../kernels--org--name". */
const char *hk__cache_folder_of(const char *repo_dir);
/* "kernels--org--name" -> *type and "org/name" (*repo_id: caller frees); false for another name. */
bool hk__cache_parse_folder(const char *name, hk_repo_type *type, char **repo_id);
/* Does some ref of the repo name this commit? */
bool hk__cache_commit_referenced(const char *repo_dir, const char *commit);

/* ---- snapshot entries a variant's digest does not account for (strays.c) -------------------- */
/* Visits one bad entry of build/<variant>/: rel is relative to the variant directory; is_dir says
 * it is a directory standing where the digest lists a file (everything under it is bad too). */
typedef void (*hk_stray_fn)(void *ud, const char *path, const char *rel, bool is_dir);
/* Visit the entries of the variant directory vdir that its metadata.json digest does not list:
 * files and links (never followed) not in digest.files, and directories where digest.files names a
 * file (not entered). Other directories are entered (32 levels, as the digest walk); one emptied by
 * prune goes in its empty-directory pass. Entries the digest skips (__pycache__, *.pyc, the
 * top-level metadata.json[.sigstore]) and "*.tmp" leftovers (prune's own pass) are not visited.
 * Returns the number visited; 0 when metadata.json is absent, unreadable or carries no digest. */
size_t hk__cache_variant_strays(const char *vdir, hk_stray_fn fn, void *ud);

/* ---- removal context of prune and rm (remove.c) ---------------------------------------------- */
typedef struct hk_prune_ctx {
    hk_cache_report *rep;
    const char *root;
    const char *repo_dir;
    const char *label;
    bool dry_run;
    const hk_cache_sink *sink;
    char **used; /* blob names some snapshot link points to */
    size_t nused, capused;
    char **gone; /* stray snapshot entries this run removes (or, dry, would): their links use nothing */
    size_t ngone, capgone;
} hk_prune_ctx;

/* Report "removed <label>: <what>" (or "would remove"; its entry: path relative to the repo
 * folder, when inside it) and, unless a dry run, delete path. */
void hk__cache_remove_path(hk_prune_ctx *c, const char *path, const char *what, uint64_t bytes);
/* hk__cache_walk visitor over snapshots/: removes broken links, records the blob each link names
 * (links in or under c->gone excepted). HK_ERR_NOMEM stops it: no blob may then be deleted. */
int hk__cache_collect_used(void *p, const char *path, const char *rel, const struct stat *st);
/* Remove temp files and blobs no recorded link uses (skipping blobs a live download has locked).
 * Call only after a complete hk__cache_collect_used walk. */
void hk__cache_prune_blobs(hk_prune_ctx *c);
void hk__prune_ctx_free(hk_prune_ctx *c);

#endif
