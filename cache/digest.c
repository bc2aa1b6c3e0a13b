/* metadata.json `digest` check of a variant directory (kernel-hub-format.md §7): recompute the
 * per-file base64 SHA-256/512 over build/<variant>/ (following the cache's symlinks, skipping the
 * top-level metadata.json[.sigstore], __pycache__ and *.pyc) and report every violation. */
#include "cache/cache_internal.h"
#include "internal.h"
#include "util/pathglob.h"
#include "util/text.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool hk__digest_skips(const char *name, int top) {
    if (strcmp(name, "__pycache__") == 0 || hk__str_ends_with(name, ".pyc")) return true;
    return top && (strcmp(name, "metadata.json") == 0 || strcmp(name, "metadata.json.sigstore") == 0);
}

int hk__digest_missing_files(size_t *out_missing, size_t *out_listed, char **out_first, const char *variant_dir) {
    return hk__digest_missing_chosen(out_missing, out_listed, out_first, variant_dir, NULL, NULL, NULL);
}

int hk__digest_missing_chosen(size_t *out_missing, size_t *out_listed, char **out_first, const char *variant_dir,
                              const char *repo_prefix, const char *const *include, const char *const *exclude) {
    *out_missing = *out_listed = 0;
    if (out_first) *out_first = NULL;
    char *meta = hk__path_join(variant_dir, "metadata.json"), *text = NULL;
    size_t len = 0;
    int rc = meta ? hk__read_file(&text, &len, meta, HK_METADATA_JSON_MAX) : hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_digest_list dl = {0};
    int prc = rc == HK_OK ? hk__digest_list_parse(&dl, text, len, variant_dir) : rc;
    if (prc == HK_ERR_NOMEM) rc = prc;
    else if (rc == HK_OK && !dl.has_files) rc = hk__fail(HK_ERR_NOT_FOUND, "%s carries no digest", meta);
    for (size_t i = 0; rc == HK_OK && i < dl.n; i++) {
        const char *rel = dl.e[i].rel;
        if (repo_prefix) { /* the patterns see the repo path, build/<variant>/<rel> */
            char *rp = hk__asprintf("%s/%s", repo_prefix, rel);
            if (!rp) {
                rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                break;
            }
            bool chosen = hk__glob_select(rp, include, exclude);
            free(rp);
            if (!chosen) continue;
        }
        (*out_listed)++;
        char *fp = hk__path_is_safe_relative(rel) ? hk__path_join(variant_dir, rel) : NULL;
        struct stat st;
        if (!fp || stat(fp, &st) != 0) {
            if (out_first && !*out_first) *out_first = hk__strdup(rel);
            (*out_missing)++;
        }
        free(fp);
    }
    if (rc == HK_OK) hk_clear_error();
    hk__digest_list_free(&dl);
    free(text);
    free(meta);
    return rc;
}

/* A listed file as the walk found it: its stat (and the time just before it) is the check's st0,
 * so a file is stat'ed once before its hash, not once by the walk and once more by the check. */
typedef struct walk_st {
    /* of the stat, only what the receipt and the identity check read, times in ns (the receipt's
     * unit): 56 bytes a file, not 168 (a struct stat) or 80 (timespecs) */
    int64_t t0_ns, mtim_ns, ctim_ns;
    uint64_t dev, ino;
    int64_t size;
    mode_t mode;
    bool found; /* the walk met it */
    bool have;  /* and its stat (false: a dangling link, listed as present so that the hash step reports it) */
} walk_st;

/* (a time of no int64 ns, centuries away, comes back as another: the identity check then fails,
 * and the file is only not recorded) */
static int64_t ns_of(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000 + (int64_t)t->tv_nsec; }

static struct timespec ts_of(int64_t ns) {
    int64_t s = ns / 1000000000, r = ns % 1000000000;
    if (r < 0) s--, r += 1000000000;
    return (struct timespec){(time_t)s, (long)r};
}

