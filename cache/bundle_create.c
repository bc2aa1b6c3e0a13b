/* hubkern bundle create: write cached repos into a tar archive, blobs first, then snapshot links,
 * then refs, in a reproducible order. */
#include "cache/bundle_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct export_ctx {
    struct archive *ar;
    const char *root;      /* cache root, no trailing '/' */
    hk_bundle_report *stats;
    unsigned char *buf;
} export_ctx;

static int add_file(export_ctx *cx, const char *abs, const char *rel, const struct stat *st) {
    struct archive_entry *e = archive_entry_new();
    if (!e) return hk__fail(HK_ERR_NOMEM, "out of memory");
    archive_entry_set_pathname(e, rel);
    archive_entry_set_mtime(e, st->st_mtime, 0);
    int rc = HK_OK;
    if (S_ISLNK(st->st_mode)) {
        char target[4096];
        ssize_t n = readlink(abs, target, sizeof target - 1);
        if (n < 0) {
            archive_entry_free(e);
            return hk__fail(HK_ERR_IO, "cannot read link %s: %s", abs, strerror(errno));
        }
        target[n] = '\0';
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_perm(e, 0777);
        archive_entry_set_symlink(e, target);
        if (archive_write_header(cx->ar, e) != ARCHIVE_OK) rc = hk__bundle_ar_fail(cx->ar, "writing the bundle");
        else cx->stats->links++;
    } else if (S_ISDIR(st->st_mode)) {
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        if (archive_write_header(cx->ar, e) != ARCHIVE_OK) rc = hk__bundle_ar_fail(cx->ar, "writing the bundle");
    } else {
        int fd = open(abs, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            archive_entry_free(e);
            return hk__fail(hk__errno_code(errno), "cannot open %s: %s", abs, strerror(errno));
        }
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, st->st_size);
        if (archive_write_header(cx->ar, e) != ARCHIVE_OK) rc = hk__bundle_ar_fail(cx->ar, "writing the bundle");
        ssize_t n;
        uint64_t total = 0;
        while (rc == HK_OK && (n = read(fd, cx->buf, HK_BUNDLE_CHUNK)) > 0) {
            if (archive_write_data(cx->ar, cx->buf, (size_t)n) != n) rc = hk__bundle_ar_fail(cx->ar, "writing the bundle");
            total += (uint64_t)n;
        }
        if (rc == HK_OK && total != (uint64_t)st->st_size)
            rc = hk__fail(HK_ERR_IO, "%s changed size while being bundled", abs);
        close(fd);
        if (strstr(rel, "/blobs/")) cx->stats->bytes += total;
    }
    archive_entry_free(e);
    return rc;
}

static bool skip_name(const char *name) {
    return hk__str_ends_with(name, ".incomplete") || hk__str_ends_with(name, ".tmp") ||
           hk__str_ends_with(name, ".lock");
}

/* Add the tree under root/rel (depth-first, entries sorted for a reproducible archive). */
static int add_tree(export_ctx *cx, const char *rel, bool count_blobs) {
    char *abs = hk__path_join(cx->root, rel);
    if (!abs) return hk__fail(HK_ERR_NOMEM, "out of memory");
    struct dirent **names = NULL;
    int n = scandir(abs, &names, NULL, alphasort);
    if (n < 0) {
        int e = errno;
        free(abs);
        return e == ENOENT ? HK_OK : hk__fail(HK_ERR_IO, "cannot list %s/%s: %s", cx->root, rel, strerror(e));
    }
    int rc = HK_OK;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (rc == HK_OK && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !skip_name(name)) {
            char *crel = hk__asprintf("%s/%s", rel, name);
            char *cabs = hk__path_join(abs, name);
            struct stat st;
            if (!crel || !cabs) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            else if (lstat(cabs, &st) != 0) rc = hk__fail(HK_ERR_IO, "cannot stat %s: %s", cabs, strerror(errno));
            else if (S_ISDIR(st.st_mode)) rc = add_tree(cx, crel, count_blobs);
            else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
                rc = add_file(cx, cabs, crel, &st);
                if (rc == HK_OK && count_blobs && S_ISREG(st.st_mode)) cx->stats->blobs_added++;
                if (rc == HK_OK && strstr(crel, "/refs/")) cx->stats->refs++;
            }
            free(crel);
            free(cabs);
        }
        free(names[i]);
    }
    free(names);
    free(abs);
    return rc;
}

/* The compression a bundle's name asks for, as tar does with -a: a name that asks for none we know
 * is refused rather than written as a plain tar under a misleading name (x.tar.bz2). */
typedef enum { BUNDLE_PLAIN, BUNDLE_GZIP, BUNDLE_ZSTD, BUNDLE_BZIP2, BUNDLE_XZ } bundle_filter;
static const struct {
    const char *ending;
    bundle_filter filter;
} k_endings[] = {
    {".tar", BUNDLE_PLAIN},
    {".tar.gz", BUNDLE_GZIP},    {".tgz", BUNDLE_GZIP},   {".tar.zst", BUNDLE_ZSTD}, {".tzst", BUNDLE_ZSTD},
    {".tar.bz2", BUNDLE_BZIP2}, {".tbz2", BUNDLE_BZIP2}, {".tar.xz", BUNDLE_XZ},    {".txz", BUNDLE_XZ},
};

