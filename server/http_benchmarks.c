/* Benchmark submissions: POST /api/kernels/{repo}/benchmarks stores what `kernels benchmark --upload`
 * sends (kernels 0.17.2 submit_benchmark: JSON body, Authorization: Bearer <HF token>, success is a
 * 200), GET lists them newest first.
 *
 * Storage: one file per submission, <store>/<repo folder>/hubkern-benchmarks/<id>.json, where id is
 * "<unix time in ns, 19 digits>-<8 random hex>" (names sort by arrival). huggingface_hub's cache
 * scan reads only snapshots/, refs/ and blobs/ of a repo folder, so the extra folder leaves the store
 * a valid cache; removing the repo (hf cache rm, hubkern cache rm) removes its benchmarks. Each file
 * is written to a temp name, fsynced, renamed into place and the folder fsynced: a submission is
 * either whole or absent, and a failed one leaves nothing.
 *
 * Uploads need a write token ("TOKEN::write", "TOKEN:org:write"): on a mirror started without
 * --token they are refused (403), so are read tokens (403), and a token scoped to namespaces may only
 * submit for repos of those namespaces.
 *
 * Quota, per repo: at most --benchmark-quota-count submissions and --benchmark-quota-bytes bytes are
 * kept. A new submission is always stored, and the oldest ones are evicted until both bounds hold
 * again: a fleet's latest results matter most, and refusing would let one writer who filled the
 * quota lock every other writer out. */
#include "server/srv_bench.h"
#include "server/srv_http.h"
#include "util/vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A page of GET answers holds at most this many bytes of records (at least one record). */
#define PAGE_BYTES_MAX (8u << 20)
#define ID_LEN 28 /* 19 digits, '-', 8 hex */

