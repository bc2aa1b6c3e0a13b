/* Verification receipts: after the files of a cached variant were hashed against its metadata.json
 * digest, the stat identity of each one (device, inode, size, mtime and ctime in ns) is recorded so
 * that a later use can skip reading a file whose identity is unchanged. ctime cannot be set from
 * user space: any write, truncate, chmod, rename or replacement of a blob changes it (or the inode).
 *
 * A receipt is only ever a reason to skip work: anything unexpected in it (missing, unreadable,
 * corrupt, other format, other cache root, other metadata.json) makes it void, and the caller then
 * hashes everything as it would without receipts. */
#include "cache/cache_internal.h"
#include "util/strmap.h"
#include "util/text.h"
#include "util/vec.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECEIPT_FORMAT "hubkern-verify-receipt/1"
/* A receipt entry takes at most about 2.4x the bytes of the file's metadata.json digest entry (the
 * same path, a stat line for the 44-character hash), and metadata.json is read up to
 * HK_METADATA_JSON_MAX (16 MiB): so
 * every variant whose digest can be checked has a receipt that can be read (8 MiB had voided the
 * receipt of a 100k-file variant, 8.7 MB, so that every warm use hashed every file again). */
#define RECEIPT_MAX_BYTES (3u * HK_METADATA_JSON_MAX)

typedef struct rfile {
    char *path;
    uint64_t size, dev, ino;
    int64_t mtime_ns, ctime_ns;
} rfile;

struct hk_receipt {
    char *meta_sha256;
    rfile *files;
    size_t n, cap;
    /* paths added in strictly increasing order (a check adds them in its digest list's order, a
     * save writes them so): found by binary search, with no index beside them */
    bool sorted;
    hk_strmap index; /* path → files[i] once they are not sorted: O(1) per lookup at 100k files */
    hk_arena paths;  /* the files' paths: one malloc per 64 KiB, not one per file */
    bool oom;
    /* the digest list of the check that made it, carried to the next check of the same
     * metadata.json (a pull's published copy), which then does not parse it again */
    hk_digest_list list;
    bool has_list;
};

static int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000 + (int64_t)t->tv_nsec; }

int hk_receipts_enabled(void) {
    const char *v = hk__getenv("HUBKERN_VERIFY");
    return !(v && strcmp(v, "always") == 0);
}

/* "kernels--org--name" from ".../kernels--org--name" */
static const char *folder_of(const char *repo_dir) {
    const char *f = strrchr(repo_dir, '/');
    return f ? f + 1 : repo_dir;
}

/* <HUBKERN_RECEIPTS_DIR>/<32 hex of sha256(root)>: receipts of one cache root kept outside it. */
static char *outside_dir(const char *dir, const char *root) {
    char hex[65];
    if (hk__sha256_hex(hex, root, strlen(root))) return NULL;
    return hk__asprintf("%s/%.32s", dir, hex);
}

static bool folder_ok(const char *folder) { return hk__path_is_safe_relative(folder) && !strchr(folder, '/'); }

char *hk__receipt_path(const char *root, const char *repo_dir, const char *commit, const char *variant) {
    if (!root || !repo_dir || !commit || !variant) return NULL;
    const char *folder = folder_of(repo_dir);
    if (!folder_ok(folder) || !folder_ok(commit) || !folder_ok(variant)) return NULL;
    const char *dir = hk__getenv("HUBKERN_RECEIPTS_DIR");
    if (!dir) return hk__asprintf("%s/.locks/%s/hubkern-receipts/%s/%s.json", root, folder, commit, variant);
    /* one directory per cache root: receipts of two caches never meet */
    char *base = outside_dir(dir, root);
    char *p = base ? hk__asprintf("%s/%s/%s/%s.json", base, folder, commit, variant) : NULL;
    free(base);
    return p;
}

size_t hk__receipt_repo_dirs(char *out[2], const char *root, const char *folder) {
    out[0] = out[1] = NULL;
    if (!root || !folder || !folder_ok(folder)) return 0;
    size_t n = 0;
    if ((out[n] = hk__asprintf("%s/.locks/%s/hubkern-receipts", root, folder))) n++;
    const char *dir = hk__getenv("HUBKERN_RECEIPTS_DIR");
    char *base = dir ? outside_dir(dir, root) : NULL;
    if (base && (out[n] = hk__asprintf("%s/%s", base, folder))) n++;
    free(base);
    return n;
}