/* (libarchive is loaded at run time, so its functions are not constants a table could hold.) */
static int add_filter(struct archive *ar, bundle_filter f) {
    switch (f) {
    case BUNDLE_GZIP: return archive_write_add_filter_gzip(ar);
    case BUNDLE_ZSTD: return archive_write_add_filter_zstd(ar);
    case BUNDLE_BZIP2: return archive_write_add_filter_bzip2(ar);
    case BUNDLE_XZ: return archive_write_add_filter_xz(ar);
    case BUNDLE_PLAIN: break;
    }
    return ARCHIVE_OK;
}

/* The k_endings entry path ends in; nk (HK_ERR_INVALID_ARG set, naming every kind that can be
 * written, from the table) for any other name. */
static size_t bundle_kind(const char *path) {
    size_t k = 0, nk = sizeof k_endings / sizeof k_endings[0];
    while (k < nk && !hk__str_ends_with(path, k_endings[k].ending)) k++;
    if (k == nk) {
        char kinds[128] = "";
        for (size_t i = 0, n = 0; i < nk && n < sizeof kinds; i++)
            n += (size_t)snprintf(kinds + n, sizeof kinds - n, "%s%s", i ? (i + 1 == nk ? " or " : ", ") : "",
                                  k_endings[i].ending);
        hk__fail(HK_ERR_INVALID_ARG, "%s: cannot write that kind of archive; a bundle's name must end in %s (it "
                 "picks the compression)", path, kinds);
    }
    return k;
}

static int open_writer(struct archive **out, const char *path) {
    size_t k = bundle_kind(path);
    if (k == sizeof k_endings / sizeof k_endings[0]) return hk_last_error_code();
    int lrc = hk__archive_load();
    if (lrc) return lrc;
    struct archive *ar = archive_write_new();
    if (!ar) return hk__fail(HK_ERR_NOMEM, "out of memory");
    archive_write_set_format_pax_restricted(ar);
    int frc = add_filter(ar, k_endings[k].filter);
    if (frc != ARCHIVE_OK) {
        int rc = hk__fail(HK_ERR_UNSUPPORTED, "cannot compress %s: %s", path, archive_error_string(ar));
        archive_write_free(ar);
        return rc;
    }
    if (archive_write_open_filename(ar, path) != ARCHIVE_OK) {
        int rc = hk__fail(HK_ERR_IO, "cannot create %s: %s", path, archive_error_string(ar));
        archive_write_free(ar);
        return rc;
    }
    *out = ar;
    return HK_OK;
}

int hk__bundle_run_create(hk_bundle_report *out_stats, const char *out_path, const char *cache_root,
                         hk_repo_type type, const char *const *repo_ids, size_t n_repos) {
    hk_bundle_report local = {0};
    hk_bundle_report *stats = out_stats ? out_stats : &local;
    memset(stats, 0, sizeof *stats);
    if (!out_path || !cache_root || !repo_ids || n_repos == 0)
        return hk__fail(HK_ERR_INVALID_ARG, "bundle: give an output path, a cache and at least one repo");
    /* the arguments first: a name we cannot write fails before the repos are looked up */
    if (bundle_kind(out_path) == sizeof k_endings / sizeof k_endings[0]) return hk_last_error_code();
    /* Resolve every repo first so that a typo fails before anything is written. */
    char **folders = calloc(n_repos, sizeof *folders);
    if (!folders) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (size_t i = 0; i < n_repos && rc == HK_OK; i++) {
        const char *id = repo_ids[i];
        if (strstr(id, "--")) folders[i] = hk__strdup(id); /* already a cache folder name */
        else if (!hk_repo_id_valid(id)) rc = hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a valid repo id", id);
        else {
            char *dir = hk_cache_repo_dir(cache_root, type, id);
            folders[i] = dir ? hk__strdup(strrchr(dir, '/') + 1) : NULL;
            free(dir);
        }
        if (rc == HK_OK && !folders[i]) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK && (strchr(folders[i], '/') || !hk__path_is_safe_relative(folders[i])))
            rc = hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a cache folder name", folders[i]);
        if (rc == HK_OK) {
            char *snap = hk__asprintf("%s/%s/snapshots", cache_root, folders[i]);
            if (!snap) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            else if (!hk__is_dir(snap))
                rc = hk__fail(HK_ERR_NOT_FOUND, "%s is not in the cache at %s (pull it first)", repo_ids[i], cache_root);
            free(snap);
        }
    }
    export_ctx cx = {.root = cache_root, .stats = stats, .buf = malloc(HK_BUNDLE_CHUNK)};
    if (rc == HK_OK && !cx.buf) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = open_writer(&cx.ar, out_path);
    /* Blobs first, then snapshots, then refs: a reader streaming the archive sees the content
     * before anything that points at it. */
    static const char *const parts[] = {"blobs", "snapshots", "refs"};
    for (size_t i = 0; i < n_repos && rc == HK_OK; i++) {
        for (size_t p = 0; p < 3 && rc == HK_OK; p++) {
            char *rel = hk__asprintf("%s/%s", folders[i], parts[p]);
            rc = rel ? add_tree(&cx, rel, p == 0) : hk__fail(HK_ERR_NOMEM, "out of memory");
            free(rel);
        }
        stats->repos++;
    }
    if (cx.ar) {
        if (archive_write_close(cx.ar) != ARCHIVE_OK && rc == HK_OK) rc = hk__bundle_ar_fail(cx.ar, "finishing the bundle");
        archive_write_free(cx.ar);
        if (rc != HK_OK) unlink(out_path);
    }
    free(cx.buf);
    for (size_t i = 0; i < n_repos; i++) free(folders[i]);
    free(folders);
    return rc;
}