static void st_pack(walk_st *w, const struct stat *st) {
    w->dev = (uint64_t)st->st_dev;
    w->ino = (uint64_t)st->st_ino;
    w->size = (int64_t)st->st_size;
    w->mtim_ns = ns_of(&st->st_mtim);
    w->ctim_ns = ns_of(&st->st_ctim);
    w->mode = st->st_mode;
}

static void st_unpack(struct stat *st, const walk_st *w) {
    memset(st, 0, sizeof *st);
    st->st_dev = (dev_t)w->dev;
    st->st_ino = (ino_t)w->ino;
    st->st_size = (off_t)w->size;
    st->st_mtim = ts_of(w->mtim_ns);
    st->st_ctim = ts_of(w->ctim_ns);
    st->st_mode = w->mode;
}

/* What the walk found, kept by digest entry: a listed file costs its stat only (the digest list
 * holds its name), a file the digest does not list its name too (in walk order, for the report). */
typedef struct walk {
    const hk_digest_list *dl;
    walk_st *st; /* st[k]: dl->e[k] */
    char **unknown;
    size_t nunknown, cap;
    int rc;
} walk;

static void walk_add(walk *w, const char *rel, const struct timespec *t0, const struct stat *st) {
    const hk_digest_entry *f = hk__digest_list_find(w->dl, rel);
    if (f) {
        walk_st *s = &w->st[f - w->dl->e];
        s->found = true;
        s->have = st != NULL;
        if (st) st_pack(s, st), s->t0_ns = ns_of(t0);
        return;
    }
    char *copy = hk__strdup(rel);
    if (!copy || HK_VEC_RESERVE(w->unknown, w->cap, w->nunknown + 1)) {
        free(copy);
        w->rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        return;
    }
    w->unknown[w->nunknown++] = copy;
}

static void walk_dir(walk *w, const char *root, const char *rel, int depth) {
    if (depth > 32 || w->rc) return;
    char *dirpath = rel[0] ? hk__path_join(root, rel) : hk__strdup(root);
    if (!dirpath) {
        w->rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        return;
    }
    DIR *d = opendir(dirpath);
    if (!d) {
        w->rc = hk__fail(hk__errno_code(errno), "cannot read %s: %s", dirpath, strerror(errno));
        free(dirpath);
        return;
    }
    struct dirent *de;
    while (!w->rc && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (hk__digest_skips(name, 0)) continue;
        char *childrel = rel[0] ? hk__asprintf("%s/%s", rel, name) : hk__strdup(name);
        char *child = childrel ? hk__path_join(root, childrel) : NULL;
        struct stat st;
        struct timespec t0;
        clock_gettime(CLOCK_REALTIME, &t0);
        if (!child) w->rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else if (stat(child, &st) != 0) {
            /* a dangling link: listed as present so that the hash step reports it */
            walk_add(w, childrel, NULL, NULL);
        } else if (S_ISDIR(st.st_mode)) {
            walk_dir(w, root, childrel, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            if (!hk__digest_skips(name, rel[0] == '\0')) walk_add(w, childrel, &t0, &st);
        }
        free(child);
        free(childrel);
    }
    closedir(d);
    free(dirpath);
}

/* A cache file that is a symlink to blobs/<64 hex> that this very pull has just written after
 * hashing every byte: its SHA-256 is the name itself, so the file need not be read again. Blobs
 * that were already in the cache are re-hashed (they may have rotted since). */
static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The SHA-256 names among fresh, sorted and each once (*out NULL when none): a binary search per
 * link read, 8 bytes a blob where a hash map took 32-64. */
static int fresh_names(const char ***out, size_t *out_n, const char *const *fresh, size_t nfresh) {
    *out = NULL;
    *out_n = 0;
    size_t n = 0;
    for (size_t i = 0; i < nfresh; i++) n += fresh[i] && strlen(fresh[i]) == 64;
    if (!n) return HK_OK;
    const char **v = malloc(n * sizeof *v);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    n = 0;
    for (size_t i = 0; i < nfresh; i++)
        if (fresh[i] && strlen(fresh[i]) == 64) v[n++] = fresh[i];
    qsort(v, n, sizeof *v, cmp_name);
    size_t w = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i], v[w - 1]) != 0) v[w++] = v[i];
    *out = v;
    *out_n = w;
    return HK_OK;
}