char *hk__receipt_outside_root_dir(const char *root) {
    const char *dir = hk__getenv("HUBKERN_RECEIPTS_DIR");
    return dir && root ? outside_dir(dir, root) : NULL;
}

hk_receipt *hk__receipt_new(const char *meta_sha256) {
    hk_receipt *r = calloc(1, sizeof *r);
    if (r && !(r->meta_sha256 = hk__strdup(meta_sha256))) {
        free(r);
        return NULL;
    }
    if (r) r->sorted = true;
    return r;
}

void hk__receipt_free(hk_receipt *r) {
    if (!r) return;
    hk__strmap_free(&r->index);
    hk__arena_free(&r->paths);
    hk__digest_list_free(&r->list);
    free(r->files);
    free(r->meta_sha256);
    free(r);
}

int hk__receipt_reserve(hk_receipt *r, size_t n) {
    if (!r || r->oom || n <= r->cap) return HK_OK;
    rfile *f = n <= SIZE_MAX / sizeof *f ? realloc(r->files, n * sizeof *f) : NULL;
    if (!f) return hk__fail(HK_ERR_NOMEM, "out of memory");
    r->files = f;
    r->cap = n;
    return HK_OK;
}

/* The index of r's paths, made when they stop being sorted (and kept up by add_entry after). */
static int make_index(hk_receipt *r) {
    r->sorted = false;
    hk__strmap_free(&r->index);
    hk__strmap_init(&r->index);
    for (size_t i = 0; i < r->n; i++) {
        int rc = hk__strmap_get(&r->index, r->files[i].path, NULL) ? HK_OK : hk__strmap_put(&r->index, r->files[i].path, i);
        if (rc) return rc; /* (the first entry of a path counts) */
    }
    return HK_OK;
}

static rfile *add_entry(hk_receipt *r, const char *rel) {
    if (HK_VEC_RESERVE(r->files, r->cap, r->n + 1) != HK_OK) return NULL;
    if (r->sorted && r->n && strcmp(r->files[r->n - 1].path, rel) >= 0 && make_index(r) != HK_OK) return NULL;
    rfile *f = &r->files[r->n];
    memset(f, 0, sizeof *f);
    if (!(f->path = hk__arena_strdup(&r->paths, rel))) return NULL;
    if (!r->sorted && !hk__strmap_get(&r->index, f->path, NULL) && hk__strmap_put(&r->index, f->path, r->n) != HK_OK)
        return NULL;
    r->n++;
    return f;
}

static int cmp_path(const void *key, const void *f) { return strcmp(key, ((const rfile *)f)->path); }

/* The entry for rel (the first one of a path), or NULL. */
static const rfile *find(const hk_receipt *r, const char *rel) {
    size_t i;
    if (r->sorted) return r->n ? bsearch(rel, r->files, r->n, sizeof *r->files, cmp_path) : NULL;
    return hk__strmap_get(&r->index, rel, &i) ? &r->files[i] : NULL;
}

static void fill(rfile *f, const struct stat *st) {
    f->size = (uint64_t)st->st_size;
    f->dev = (uint64_t)st->st_dev;
    f->ino = (uint64_t)st->st_ino;
    f->mtime_ns = ts_ns(&st->st_mtim);
    f->ctime_ns = ts_ns(&st->st_ctim);
}

/* A change made later within the same tick of the file-system clock as the file's last change
 * would leave ctime as it is ("racy" in git's words). So a stat only counts when it was taken
 * clearly after that tick: 20 ms (coarse clock ticks are 1-10 ms), 2 s where ctime has no
 * sub-second part (file systems with whole-second timestamps). */
bool hk__receipt_stat_settled(const struct stat *st, const struct timespec *taken_before) {
    int64_t margin = st->st_ctim.tv_nsec == 0 ? 2000000000 : 20000000;
    return ts_ns(&st->st_ctim) + margin <= ts_ns(taken_before);
}