static bool is_id(const char *s, size_t n) {
    if (n != ID_LEN || s[19] != '-') return false;
    for (size_t i = 0; i < 19; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    for (size_t i = 20; i < ID_LEN; i++)
        if (!strchr("0123456789abcdef", s[i]) || !s[i]) return false;
    return true;
}

static bool is_record_name(const char *name) {
    size_t n = strlen(name);
    return n == ID_LEN + 5 && strcmp(name + ID_LEN, ".json") == 0 && is_id(name, ID_LEN);
}

static char *bench_dir(const repo_ref *repo) { return hk__path_join(repo->dir, HK_BENCH_DIR); }

/* Flush the folder entry of a renamed file. */
static int sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return hk__fail(HK_ERR_IO, "cannot open %s: %s", dir, strerror(errno));
    int rc = fsync(fd) == 0 ? HK_OK : hk__fail(HK_ERR_IO, "cannot sync %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

/* The record as stored: id, createdAt, repoId, then the submission's fields. */
static char *make_record(char id[ID_LEN + 1], char created[32], cJSON *doc, const char *repo_id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char rnd[9];
    hk__random_hex8(rnd);
    snprintf(id, ID_LEN + 1, "%019lld-%s", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, rnd);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(created, 32, "%.19s.%03dZ", base, (int)(ts.tv_nsec / 1000000L) % 1000);
    cJSON *rec = cJSON_CreateObject();
    if (!rec || !cJSON_AddStringToObject(rec, "id", id) || !cJSON_AddStringToObject(rec, "createdAt", created) ||
        !cJSON_AddStringToObject(rec, "repoId", repo_id)) {
        cJSON_Delete(rec);
        return NULL;
    }
    while (doc->child) {
        cJSON *it = cJSON_DetachItemViaPointer(doc, doc->child);
        cJSON_AddItemToObject(rec, it->string, it); /* the key is copied before the old one is freed */
    }
    char *text = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    return text;
}

static int list_records(char ***out, size_t *n, const char *dir);

/* Past the repo's quota (count or bytes), the oldest records go; `keep` (the one just stored) stays.
 * Concurrent uploads may both evict: a record already gone is not an error. */
static void evict_over_quota(srv_server *srv, const char *dir, const char *keep, const char *repo_id) {
    char **names = NULL;
    size_t n = 0;
    if (list_records(&names, &n, dir) != HK_OK) {
        hk__log(HK_LOG_WARN, "benchmarks of %s: quota not applied: %s", repo_id, hk_last_error());
        hk_clear_error();
    }
    uint64_t bytes = 0, evicted = 0;
    for (size_t i = 0; i < n; i++) { /* newest first: the first ones within both bounds stay */
        char *path = hk__path_join(dir, names[i]);
        struct stat st;
        uint64_t size = path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        bool is_new = strncmp(names[i], keep, ID_LEN) == 0;
        if (!is_new && (i >= srv->bench_quota_count || bytes + size > srv->bench_quota_bytes)) {
            if (path && (unlink(path) == 0 || errno == ENOENT)) evicted++;
        } else {
            bytes += size;
        }
        free(path);
        free(names[i]);
    }
    free(names);
    if (evicted) {
        hk__log(HK_LOG_INFO, "benchmarks of %s: %llu oldest evicted (quota %llu submissions, %llu bytes)", repo_id,
                (unsigned long long)evicted, (unsigned long long)srv->bench_quota_count,
                (unsigned long long)srv->bench_quota_bytes);
        if (sync_dir(dir) != HK_OK) hk_clear_error();
    }
}

static enum MHD_Result handle_post(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                   const token_spec *who) {
    if (srv->n_tokens == 0)
        return srv_send_error(c, ctx, 403, "Forbidden", NULL, "This mirror accepts no benchmark uploads: it was "
                                 "started without --token (uploads need a token)");
    if (!srv_token_allows(who, repo))
        return srv_send_error(c, ctx, 403, "Forbidden", NULL, "This token may not submit benchmarks for %s",
                                 repo->id);
    if (!srv_token_may_write(who, repo)) /* reading a mirror is not writing to it */
        return srv_send_error(c, ctx, 403, "Forbidden", NULL, "This token is read-only: benchmark uploads need a "
                                 "write token (--token TOKEN::write or TOKEN:ORG:write)");
    if (!repo->dir) return srv_repo_not_found(c, ctx);
    if (ctx->body_too_big || ctx->body.len > srv->bench_max)
        return srv_send_error(c, ctx, 413, "PayloadTooLarge", NULL,
                                 "Benchmark submission too large: at most %llu bytes",
                                 (unsigned long long)srv->bench_max);
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (!ct || strncasecmp(ct, "application/json", 16) != 0 || (ct[16] && ct[16] != ';' && ct[16] != ' '))
        return srv_send_error(c, ctx, 415, "UnsupportedMediaType", NULL,
                                 "A benchmark submission is sent as Content-Type: application/json");
    const char *end = NULL;
    cJSON *doc = ctx->body.len ? cJSON_ParseWithLengthOpts(ctx->body.data, ctx->body.len, &end, false) : NULL;
    if (!doc) {
        size_t at = end && ctx->body.data ? (size_t)(end - ctx->body.data) : 0;
        return srv_send_error(c, ctx, 400, "BadRequest", NULL, "Malformed JSON in the benchmark submission (at "
                                 "byte %zu)", at);
    }
    /* trailing bytes after the JSON value (other than whitespace) are malformed too */
    for (const char *p = end; p && p < ctx->body.data + ctx->body.len; p++)
        if (!strchr(" \t\r\n", *p) || !*p) {
            cJSON_Delete(doc);
            return srv_send_error(c, ctx, 400, "BadRequest", NULL, "Malformed JSON in the benchmark submission "
                                     "(data after the value at byte %zu)", (size_t)(p - ctx->body.data));
        }
    char why[256];
    if (!srv_bench_check(doc, why, sizeof why)) {
        cJSON_Delete(doc);
        return srv_send_error(c, ctx, 422, "InvalidBenchmark", NULL, "Invalid benchmark submission: %s", why);
    }
    char id[ID_LEN + 1], created[32];
    char *text = make_record(id, created, doc, repo->id);
    cJSON_Delete(doc);
    char *dir = text ? bench_dir(repo) : NULL;
    char *name = dir ? hk__asprintf("%s.json", id) : NULL;
    char *path = name ? hk__path_join(dir, name) : NULL;
    int rc = path ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = hk__mkdirs(dir, 0755);
    if (rc == HK_OK) rc = hk__write_file_atomic(path, text, strlen(text));
    if (rc == HK_OK) rc = sync_dir(dir);
    enum MHD_Result ret;
    if (rc != HK_OK) {
        if (path) unlink(path); /* not acknowledged: not kept */
        hk__log(HK_LOG_WARN, "benchmark for %s not stored: %s", repo->id, hk_last_error());
        hk_clear_error();
        ret = srv_send_error(c, ctx, 500, NULL, NULL, "The benchmark submission could not be stored");
    } else {
        hk__log(HK_LOG_INFO, "benchmark %s stored for %s", id, repo->id);
        evict_over_quota(srv, dir, id, repo->id);
        hk_strbuf sb;
        hk__sb_init(&sb);
        hk__sb_printf(&sb, "{\"id\":\"%s\",\"createdAt\":\"%s\",\"repoId\":", id, created);
        hk__sb_json_str(&sb, repo->id);
        hk__sb_append(&sb, "}");
        ret = srv_send_json(c, ctx, 200, &sb, NULL);
    }
    free(text);
    free(dir);
    free(name);
    free(path);
    return ret;
}

static int cmp_desc(const void *a, const void *b) { return strcmp(*(char *const *)b, *(char *const *)a); }

/* Record file names of the repo, newest first (*n = 0 when there is no folder). */
static int list_records(char ***out, size_t *n, const char *dir) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? HK_OK : hk__fail(HK_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    size_t cap = 0;
    int rc = HK_OK;
    for (struct dirent *e; rc == HK_OK && (e = readdir(d));) {
        if (!is_record_name(e->d_name)) continue; /* temp files of writes in progress, strays */
        rc = HK_VEC_RESERVE(*out, cap, *n + 1);
        if (rc == HK_OK && !((*out)[*n] = hk__strdup(e->d_name))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK) (*n)++;
    }
    closedir(d);
    if (*n) qsort(*out, *n, sizeof **out, cmp_desc);
    return rc;
}

static enum MHD_Result handle_get(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo) {
    if (!repo->dir) return srv_repo_not_found(c, ctx);
    unsigned long limit = HK_BENCH_PAGE_DEFAULT;
    const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    if (ls) {
        char *e = NULL;
        errno = 0;
        limit = strtoul(ls, &e, 10);
        if (!*ls || *e || errno || limit < 1 || limit > HK_BENCH_PAGE_MAX)
            return srv_send_error(c, ctx, 400, "BadRequest", NULL, "Invalid limit: a number from 1 to %d",
                                     HK_BENCH_PAGE_MAX);
    }
    const char *cursor = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    if (cursor && !is_id(cursor, strlen(cursor)))
        return srv_send_error(c, ctx, 400, "BadRequest", NULL, "Invalid cursor");
    char *dir = bench_dir(repo);
    char **names = NULL;
    size_t n = 0;
    if (!dir || list_records(&names, &n, dir) != HK_OK) {
        hk__log(HK_LOG_WARN, "benchmarks of %s: %s", repo->id, dir ? hk_last_error() : "out of memory");
        hk_clear_error();
        free(dir);
        return srv_send_error(c, ctx, 500, NULL, NULL, "The benchmarks could not be listed");
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "[");
    size_t emitted = 0, i = 0;
    const char *last = NULL;
    for (; i < n && emitted < limit && sb.len < PAGE_BYTES_MAX; i++) {
        if (cursor && strncmp(names[i], cursor, ID_LEN) >= 0) continue; /* newer than the cursor, or it */
        char *path = hk__path_join(dir, names[i]), *text = NULL;
        size_t len = 0;
        if (path && hk__read_file(&text, &len, path, (size_t)srv->bench_max + 4096) == HK_OK) {
            cJSON *j = cJSON_ParseWithLength(text, len);
            if (j) { /* records were checked when stored; an unreadable one is skipped, not served */
                hk__sb_printf(&sb, "%s%s", emitted ? "," : "", text);
                emitted++;
                last = names[i];
            }
            cJSON_Delete(j);
        }
        hk_clear_error();
        free(text);
        free(path);
    }
    hk__sb_append(&sb, "]");
    bool more = false;
    for (; i < n && !more; i++) more = !cursor || strncmp(names[i], cursor, ID_LEN) < 0;
    char *link = NULL;
    if (more && last) {
        char *base = srv_base_url(srv);
        hk_strbuf lk;
        hk__sb_init(&lk);
        hk__sb_printf(&lk, "<%s/api/kernels/", base ? base : "");
        hk__sb_pct_encode(&lk, repo->id, true);
        hk__sb_printf(&lk, "/benchmarks?limit=%lu&cursor=%.*s>; rel=\"next\"", limit, ID_LEN, last);
        link = hk__sb_steal(&lk);
        free(base);
    }
    enum MHD_Result ret = srv_send_json(c, ctx, 200, &sb, link);
    free(link);
    for (size_t k = 0; k < n; k++) free(names[k]);
    free(names);
    free(dir);
    return ret;
}

bool srv_is_bench_post(const seglist *s, const char *method) {
    return strcmp(method, "POST") == 0 && s->n >= 5 && srv_seg_is(s, 0, "api") && srv_seg_is(s, 1, "kernels") &&
           srv_seg_is(s, s->n - 1, "benchmarks");
}

enum MHD_Result srv_handle_benchmarks(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                         const repo_ref *repo, const char *method, const token_spec *who) {
    if (!hk_repo_id_valid(repo->id) || !strchr(repo->id, '/'))
        return srv_send_error(c, ctx, 400, "BadRequest", NULL, "Invalid repo id: expected org/name");
    if (strcmp(method, "POST") == 0) return handle_post(srv, c, ctx, repo, who);
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        if (!srv_token_allows(who, repo))
            return srv_send_error(c, ctx, 403, "GatedRepo", NULL,
                                     "Access to %s is restricted: this token does not grant it", repo->id);
        return handle_get(srv, c, ctx, repo);
    }
    return srv_method_not_allowed(c, ctx);
}