static bool blob_name_b64(char b64[100], const char *path, const char *const *fresh, size_t nfresh, bool is_regular) {
    char target[4096];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return false;
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (strlen(base) != 64 || !hk__is_hex(base, 64)) return false;
    if (!bsearch(&base, fresh, nfresh, sizeof *fresh, cmp_name)) return false;
    struct stat st; /* is_regular: the caller's stat of path said so already */
    if (!is_regular && (stat(path, &st) != 0 || !S_ISREG(st.st_mode))) return false;
    unsigned char bytes[32];
    if (hk__unhex(bytes, base, 32) != HK_OK) return false;
    hk__base64(b64, bytes, 32);
    return true;
}

/* <root>/<folder>/snapshots/<commit>/build/<variant> → repo_dir, commit, variant (all allocated). */
static bool split_variant_dir(char **repo_dir, char **commit, char **variant, const char *root, const char *vdir) {
    *repo_dir = *commit = *variant = NULL;
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/') rl--;
    if (strncmp(vdir, root, rl) != 0 || vdir[rl] != '/') return false;
    const char *p = vdir + rl + 1;
    const char *parts[5];
    size_t lens[5];
    for (int i = 0; i < 5; i++) {
        const char *e = strchr(p, '/');
        if ((e == NULL) != (i == 4)) return false;
        parts[i] = p;
        lens[i] = e ? (size_t)(e - p) : strlen(p);
        if (lens[i] == 0) return false;
        p = e ? e + 1 : p + lens[i];
    }
    if (lens[1] != 9 || strncmp(parts[1], "snapshots", 9) != 0 || lens[3] != 5 || strncmp(parts[3], "build", 5) != 0)
        return false;
    *repo_dir = hk__strndup(vdir, (size_t)(parts[0] + lens[0] - vdir));
    *commit = hk__strndup(parts[2], lens[2]);
    *variant = hk__strndup(parts[4], lens[4]);
    if (*repo_dir && *commit && *variant) return true;
    free(*repo_dir);
    free(*commit);
    free(*variant);
    *repo_dir = *commit = *variant = NULL;
    return false;
}