void hk__receipt_settle(struct stat *st, struct timespec *taken_before, const char *path) {
    if (hk__receipt_stat_settled(st, taken_before) || st->st_ctim.tv_nsec == 0) return;
    int64_t wait = ts_ns(&st->st_ctim) + 20000000 - ts_ns(taken_before) + 1000000;
    if (wait <= 0 || wait > 25000000) return; /* (a ctime in the future: not worth waiting for) */
    struct timespec d = {0, (long)wait};
    while (nanosleep(&d, &d) != 0 && errno == EINTR) {
    }
    struct stat again;
    clock_gettime(CLOCK_REALTIME, taken_before);
    if (stat(path, &again) == 0) *st = again;
    else st->st_mode = 0; /* gone: not a regular file any more, so never recorded */
}

void hk__receipt_add(hk_receipt *r, const char *rel, const struct stat *st) {
    if (!r || r->oom) return;
    rfile *f = add_entry(r, rel);
    if (!f) {
        r->oom = true;
        return;
    }
    fill(f, st);
}

size_t hk__receipt_count(const hk_receipt *r) { return r ? r->n : 0; }

bool hk__receipt_entry_is(const hk_receipt *r, size_t i, const char *rel, const struct stat *st) {
    if (!r || i >= r->n || strcmp(r->files[i].path, rel) != 0) return false;
    rfile f;
    fill(&f, st);
    const rfile *e = &r->files[i];
    return e->size == f.size && e->dev == f.dev && e->ino == f.ino && e->mtime_ns == f.mtime_ns &&
           e->ctime_ns == f.ctime_ns;
}

hk_receipt *hk__receipt_copy_prefix(const hk_receipt *r, size_t n, size_t reserve) {
    hk_receipt *c = r ? hk__receipt_new(r->meta_sha256) : NULL;
    if (!c || hk__receipt_reserve(c, reserve > n ? reserve : n) != HK_OK) {
        hk__receipt_free(c);
        return NULL;
    }
    for (size_t i = 0; i < n && i < r->n && !c->oom; i++) {
        rfile *f = add_entry(c, r->files[i].path);
        if (!f) c->oom = true;
        else {
            char *path = f->path;
            *f = r->files[i];
            f->path = path;
        }
    }
    return c;
}

void hk__receipt_truncate(hk_receipt *r, size_t n) {
    if (!r || n >= r->n) return;
    r->n = n;
    if (!r->sorted && make_index(r) != HK_OK) r->oom = true; /* (the index had the dropped ones) */
}

void hk__receipt_keep_list(hk_receipt *r, hk_digest_list *dl) {
    if (!r) return;
    hk__digest_list_free(&r->list);
    r->list = *dl;
    r->has_list = true;
    memset(dl, 0, sizeof *dl);
}

bool hk__receipt_take_list(hk_receipt *r, hk_digest_list *out) {
    if (!r || !r->has_list) return false;
    *out = r->list;
    r->has_list = false;
    memset(&r->list, 0, sizeof r->list);
    return true;
}

int hk__receipt_index(hk_receipt *r) {
    if (!r || r->oom) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return r->sorted ? HK_OK : make_index(r); /* sorted: found by binary search */
}

bool hk__receipt_meta_is(const hk_receipt *r, const char *meta_sha256) {
    return r && r->meta_sha256 && strcmp(r->meta_sha256, meta_sha256) == 0;
}

bool hk__receipt_vouches(const hk_receipt *r, const char *rel, const struct stat *st) {
    const rfile *f = r && S_ISREG(st->st_mode) ? find(r, rel) : NULL;
    return f && f->size == (uint64_t)st->st_size && f->dev == (uint64_t)st->st_dev && f->ino == (uint64_t)st->st_ino &&
           f->mtime_ns == ts_ns(&st->st_mtim) && f->ctime_ns == ts_ns(&st->st_ctim);
}