static bool same_identity(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* What a check records for its receipt. Checking the published copy with the staged check's receipt
 * (borrowed), it would record that receipt's entries again, in its order, each with the same stat:
 * so while it does (lazy) it counts them instead of copying them, and makes its own receipt (old's
 * first `same` entries copied) only at the first file that differs. At 100k files: 6 MB less. */
typedef struct recorder {
    hk_receipt *now; /* the receipt being made; NULL while lazy */
    const hk_receipt *old;
    size_t same, reserve;
    bool lazy;
    bool oom; /* the copy failed: no receipt is written (as a receipt that ran out of memory) */
} recorder;

static void record(recorder *rec, const char *rel, const struct stat *st, bool trusted) {
    if (rec->lazy) {
        if (trusted && hk__receipt_entry_is(rec->old, rec->same, rel, st)) {
            rec->same++;
            return;
        }
        rec->lazy = false;
        rec->now = hk__receipt_copy_prefix(rec->old, rec->same, rec->reserve);
        if (!rec->now) rec->oom = true;
    }
    hk__receipt_add(rec->now, rel, st); /* (NULL: nothing) */
}

/* One piece: the digest check of a variant is one pass over its files in which the receipt, the
 * fresh-blob set and the hashing decide per file together (what was vouched for, hashed now or
 * just downloaded); its steps share the counters the receipt is then written from. */
int hk__verify_variant_prior(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                             const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh,
                             unsigned flags, hk_receipt **io_prior) {
    *out_has_digest = false;
    hk_verify_stats stats;
    memset(&stats, 0, sizeof stats);
    if (out_stats) *out_stats = stats;
    char *mpath = hk__path_join(variant_dir, "metadata.json");
    if (!mpath) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t tlen = 0;
    int rc = hk__read_file(&text, &tlen, mpath, HK_METADATA_JSON_MAX);
    if (rc) {
        free(mpath);
        return rc == HK_ERR_NOT_FOUND ? hk__fail(HK_ERR_DIGEST, "%s has no metadata.json", variant_dir) : rc;
    }
    char meta_sha[65] = "";
    hk_hasher *mh = hk__hasher_new(HK_HASH_SHA256, 0);
    if (mh) {
        unsigned char d[64];
        hk__hasher_update(mh, text, tlen);
        hk__hex(meta_sha, d, hk__hasher_finish(mh, d));
    }
    hk_digest_list dl;
    /* the staged check's list of these very bytes: not parsed again (at 100k files the parse's
     * tree and text were ~23 MB on top of the pull, its peak) */
    if (meta_sha[0] && io_prior && hk__receipt_meta_is(*io_prior, meta_sha) && hk__receipt_take_list(*io_prior, &dl)) {
        free(text);
        rc = HK_OK;
    } else {
        rc = hk__digest_list_parse_owned(&dl, text, tlen, variant_dir);
    }
    free(mpath);
    if (rc) {
        hk__digest_list_free(&dl);
        return rc;
    }
    if (!dl.has_digest) {
        hk__digest_list_free(&dl);
        if (!quiet) hk__log(HK_LOG_WARN, "%s: metadata.json has no digest; only per-file hashes were checked", variant_dir);
        return HK_OK;
    }
    *out_has_digest = true;
    hk_hash_kind kind = dl.kind;
    /* receipts: only for a variant directory of this cache root, and only for this metadata.json */
    char *repo_dir = NULL, *commit = NULL, *variant = NULL, *rpath = NULL;
    hk_receipt *old = NULL, *now = NULL;
    if (cache_root && meta_sha[0] && hk_receipts_enabled() && split_variant_dir(&repo_dir, &commit, &variant, cache_root, variant_dir) &&
        (rpath = hk__receipt_path(cache_root, repo_dir, commit, variant)) != NULL) {
        old = hk__receipt_load(rpath, cache_root, repo_dir, commit, variant, meta_sha);
        now = hk__receipt_new(meta_sha);
    }
    /* the check of a staged copy this pull just made (its files hashed there) vouches for the
     * published one, whose links resolve to the same blobs: same stat identity, same bytes */
    bool borrowed = false, made = false;
    if (io_prior && *io_prior && !old && now && hk__receipt_meta_is(*io_prior, meta_sha)) old = *io_prior, borrowed = true;
    if (io_prior && !*io_prior && !now && meta_sha[0] && hk_receipts_enabled()) now = hk__receipt_new(meta_sha), made = true;
    recorder rec = {now, old, 0, dl.n, false, false};
    if (borrowed) { /* what it records is most likely old's entries, in old's order: made if not */
        hk__receipt_free(now);
        rec.now = now = NULL;
        rec.lazy = true;
    }
    /* the walk's files found by digest entry (binary search), the fresh blobs by name: no hash map
     * or copy of a name per file beside the digest list's */
    walk w = {&dl, calloc(dl.n + 1, sizeof *w.st), NULL, 0, 0, HK_OK};
    if (!w.st) w.rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (!w.rc && rec.now) w.rc = hk__receipt_reserve(rec.now, dl.n); /* at most one entry per listed file */
    walk_dir(&w, variant_dir, "", 0);
    const char **fresh_set = NULL;
    size_t nfresh_set = 0; /* only a SHA-256 name can stand for a file's hash; none: no link is read */
    if (!w.rc && kind == HK_HASH_SHA256) w.rc = fresh_names(&fresh_set, &nfresh_set, fresh, nfresh);
    hk_strbuf msg;
    hk__sb_init(&msg);
    size_t violations = 0;
    bool oom = false; /* a file that could not be checked for want of memory is no violation */
    if (w.rc) rc = w.rc;
    if (!rc) {
        for (size_t k = 0; k < dl.n; k++) {
            const hk_digest_entry *f = &dl.e[k];
            const walk_st *ws = &w.st[k];
            if (!ws->found && (flags & HK_VERIFY_PRESENT_ONLY)) continue; /* not pulled: not missing */
            if (!ws->found) {
                hk__sb_printf(&msg, "\n  MissingFile: %s", f->rel);
                if (!quiet) hk__log(HK_LOG_WARN, "%s: MissingFile %s", variant_dir, f->rel);
                violations++;
                continue;
            }
            char *path = hk__path_join(variant_dir, f->rel);
            const char *want = f->want;
            char b64[100];
            int hrc;
            /* the walk's stat, taken after t0 and before anything below reads the file */
            struct timespec t0 = ts_of(ws->t0_ns);
            struct stat st0, st1;
            st_unpack(&st0, ws);
            bool have_st = path && ws->have;
            enum { HASHED, FRESH, TRUSTED } how = HASHED;
            if (have_st && want && hk__receipt_vouches(old, f->rel, &st0)) {
                /* unchanged since it was hashed and found equal to this very digest entry */
                snprintf(b64, sizeof b64, "%s", want);
                hrc = HK_OK;
                how = TRUSTED;
            } else if (path && nfresh_set && blob_name_b64(b64, path, fresh_set, nfresh_set, have_st)) {
                hrc = HK_OK;
                how = FRESH;
            } else {
                /* just changed (a blob this or another pull has just written)? Waiting <= 20 ms lets a
                 * big file be recorded now instead of being hashed once more at its next use */
                if (have_st && (rec.now || rec.lazy) && st0.st_size >= (1 << 20)) {
                    hk__receipt_settle(&st0, &t0, path);
                    have_st = S_ISREG(st0.st_mode);
                }
                hrc = path ? hk__hash_file_b64(b64, sizeof b64, kind, path) : hk__fail(HK_ERR_NOMEM, "out of memory");
            }
            bool ok = hrc == HK_OK && want && strcmp(want, b64) == 0;
            if (ok && have_st) {
                uint64_t size = (uint64_t)st0.st_size;
                if (how == TRUSTED) stats.bytes_trusted += size, stats.files_trusted++;
                else if (how == FRESH) stats.bytes_fresh += size, stats.files_fresh++;
                else stats.bytes_hashed += size, stats.files_hashed++;
                /* recorded only if nothing can have changed the file unseen since st0 was taken */
                if ((rec.now || rec.lazy) && (how == TRUSTED || (stat(path, &st1) == 0 && same_identity(&st0, &st1) &&
                                                                hk__receipt_stat_settled(&st0, &t0))))
                    record(&rec, f->rel, &st0, how == TRUSTED);
            }
            free(path);
            if (hrc == HK_ERR_NOMEM) {
                oom = true;
            } else if (hrc != HK_OK) {
                hk__sb_printf(&msg, "\n  MissingFile: %s (%s)", f->rel, hk_last_error());
                violations++;
            } else if (!ok) {
                hk__sb_printf(&msg, "\n  HashMismatch: %s: expected %s, got %s", f->rel, want ? want : "(not a string)", b64);
                if (!quiet) hk__log(HK_LOG_WARN, "%s: HashMismatch %s", variant_dir, f->rel);
                violations++;
            }
        }
        for (size_t i = 0; i < w.nunknown; i++) {
            hk__sb_printf(&msg, "\n  UnknownFile: %s", w.unknown[i]);
            if (!quiet) hk__log(HK_LOG_WARN, "%s: UnknownFile %s", variant_dir, w.unknown[i]);
            violations++;
        }
        if (oom)
            rc = hk__fail(HK_ERR_NOMEM, "%s: out of memory while checking its metadata.json digest", variant_dir);
        else if (violations)
            rc = hk__fail(HK_ERR_DIGEST, "%s does not match its metadata.json digest (%zu violation%s):%s", variant_dir,
                         violations, violations == 1 ? "" : "s", msg.data ? msg.data : "");
    }
    /* the walk, its indexes, the digest list and the old receipt freed before the new receipt is
     * written: the pull's peak was all of them and the receipt's text at once (~200 B a file) */
    free(fresh_set);
    for (size_t i = 0; i < w.nunknown; i++) free(w.unknown[i]);
    free(w.unknown);
    free(w.st);
    hk__sb_free(&msg);
    if (made && rc == HK_OK && now && (flags & HK_VERIFY_KEEP_LIST)) hk__receipt_keep_list(now, &dl);
    hk__digest_list_free(&dl);
    if (rec.lazy) { /* every file recorded was old's, in its order: old's first ones are the receipt */
        hk__receipt_truncate(old, rec.same);
        now = old;
        old = NULL;
    } else {
        now = rec.now;
    }
    hk__receipt_free(old);
    if (borrowed) *io_prior = NULL; /* the staged check's receipt has done its work: not held through the save */
    if (rpath && (flags & HK_VERIFY_NO_WRITE)) {
        /* read-only: what the receipt vouched for was used, nothing recorded */
    } else if (rpath && rc) {
        hk__receipt_remove(rpath); /* whatever it vouched for is no longer true */
    } else if (rpath && (now || rec.oom) && (stats.files_hashed + stats.files_fresh > 0 || borrowed)) {
        char *keep = hk__strdup(hk_last_error());
        int code = hk_last_error_code();
        int src = rec.oom ? hk__fail(HK_ERR_NOMEM, "out of memory")
                          : hk__receipt_save(now, rpath, cache_root, repo_dir, commit, variant);
        if (src != HK_OK) hk__log(HK_LOG_DEBUG, "verification receipt not written: %s", hk_last_error());
        if (code) hk__fail(code, "%s", keep ? keep : "");
        else hk_clear_error();
        free(keep);
    }
    if (rc == HK_OK)
        hk__log(HK_LOG_DEBUG,
               "%s matches its metadata.json digest: %" PRIu64 " bytes hashed, %" PRIu64 " bytes fresh from this "
               "download, %" PRIu64 " bytes trusted by receipt (%zu/%zu/%zu files)",
               variant_dir, stats.bytes_hashed, stats.bytes_fresh, stats.bytes_trusted, stats.files_hashed,
               stats.files_fresh, stats.files_trusted);
    if (out_stats) *out_stats = stats;
    if (made && rc == HK_OK) { /* handed to the caller's next check (without it: that check hashes) */
        if (hk__receipt_index(now) == HK_OK) *io_prior = now, now = NULL;
        else hk_clear_error();
    }
    hk__receipt_free(now);
    free(rpath);
    free(repo_dir);
    free(commit);
    free(variant);
    return rc;
}

int hk__verify_variant_flags(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                            const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh,
                            unsigned flags) {
    return hk__verify_variant_prior(out_has_digest, out_stats, variant_dir, cache_root, quiet, fresh, nfresh, flags, NULL);
}

int hk__verify_variant_cached(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                             const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh) {
    return hk__verify_variant_flags(out_has_digest, out_stats, variant_dir, cache_root, quiet, fresh, nfresh, 0);
}

int hk__verify_variant_digest_ex(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir, bool quiet,
                                const char *const *fresh, size_t nfresh) {
    hk_verify_stats st;
    int rc = hk__verify_variant_cached(out_has_digest, &st, variant_dir, NULL, quiet, fresh, nfresh);
    if (out_bytes) *out_bytes = rc == HK_OK ? st.bytes_hashed + st.bytes_fresh : 0;
    return rc;
}

int hk__verify_variant_digest(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir) {
    return hk__verify_variant_digest_ex(out_has_digest, out_bytes, variant_dir, false, NULL, 0);
}