/* numbers travel as decimal strings: JSON doubles would round 64-bit inodes and ns times */
static bool parse_u64(uint64_t *out, const char *s) {
    if (!s || !*s || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = (uint64_t)v;
    return true;
}

static bool parse_stat(rfile *f, const char *s) {
    /* "<size> <dev> <ino> <mtime_ns> <ctime_ns>" */
    char buf[160];
    if (!s || strlen(s) >= sizeof buf) return false;
    strcpy(buf, s);
    uint64_t v[5];
    char *save = NULL;
    char *tok = strtok_r(buf, " ", &save);
    for (int i = 0; i < 5; i++) {
        if (!tok || !parse_u64(&v[i], tok)) return false;
        tok = strtok_r(NULL, " ", &save);
    }
    if (tok || v[3] > INT64_MAX || v[4] > INT64_MAX) return false;
    f->size = v[0];
    f->dev = v[1];
    f->ino = v[2];
    f->mtime_ns = (int64_t)v[3];
    f->ctime_ns = (int64_t)v[4];
    return true;
}

static char *root_id(const char *root) {
    struct stat st;
    if (stat(root, &st) != 0) return NULL;
    return hk__asprintf("%" PRIu64 " %" PRIu64, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
}

/* ---- reading a receipt: one file entry at a time ----------------------------------------------
 * cJSON_Parse of a whole receipt built a tree of every entry (~270 B a file: 27 MB at 100k files, a
 * warm pull's peak). The document is walked here instead, each value (the keys, the header's
 * strings, each entry of "files") parsed by cJSON on its own and freed once read, so the grammar
 * of every value is cJSON's and so is what the walk accepts: one object, keys strings, the first
 * of a key counting, anything after the object ignored (as cJSON_Parse). */
typedef struct doc_walk {
    const char *p, *end;
    bool bad; /* not valid JSON */
} doc_walk;

static void skip_ws(doc_walk *d) { /* what cJSON skips: every byte up to the space */
    while (d->p < d->end && (unsigned char)*d->p <= 32) d->p++;
}

static bool punct(doc_walk *d, char c) {
    skip_ws(d);
    if (d->p < d->end && *d->p == c) return d->p++, true;
    return false;
}

static cJSON *value(doc_walk *d) {
    skip_ws(d);
    const char *after = NULL;
    cJSON *v = d->p < d->end ? cJSON_ParseWithLengthOpts(d->p, (size_t)(d->end - d->p), &after, 0) : NULL;
    if (v) d->p = after;
    else d->bad = true;
    return v;
}

enum { K_FORMAT, K_ROOT, K_ROOT_ID, K_FOLDER, K_COMMIT, K_VARIANT, K_META, K_FILES, K_N };
static const char *const g_keys[K_N] = {"format", "cache_root", "cache_root_id", "repo_folder",
                                        "commit", "variant", "metadata_sha256", "files"};

/* One element of "files" into r (why: the first reason it is void, kept as the loop of a parsed
 * tree would have stopped there). */
static void take_entry(hk_receipt *r, const cJSON *f, const char **why) {
    if (*why) return;
    const char *rel = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "path"));
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "stat"));
    rfile tmp;
    if (!rel || !hk__path_is_safe_relative(rel) || !parse_stat(&tmp, st)) {
        *why = "malformed file entry";
        return;
    }
    bool after = r->sorted && (!r->n || strcmp(r->files[r->n - 1].path, rel) < 0); /* (then not there) */
    if (!after && find(r, rel)) return; /* the first entry of a path counts */
    rfile *e = add_entry(r, rel);
    if (!e) {
        *why = "out of memory";
        return;
    }
    tmp.path = e->path;
    *e = tmp;
}

/* The document at text: its header strings in head[] (the first of each key; the caller deletes
 * them), its first "files" array's entries into r. false: not valid JSON. *files_array: that
 * "files" was an array; *entry_why: why an entry voids it. */
static bool walk_doc(cJSON *head[K_N], bool *files_array, hk_receipt *r, const char **entry_why, const char *text,
                     size_t len) {
    doc_walk d = {text, text + len, false};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) d.p += 3; /* (a BOM, as cJSON_Parse skips it) */
    if (!punct(&d, '{')) return false;
    if (punct(&d, '}')) return true;
    bool seen[K_N] = {false};
    for (;;) {
        if (d.bad) return false;
        cJSON *key = value(&d);
        if (!key || !cJSON_IsString(key) || !punct(&d, ':')) {
            cJSON_Delete(key);
            return false;
        }
        int k = 0;
        while (k < K_N && strcmp(g_keys[k], key->valuestring) != 0) k++;
        cJSON_Delete(key);
        bool wanted = k < K_N && !seen[k];
        if (wanted) seen[k] = true;
        skip_ws(&d);
        if (wanted && k == K_FILES && d.p < d.end && *d.p == '[') { /* element by element */
            *files_array = true;
            d.p++;
            if (!punct(&d, ']')) {
                do {
                    cJSON *f = value(&d);
                    if (f) take_entry(r, f, entry_why);
                    cJSON_Delete(f);
                } while (!d.bad && punct(&d, ','));
                if (d.bad || !punct(&d, ']')) return false;
            }
        } else {
            cJSON *v = value(&d);
            if (wanted && k != K_FILES) head[k] = v;
            else cJSON_Delete(v);
        }
        if (d.bad) return false;
        if (punct(&d, '}')) return true;
        if (!punct(&d, ',')) return false;
    }
}

static bool head_is(cJSON *const head[K_N], int k, const char *want) {
    const char *v = cJSON_GetStringValue(head[k]);
    return v && want && strcmp(v, want) == 0;
}

hk_receipt *hk__receipt_load(const char *path, const char *root, const char *repo_dir, const char *commit,
                            const char *variant, const char *meta_sha256) {
    if (!path) return NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = hk__read_file(&text, &len, path, RECEIPT_MAX_BYTES);
    if (rc) {
        hk__log(HK_LOG_DEBUG, "no usable verification receipt %s: %s", path, hk_last_error());
        hk_clear_error();
        return NULL;
    }
    /* (cJSON_Parse read up to the first NUL byte: so does the walk) */
    len = strlen(text);
    hk_receipt *r = hk__receipt_new(meta_sha256);
    cJSON *head[K_N] = {NULL};
    bool files_array = false;
    const char *entry_why = NULL, *why = NULL;
    bool valid = r ? walk_doc(head, &files_array, r, &entry_why, text, len) : false;
    free(text);
    char *rid = root_id(root);
    if (!r) why = "out of memory";
    else if (!valid) why = "not valid JSON";
    else if (!head_is(head, K_FORMAT, RECEIPT_FORMAT)) why = "unknown format";
    else if (!head_is(head, K_ROOT, root) || !head_is(head, K_ROOT_ID, rid)) why = "written for another cache root";
    else if (!head_is(head, K_FOLDER, folder_of(repo_dir)) || !head_is(head, K_COMMIT, commit) ||
             !head_is(head, K_VARIANT, variant))
        why = "written for another variant";
    else if (!head_is(head, K_META, meta_sha256)) why = "metadata.json changed since";
    else if (!files_array) why = "no files list";
    else why = entry_why;
    free(rid);
    for (int k = 0; k < K_N; k++) cJSON_Delete(head[k]);
    if (why) {
        hk__log(HK_LOG_DEBUG, "ignoring verification receipt %s: %s", path, why);
        hk__receipt_free(r);
        return NULL;
    }
    return r;
}

/* The folder of the receipt file at path, made if missing. */
static int make_folder(const char *path) {
    char *dir = hk__strdup(path);
    int rc = dir ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) {
        *strrchr(dir, '/') = '\0';
        rc = hk__mkdirs(dir, 0777);
    }
    free(dir);
    return rc;
}

/* The receipt file at path holds text (its folder made if missing), atomically. */
static int write_text(const char *path, const char *text, size_t len) {
    int rc = make_folder(path);
    return rc == HK_OK ? hk__write_file_atomic(path, text, len) : rc;
}

/* sb's text appended to the file being written, sb emptied (at the end, or once it holds 64 KiB) */
static int flush_text(hk_atomic_file *a, hk_strbuf *sb, bool last) {
    if (sb->oom) {
        hk__atomic_cancel(a);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (!last && sb->len < (64u << 10)) return HK_OK;
    int rc = sb->len ? hk__atomic_write(a, sb->data, sb->len) : HK_OK;
    sb->len = 0;
    if (sb->data) sb->data[0] = '\0';
    return rc;
}

/* Written as text straight from the entries, not through a cJSON tree of them (the document of a
 * 100k-file variant had cost ~25 MB at the end of a pull, its peak), and into the file 64 KiB at a
 * time, not whole first (~10 MB at 100k files, then the pull's peak). */
int hk__receipt_save(const hk_receipt *r, const char *path, const char *root, const char *repo_dir, const char *commit,
                    const char *variant) {
    if (!r || !path) return HK_OK;
    if (r->oom) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *rid = root_id(root);
    if (!rid) return hk__fail(hk__errno_code(errno), "cannot stat cache root %s: %s", root, strerror(errno));
    const char *keys[] = {"format", "cache_root", "cache_root_id", "repo_folder", "commit", "variant",
                          "metadata_sha256"};
    const char *vals[] = {RECEIPT_FORMAT, root, rid, folder_of(repo_dir), commit, variant, r->meta_sha256};
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "{");
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        hk__sb_json_str(&sb, keys[k]);
        hk__sb_append(&sb, ":");
        hk__sb_json_str(&sb, vals[k]);
        hk__sb_append(&sb, ",");
    }
    free(rid);
    hk__sb_append(&sb, "\"files\":[");
    hk_atomic_file a;
    int rc = sb.oom ? hk__fail(HK_ERR_NOMEM, "out of memory") : make_folder(path);
    if (rc == HK_OK) rc = hk__atomic_begin(&a, path);
    for (size_t i = 0; rc == HK_OK && i < r->n; i++) {
        const rfile *f = &r->files[i];
        hk__sb_append(&sb, i ? ",{\"path\":" : "{\"path\":");
        hk__sb_json_str(&sb, f->path);
        hk__sb_printf(&sb, ",\"stat\":\"%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 "\"}", f->size, f->dev,
                      f->ino, f->mtime_ns, f->ctime_ns);
        rc = flush_text(&a, &sb, false);
    }
    if (rc == HK_OK) {
        hk__sb_append(&sb, "]}");
        rc = flush_text(&a, &sb, true); /* (a failed write has removed the temp file) */
        if (rc == HK_OK) rc = hk__atomic_finish(&a);
    }
    hk__sb_free(&sb);
    return rc;
}

int hk__receipt_write_json(const char *path, cJSON *doc) {
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = write_text(path, text, strlen(text));
    free(text);
    return rc;
}

void hk__receipt_remove(const char *path) {
    if (path && unlink(path) != 0 && errno != ENOENT)
        hk__log(HK_LOG_WARN, "cannot remove the verification receipt %s: %s", path, strerror(errno));
}

/* ---- public: where a variant's receipt is, and forgetting it (hubkern/cache.h) -------------- */
int hk_cache_receipt_path(char **out, const char *cache_dir, const char *repo_id, const char *commit,
                          const char *variant) {
    if (out) *out = NULL;
    if (!out || !repo_id || !commit || !variant)
        return hk__fail(HK_ERR_INVALID_ARG, "hk_cache_receipt_path: give an out pointer, a repo id, a commit and a variant");
    if (!hk_repo_id_valid(repo_id)) return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a valid repo id", repo_id);
    char *root = NULL;
    int rc = hk_cache_root(&root, cache_dir, HK_REPO_KERNEL);
    if (rc) return rc;
    char *repo_dir = hk_cache_repo_dir(root, HK_REPO_KERNEL, repo_id);
    char *path = repo_dir ? hk__receipt_path(root, repo_dir, commit, variant) : NULL;
    if (!repo_dir) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    else if (!path && (!folder_ok(commit) || !folder_ok(variant)))
        rc = hk__fail(HK_ERR_INVALID_ARG, "no receipt can be named by commit '%s' and variant '%s'", commit, variant);
    else if (!path) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    free(repo_dir);
    free(root);
    *out = path;
    return rc;
}

int hk_cache_receipt_forget(const char *cache_dir, const char *repo_id, const char *commit, const char *variant) {
    char *path = NULL;
    int rc = hk_cache_receipt_path(&path, cache_dir, repo_id, commit, variant);
    if (rc) return rc;
    if (unlink(path) != 0 && errno != ENOENT)
        rc = hk__fail(hk__errno_code(errno), "cannot remove the verification receipt %s: %s", path, strerror(errno));
    free(path);
    return rc;
}
