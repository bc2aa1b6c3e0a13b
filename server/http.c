/* hubkern serve: a Hub-compatible mirror over a huggingface_hub-layout store, on libmicrohttpd.
 *
 * Routes (T = models | datasets | spaces | kernels; {repo} = org/name or name):
 *   GET  /api/T/{repo}                         repo info at main
 *   GET  /api/T/{repo}/revision/{rev}          repo info (sha, siblings; ?blobs=true adds sizes, LFS)
 *   GET  /api/T/{repo}/tree/{rev}[/{path}]     listing (?recursive=true), paged with Link rel="next"
 *   POST /api/T/{repo}/paths-info/{rev}        entries for paths=... (form) or {"paths": [...]} (JSON)
 *   GET  /api/T/{repo}/refs                    branches, tags (?include_prs=1 adds pullRequests)
 *   GET  /api/organizations/{org}/overview     trustedKernelPublisher from configuration
 *   HEAD/GET /[datasets/|spaces/|kernels/]{repo}/resolve/{rev}/{path}   file content and metadata
 *   HEAD/GET /lfs/T/{repo}/{sha256}?commit=&sig=                         blob route behind --lfs-302
 * URLs are taken raw (libmicrohttpd's unescaping is switched off) and every segment is decoded
 * here, so "refs%2Fpr%2F1" stays one revision and an encoded '/' never splits a path. */
#include "server/srv_internal.h"

#include "internal.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEGS 256
#define MAX_URL 8192
#define MAX_BODY (1u << 20)

typedef struct token_spec {
    char *token;
    char **orgs; /* NULL = every namespace */
    size_t n_orgs;
} token_spec;

struct hk_server {
    struct MHD_Daemon *daemon;
    hk_store *store;
    unsigned port;
    char *bound_base; /* "http://host:port" of the bound socket */
    char *public_url;
    unsigned page_size;
    token_spec *tokens;
    size_t n_tokens;
    char **trusted;
    size_t n_trusted;
    bool lfs_302;
    bool access_log;
    uint64_t fault_cut_after;
    atomic_uint fault_left;
    unsigned char lfs_key[32];
};

typedef struct req_ctx {
    char method[8];
    char *url; /* sanitised, for the access log */
    hk_strbuf body;
    bool body_too_big;
    unsigned status;
    uint64_t bytes;
    struct timespec start;
} req_ctx;

/* ---- small helpers -------------------------------------------------------------------------- */
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n). NULL for a bad escape or an encoded NUL. `plus_space` for form bodies. */
static char *pct_decode(const char *s, size_t n, bool plus_space) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            out[o++] = ' ';
        } else if (c == '\0') {
            free(out);
            return NULL;
        } else {
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return out;
}

/* Percent-encode for URLs we emit; '/' kept when keep_slash. */
static void url_encode(hk_strbuf *sb, const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (c == '/' && keep_slash)) {
            char ch = (char)c;
            hk_sb_append_n(sb, &ch, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            hk_sb_append_n(sb, e, 3);
        }
    }
}

static void json_str(hk_strbuf *sb, const char *s) {
    hk_sb_append_n(sb, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"') hk_sb_append_n(sb, "\\\"", 2);
        else if (c == '\\') hk_sb_append_n(sb, "\\\\", 2);
        else if (c < 0x20) hk_sb_printf(sb, "\\u%04x", c);
        else {
            char ch = (char)c;
            hk_sb_append_n(sb, &ch, 1);
        }
    }
    hk_sb_append_n(sb, "\"", 1);
}

/* A copy safe for a header value or a log line: printable ASCII only. */
static char *sanitize(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) n = max;
    char *o = malloc(n + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        o[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    o[n] = '\0';
    return o;
}

static bool query_true(struct MHD_Connection *c, const char *key) {
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

static void iso_time(char out[32], time_t t) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

/* ---- responses ------------------------------------------------------------------------------ */
static const char k_expose[] =
    "X-Repo-Commit, X-Request-Id, X-Error-Code, X-Error-Message, X-Total-Count, ETag, Link, Accept-Ranges, "
    "Content-Range, X-Linked-Size, X-Linked-ETag";

static enum MHD_Result queue(struct MHD_Connection *c, req_ctx *ctx, unsigned status, struct MHD_Response *r,
                             uint64_t body_bytes) {
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Expose-Headers", k_expose);
    ctx->status = status;
    ctx->bytes = body_bytes;
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, req_ctx *ctx, unsigned status, hk_strbuf *sb,
                                 const char *link) {
    size_t len = sb->len;
    char *data = hk_sb_steal(sb);
    if (!data) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    if (link) MHD_add_response_header(r, "Link", link);
    return queue(c, ctx, status, r, len);
}

/* Errors the way the Hub signals them: X-Error-Code, X-Error-Message, {"error": ...}. */
static enum MHD_Result send_error(struct MHD_Connection *c, req_ctx *ctx, unsigned status, const char *code,
                                  const char *commit, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result send_error(struct MHD_Connection *c, req_ctx *ctx, unsigned status, const char *code,
                                  const char *commit, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hk_strbuf msg;
    hk_sb_init(&msg);
    hk_sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    hk_strbuf body;
    hk_sb_init(&body);
    hk_sb_append(&body, "{\"error\":");
    json_str(&body, msg.data ? msg.data : "error");
    hk_sb_append(&body, "}");
    size_t len = body.len;
    char *data = hk_sb_steal(&body);
    char *hmsg = sanitize(msg.data ? msg.data : "error", 512);
    hk_sb_free(&msg);
    if (!data || !hmsg) {
        free(data);
        free(hmsg);
        return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        free(hmsg);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    if (code) MHD_add_response_header(r, "X-Error-Code", code);
    MHD_add_response_header(r, "X-Error-Message", hmsg);
    if (commit && *commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    free(hmsg);
    return queue(c, ctx, status, r, len);
}

static enum MHD_Result repo_not_found(struct MHD_Connection *c, req_ctx *ctx) {
    return send_error(c, ctx, 404, "RepoNotFound", NULL, "Repository not found");
}

/* 404 RevisionNotFound for a revision that did not resolve: clears the resolve error and names the
 * revision as the client sent it (sanitized, at most 200 bytes). */
static enum MHD_Result rev_not_found(struct MHD_Connection *c, req_ctx *ctx, const char *rev) {
    hk_clear_error();
    char *m = sanitize(rev ? rev : "", 200);
    enum MHD_Result ret = send_error(c, ctx, 404, "RevisionNotFound", NULL, "Invalid rev id: %s", m ? m : "");
    free(m);
    return ret;
}

/* ---- request routing state ------------------------------------------------------------------ */
typedef struct seglist {
    const char *p[MAX_SEGS];
    size_t len[MAX_SEGS];
    size_t n;
} seglist;

static bool seg_is(const seglist *s, size_t i, const char *lit) {
    return i < s->n && s->len[i] == strlen(lit) && memcmp(s->p[i], lit, s->len[i]) == 0;
}

static char *seg_decode(const seglist *s, size_t i) { return pct_decode(s->p[i], s->len[i], false); }

/* Decode segments [from, n) into a '/'-joined repo path. An encoded '/' joins like a real one:
 * huggingface_hub sends tree paths as "build%2Fvariant". The joined result must be a safe relative
 * path, so "..%2F.." is refused the same as "../..". NULL if any segment is bad (bad escape, encoded
 * NUL) or the result is not safe; *bad set in that case. */
static char *join_path(const seglist *s, size_t from, bool *bad) {
    *bad = false;
    hk_strbuf sb;
    hk_sb_init(&sb);
    for (size_t i = from; i < s->n; i++) {
        char *d = seg_decode(s, i);
        if (!d) {
            free(d);
            hk_sb_free(&sb);
            *bad = true;
            return NULL;
        }
        if (i > from) hk_sb_append(&sb, "/");
        hk_sb_append(&sb, d);
        free(d);
    }
    char *out = hk_sb_steal(&sb);
    if (out && *out && !hk_path_is_safe_relative(out)) {
        free(out);
        *bad = true;
        return NULL;
    }
    return out;
}

typedef struct repo_ref {
    hk_repo_type type;
    char *id;       /* decoded repo id */
    char *dir;      /* repo folder, NULL when absent */
    size_t next;    /* index of the first segment after the repo id */
} repo_ref;

static void repo_ref_free(repo_ref *r) {
    free(r->id);
    free(r->dir);
}

/* Parse a repo id at segment `at`: "org/name" when that repo exists or when the segment after
 * "org" is not an action keyword; else "name". */
static bool parse_repo(repo_ref *out, hk_server *srv, const seglist *s, size_t at, hk_repo_type type,
                       const char *const *keywords) {
    memset(out, 0, sizeof *out);
    out->type = type;
    if (at >= s->n) return false;
    char *a = seg_decode(s, at);
    char *b = at + 1 < s->n ? seg_decode(s, at + 1) : NULL;
    if (!a) {
        free(b);
        return false;
    }
    char *two = b ? hk_asprintf("%s/%s", a, b) : NULL;
    char *dir2 = two ? hk_store_repo_dir(srv->store, type, two) : NULL;
    char *dir1 = dir2 ? NULL : hk_store_repo_dir(srv->store, type, a);
    bool b_is_kw = false;
    for (size_t k = 0; b && keywords[k]; k++)
        if (strcmp(b, keywords[k]) == 0) b_is_kw = true;
    if (dir2) {
        out->id = two;
        out->dir = dir2;
        out->next = at + 2;
        two = NULL;
    } else if (dir1 || !b || b_is_kw) {
        out->id = hk_strdup(a);
        out->dir = dir1;
        out->next = at + 1;
    } else {
        out->id = two;
        out->next = at + 2;
        two = NULL;
    }
    free(a);
    free(b);
    free(two);
    return out->id != NULL;
}

/* ---- auth ------------------------------------------------------------------------------------ */
typedef enum { AUTH_OK, AUTH_MISSING, AUTH_INVALID } auth_result;

static auth_result check_token(hk_server *srv, struct MHD_Connection *c, const token_spec **who) {
    *who = NULL;
    if (srv->n_tokens == 0) return AUTH_OK;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || !*h) return AUTH_MISSING;
    if (strncasecmp(h, "Bearer ", 7) != 0) return AUTH_INVALID;
    const char *t = h + 7;
    while (*t == ' ') t++;
    size_t tl = strlen(t);
    for (size_t i = 0; i < srv->n_tokens; i++) {
        size_t kl = strlen(srv->tokens[i].token);
        if (kl == tl && CRYPTO_memcmp(srv->tokens[i].token, t, tl) == 0) {
            *who = &srv->tokens[i];
            return AUTH_OK;
        }
    }
    return AUTH_INVALID;
}

static bool token_allows(const token_spec *who, const char *repo_id) {
    if (!who || !who->orgs) return true;
    const char *slash = strchr(repo_id, '/');
    size_t n = slash ? (size_t)(slash - repo_id) : strlen(repo_id);
    for (size_t i = 0; i < who->n_orgs; i++)
        if (strlen(who->orgs[i]) == n && strncmp(who->orgs[i], repo_id, n) == 0) return true;
    return false;
}

/* ---- file responses --------------------------------------------------------------------------- */
typedef struct cut_reader {
    int fd;
    uint64_t offset, cut;
} cut_reader;

static ssize_t cut_read(void *cls, uint64_t pos, char *buf, size_t max) {
    cut_reader *r = cls;
    if (pos >= r->cut) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = max;
    if (n > r->cut - pos) n = (size_t)(r->cut - pos);
    ssize_t got = pread(r->fd, buf, n, (off_t)(r->offset + pos));
    if (got <= 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    return got;
}

static void cut_free(void *cls) {
    cut_reader *r = cls;
    close(r->fd);
    free(r);
}

static void add_file_headers(struct MHD_Response *r, const hk_sfile *f, const char *commit) {
    char q[80];
    snprintf(q, sizeof q, "\"%s\"", f->etag);
    if (commit && *commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    MHD_add_response_header(r, "ETag", q);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    if (f->lfs) {
        char sz[32];
        snprintf(sz, sizeof sz, "%llu", (unsigned long long)f->size);
        MHD_add_response_header(r, "X-Linked-Etag", q);
        MHD_add_response_header(r, "X-Linked-Size", sz);
    }
}

/* Parse a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range. 0: no usable Range (serve 200),
 * 1: range in *start,*len, -1: unsatisfiable (416). */
static int parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len) {
    if (!h) return 0;
    while (*h == ' ') h++;
    if (strncasecmp(h, "bytes=", 6) != 0) return 0;
    const char *p = h + 6;
    if (strchr(p, ',')) return 0; /* multi-range: answered with the whole file */
    while (*p == ' ') p++;
    char *end;
    if (*p == '-') {
        if (p[1] < '0' || p[1] > '9') return 0;
        errno = 0;
        unsigned long long n = strtoull(p + 1, &end, 10);
        if (errno || (*end && *end != ' ')) return 0;
        if (n == 0 || size == 0) return -1;
        if (n > size) n = size;
        *start = size - n;
        *len = n;
        return 1;
    }
    if (*p < '0' || *p > '9') return 0;
    errno = 0;
    unsigned long long a = strtoull(p, &end, 10);
    if (errno || *end != '-') return 0;
    p = end + 1;
    unsigned long long b;
    if (*p == '\0' || *p == ' ') {
        b = size ? size - 1 : 0;
    } else {
        if (*p < '0' || *p > '9') return 0;
        errno = 0;
        b = strtoull(p, &end, 10);
        if (errno || (*end && *end != ' ')) return 0;
        if (b < a) return 0; /* invalid: ignore */
        if (size && b >= size) b = size - 1;
    }
    if (a >= size) return -1;
    *start = a;
    *len = b - a + 1;
    return 1;
}

/* Serve an opened file (takes ownership of f->fd). */
static enum MHD_Result serve_file(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  hk_sfile *f, const char *commit) {
    bool is_get = strcmp(method, "GET") == 0;
    char q[80];
    snprintf(q, sizeof q, "\"%s\"", f->etag);
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
    if (inm && (strcmp(inm, q) == 0 || strcmp(inm, f->etag) == 0 || strcmp(inm, "*") == 0)) {
        close(f->fd);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        add_file_headers(r, f, commit);
        return queue(c, ctx, 304, r, 0);
    }
    uint64_t start = 0, len = f->size;
    unsigned status = 200;
    int rr = parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range"), f->size, &start, &len);
    if (rr < 0) {
        close(f->fd);
        hk_strbuf b;
        hk_sb_init(&b);
        hk_sb_append(&b, "{\"error\":\"Requested range not satisfiable\"}");
        size_t blen = b.len;
        char *data = hk_sb_steal(&b);
        struct MHD_Response *r = data ? MHD_create_response_from_buffer(blen, data, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(data);
            return MHD_NO;
        }
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)f->size);
        MHD_add_response_header(r, "Content-Range", cr);
        add_file_headers(r, f, commit);
        MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
        return queue(c, ctx, 416, r, blen);
    }
    if (rr > 0) status = 206;
    struct MHD_Response *r = NULL;
    bool cut = false;
    if (is_get && srv->fault_cut_after && len > srv->fault_cut_after) {
        unsigned left = atomic_load(&srv->fault_left);
        while (left > 0 && !atomic_compare_exchange_weak(&srv->fault_left, &left, left - 1)) {
        }
        cut = left > 0;
    }
    if (len == 0) {
        close(f->fd);
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else if (cut) {
        cut_reader *cr = malloc(sizeof *cr);
        if (cr) {
            cr->fd = f->fd;
            cr->offset = start;
            cr->cut = srv->fault_cut_after;
            r = MHD_create_response_from_callback(len, 64 * 1024, cut_read, cr, cut_free);
            if (!r) free(cr);
        }
        if (!r) close(f->fd);
        else hk_log(HK_LOG_INFO, "fault injection: cutting this response after %llu bytes",
                    (unsigned long long)srv->fault_cut_after);
    } else {
        r = MHD_create_response_from_fd_at_offset64(len, f->fd, start);
        if (!r) close(f->fd);
    }
    f->fd = -1;
    if (!r) return MHD_NO;
    add_file_headers(r, f, commit);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    if (status == 206) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)start, (unsigned long long)(start + len - 1),
                 (unsigned long long)f->size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    return queue(c, ctx, status, r, is_get ? len : 0);
}

/* ---- base URL for links ------------------------------------------------------------------------ */
static char *base_url(hk_server *srv, struct MHD_Connection *c) {
    if (srv->public_url) return hk_strdup(srv->public_url);
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    bool ok = host && *host && strlen(host) < 256;
    for (const char *p = host; ok && *p; p++) {
        char ch = *p;
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
             ch == '-' || ch == ':' || ch == '[' || ch == ']';
    }
    return ok ? hk_asprintf("http://%s", host) : hk_strdup(srv->bound_base);
}

/* ---- the LFS blob route (--lfs-302) ------------------------------------------------------------ */
static void lfs_sig(hk_server *srv, char out[65], hk_repo_type type, const char *repo_id, const char *sha,
                    const char *commit) {
    char *msg = hk_asprintf("%s/%s/%s/%s", hk_repo_type_plural(type), repo_id, sha, commit);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    out[0] = '\0';
    if (!msg) return;
    if (HMAC(EVP_sha256(), srv->lfs_key, sizeof srv->lfs_key, (const unsigned char *)msg, strlen(msg), mac, &ml))
        hk_hex(out, mac, ml > 32 ? 32 : ml);
    free(msg);
}

static enum MHD_Result redirect_lfs(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                    hk_sfile *f, const char *commit) {
    char sig[65];
    lfs_sig(srv, sig, repo->type, repo->id, f->etag, commit);
    char *base = base_url(srv, c);
    char *loc = base ? hk_asprintf("%s/lfs/%s/%s/%s?commit=%s&sig=%s", base, hk_repo_type_plural(repo->type), repo->id,
                                   f->etag, commit, sig)
                     : NULL;
    free(base);
    close(f->fd);
    f->fd = -1;
    if (!loc) return MHD_NO;
    hk_strbuf b;
    hk_sb_init(&b);
    hk_sb_printf(&b, "Found. Redirecting to %s", loc);
    size_t blen = b.len;
    char *data = hk_sb_steal(&b);
    struct MHD_Response *r = data ? MHD_create_response_from_buffer(blen, data, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(data);
        free(loc);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    add_file_headers(r, f, commit);
    free(loc);
    return queue(c, ctx, 302, r, blen);
}

static enum MHD_Result handle_lfs(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  const seglist *s) {
    /* /lfs/T/{repo}/{sha256} */
    hk_repo_type type;
    char *t = s->n > 1 ? seg_decode(s, 1) : NULL;
    int trc = t ? hk_repo_type_parse(&type, t) : HK_ERR_INVALID_ARG;
    free(t);
    hk_clear_error();
    if (trc || s->n < 4) return send_error(c, ctx, 404, NULL, NULL, "Not found");
    static const char *const none[] = {NULL};
    repo_ref repo;
    if (!parse_repo(&repo, srv, s, 2, type, none) || repo.next + 1 != s->n || !repo.dir) {
        repo_ref_free(&repo);
        return send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    char *sha = seg_decode(s, repo.next);
    const char *commit = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "commit");
    const char *sig = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sig");
    char want[65];
    bool ok = sha && commit && sig && strlen(commit) == 40 && hk_is_hex(commit, 40);
    if (ok) {
        lfs_sig(srv, want, type, repo.id, sha, commit);
        ok = strlen(sig) == 64 && CRYPTO_memcmp(sig, want, 64) == 0;
    }
    enum MHD_Result ret;
    hk_sfile f;
    if (!ok) {
        ret = send_error(c, ctx, 403, NULL, NULL, "Invalid or missing blob signature");
    } else if (hk_store_open_blob(&f, srv->store, repo.dir, sha) != HK_OK) {
        hk_clear_error();
        ret = send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
    } else {
        ret = serve_file(srv, c, ctx, method, &f, commit);
    }
    free(sha);
    repo_ref_free(&repo);
    return ret;
}

/* ---- JSON shapes ------------------------------------------------------------------------------- */
static void json_entry(hk_strbuf *sb, const hk_sentry *e) {
    if (e->is_dir) {
        hk_sb_append(sb, "{\"type\":\"directory\",\"oid\":\"");
        hk_sb_append(sb, e->oid);
        hk_sb_append(sb, "\",\"size\":0,\"path\":");
        json_str(sb, e->path);
        hk_sb_append(sb, "}");
        return;
    }
    hk_sb_printf(sb, "{\"type\":\"file\",\"oid\":\"%s\",\"size\":%llu,\"path\":", e->oid, (unsigned long long)e->size);
    json_str(sb, e->path);
    if (e->lfs)
        hk_sb_printf(sb, ",\"lfs\":{\"oid\":\"%s\",\"size\":%llu,\"pointerSize\":%zu}", e->etag,
                     (unsigned long long)e->size, e->pointer_size);
    hk_sb_append(sb, "}");
}

/* Resolve a revision given as segments [at, at+k) for k = 1..4, longest-known first is not
 * needed: the single decoded segment is tried first, then raw "refs/pr/1"-style joins. */
static int resolve_rev_segs(char commit[65], char **rev_out, size_t *used, const repo_ref *repo, const seglist *s,
                            size_t at, bool rest_is_rev) {
    *rev_out = NULL;
    *used = 0;
    if (at >= s->n) return hk_fail(HK_ERR_REVISION_NOT_FOUND, "no revision");
    size_t max_k = rest_is_rev ? s->n - at : (s->n - at > 4 ? 4 : s->n - at);
    size_t first_k = rest_is_rev ? max_k : 1;
    for (size_t k = first_k; k >= 1 && k <= max_k; k = rest_is_rev ? 0 : k + 1) {
        hk_strbuf sb;
        hk_sb_init(&sb);
        bool bad = false;
        for (size_t i = 0; i < k; i++) {
            char *d = seg_decode(s, at + i);
            if (!d) {
                bad = true;
                break;
            }
            if (i) hk_sb_append(&sb, "/");
            hk_sb_append(&sb, d);
            free(d);
        }
        char *rev = hk_sb_steal(&sb);
        if (bad || !rev) {
            free(rev);
            break;
        }
        if (hk_store_resolve_rev(commit, repo->dir, rev) == HK_OK) {
            free(*rev_out);
            *rev_out = rev;
            *used = k;
            return HK_OK;
        }
        if (k == first_k) *rev_out = rev; /* reported in the error */
        else free(rev);
        if (rest_is_rev) break;
    }
    hk_clear_error();
    if (!*rev_out) *rev_out = hk_strdup("");
    return hk_fail(HK_ERR_REVISION_NOT_FOUND, "revision not found");
}

static enum MHD_Result handle_repo_info(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                        const char *commit) {
    const hk_listing *lp = NULL;
    if (hk_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        return send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    const hk_listing l = *lp;
    bool blobs = query_true(c, "blobs");
    char *snap = hk_asprintf("%s/snapshots/%s", repo->dir, commit);
    struct stat st;
    time_t mtime = snap && stat(snap, &st) == 0 ? st.st_mtime : time(NULL);
    free(snap);
    char when[32];
    iso_time(when, mtime);
    const char *slash = strchr(repo->id, '/');
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_append(&sb, "{\"_id\":");
    json_str(&sb, repo->id);
    hk_sb_append(&sb, ",\"id\":");
    json_str(&sb, repo->id);
    if (repo->type == HK_REPO_MODEL) {
        hk_sb_append(&sb, ",\"modelId\":");
        json_str(&sb, repo->id);
    }
    if (slash) {
        char *author = hk_strndup(repo->id, (size_t)(slash - repo->id));
        hk_sb_append(&sb, ",\"author\":");
        json_str(&sb, author ? author : "");
        free(author);
    }
    hk_sb_printf(&sb,
                 ",\"sha\":\"%s\",\"lastModified\":\"%s\",\"createdAt\":\"%s\",\"private\":false,\"gated\":false,"
                 "\"disabled\":false,\"downloads\":0,\"likes\":0,\"tags\":[],\"usedStorage\":%llu,\"siblings\":[",
                 commit, when, when, (unsigned long long)l.total_bytes);
    bool first = true;
    for (size_t i = 0; i < l.n; i++) {
        const hk_sentry *e = &l.v[i];
        if (e->is_dir) continue;
        if (!first) hk_sb_append(&sb, ",");
        first = false;
        hk_sb_append(&sb, "{\"rfilename\":");
        json_str(&sb, e->path);
        if (blobs) {
            hk_sb_printf(&sb, ",\"size\":%llu,\"blobId\":\"%s\"", (unsigned long long)e->size, e->oid);
            if (e->lfs)
                hk_sb_printf(&sb, ",\"lfs\":{\"sha256\":\"%s\",\"size\":%llu,\"pointerSize\":%zu}", e->etag,
                             (unsigned long long)e->size, e->pointer_size);
        }
        hk_sb_append(&sb, "}");
    }
    hk_sb_append(&sb, "]}");
    hk_store_list_release(srv->store, lp);
    return send_json(c, ctx, 200, &sb, NULL);
}

static enum MHD_Result handle_tree(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                   const char *commit, const char *path) {
    const hk_listing *lp = NULL;
    if (hk_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        return send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    const hk_listing l = *lp;
    if (*path) {
        long k = hk_listing_find(&l, path);
        if (k < 0 || !l.v[k].is_dir) {
            hk_store_list_release(srv->store, lp);
            return send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found: %s is not a directory", path);
        }
    }
    bool recursive = query_true(c, "recursive");
    const char *cur = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    size_t cursor = 0;
    if (cur && *cur) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cur, &end, 10);
        if (errno || *end || cur[0] < '0' || cur[0] > '9') {
            hk_store_list_release(srv->store, lp);
            return send_error(c, ctx, 400, NULL, NULL, "Invalid cursor");
        }
        cursor = (size_t)v;
    }
    size_t plen = strlen(path);
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_append(&sb, "[");
    size_t idx = 0, emitted = 0;
    bool more = false;
    for (size_t i = 0; i < l.n; i++) {
        const char *p = l.v[i].path;
        const char *rest;
        if (plen) {
            if (strncmp(p, path, plen) != 0 || p[plen] != '/') continue;
            rest = p + plen + 1;
        } else {
            rest = p;
        }
        if (!recursive && strchr(rest, '/')) continue;
        if (idx++ < cursor) continue;
        if (emitted == srv->page_size) {
            more = true;
            break;
        }
        if (emitted) hk_sb_append(&sb, ",");
        json_entry(&sb, &l.v[i]);
        emitted++;
    }
    hk_sb_append(&sb, "]");
    hk_store_list_release(srv->store, lp);
    char *link = NULL;
    if (more) {
        char *base = base_url(srv, c);
        hk_strbuf lk;
        hk_sb_init(&lk);
        hk_sb_printf(&lk, "<%s/api/%s/%s/tree/%s", base ? base : "", hk_repo_type_plural(repo->type), repo->id, commit);
        if (plen) {
            hk_sb_append(&lk, "/");
            url_encode(&lk, path, true);
        }
        hk_sb_printf(&lk, "?recursive=%s&expand=false&cursor=%zu>; rel=\"next\"", recursive ? "true" : "false",
                     cursor + emitted);
        free(base);
        link = hk_sb_steal(&lk);
    }
    enum MHD_Result ret = send_json(c, ctx, 200, &sb, link);
    free(link);
    return ret;
}

/* paths=... from a form body, or {"paths": [...]} from a JSON body. */
static int parse_paths_body(char ***out, size_t *n, const req_ctx *ctx, struct MHD_Connection *c) {
    *out = NULL;
    *n = 0;
    const char *body = ctx->body.data ? ctx->body.data : "";
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    size_t cap = 0;
    char **v = NULL;
#define PUSH(str)                                                         \
    do {                                                                  \
        if (*n == cap) {                                                  \
            cap = cap ? cap * 2 : 16;                                     \
            char **nv = realloc(v, cap * sizeof *nv);                     \
            if (!nv) goto oom;                                            \
            v = nv;                                                       \
        }                                                                 \
        v[(*n)++] = (str);                                                \
    } while (0)
    if (ct && strncasecmp(ct, "application/json", 16) == 0) {
        cJSON *j = cJSON_ParseWithLength(body, ctx->body.len);
        cJSON *paths = j ? cJSON_GetObjectItemCaseSensitive(j, "paths") : NULL;
        cJSON *it;
        cJSON_ArrayForEach(it, paths) {
            if (cJSON_IsString(it)) {
                char *d = hk_strdup(it->valuestring);
                if (!d) {
                    cJSON_Delete(j);
                    goto oom;
                }
                PUSH(d);
            }
        }
        cJSON_Delete(j);
    } else {
        const char *p = body;
        while (*p) {
            size_t len = strcspn(p, "&");
            const char *eq = memchr(p, '=', len);
            if (eq && (size_t)(eq - p) == 5 && strncmp(p, "paths", 5) == 0) {
                char *d = pct_decode(eq + 1, len - 6, true);
                if (d) PUSH(d);
            }
            p += len;
            if (*p == '&') p++;
        }
    }
    *out = v;
    return HK_OK;
oom:
    for (size_t i = 0; i < *n; i++) free(v[i]);
    free(v);
    *n = 0;
    return hk_fail(HK_ERR_NOMEM, "out of memory");
#undef PUSH
}

static enum MHD_Result handle_paths_info(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                         const char *commit) {
    if (ctx->body_too_big) return send_error(c, ctx, 413, NULL, NULL, "Request body too large");
    char **paths = NULL;
    size_t np = 0;
    if (parse_paths_body(&paths, &np, ctx, c) != HK_OK) {
        hk_clear_error();
        return MHD_NO;
    }
    const hk_listing *lp = NULL;
    if (hk_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        for (size_t i = 0; i < np; i++) free(paths[i]);
        free(paths);
        return send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    const hk_listing l = *lp;
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_append(&sb, "[");
    bool first = true;
    for (size_t i = 0; i < np; i++) {
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            if (strcmp(paths[k], paths[i]) == 0) dup = true;
        long idx = dup ? -1 : hk_listing_find(&l, paths[i]);
        if (idx >= 0) {
            if (!first) hk_sb_append(&sb, ",");
            first = false;
            json_entry(&sb, &l.v[idx]);
        }
    }
    hk_sb_append(&sb, "]");
    hk_store_list_release(srv->store, lp);
    for (size_t i = 0; i < np; i++) free(paths[i]);
    free(paths);
    return send_json(c, ctx, 200, &sb, NULL);
}

static enum MHD_Result handle_refs(struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo) {
    hk_ref *refs = NULL;
    size_t n = 0;
    if (hk_store_list_refs(&refs, &n, repo->dir) != HK_OK) {
        hk_clear_error();
        return send_error(c, ctx, 500, NULL, NULL, "Cannot read the refs");
    }
    bool prs = query_true(c, "include_prs");
    hk_strbuf br, tg, pr;
    hk_sb_init(&br);
    hk_sb_init(&tg);
    hk_sb_init(&pr);
    for (size_t i = 0; i < n; i++) {
        const char *name = refs[i].name;
        hk_strbuf *sb;
        const char *shown = name;
        char *full = NULL;
        if (hk_str_starts_with(name, "refs/pr/")) {
            sb = &pr;
            full = hk_strdup(name);
        } else if (hk_str_starts_with(name, "refs/tags/")) {
            sb = &tg;
            shown = name + 10;
            full = hk_strdup(name);
        } else if (hk_str_starts_with(name, "refs/heads/")) {
            sb = &br;
            shown = name + 11;
            full = hk_strdup(name);
        } else if (hk_str_starts_with(name, "refs/")) {
            continue;
        } else {
            sb = &br;
            full = hk_asprintf("refs/heads/%s", name);
        }
        if (sb->len) hk_sb_append(sb, ",");
        hk_sb_append(sb, "{\"name\":");
        json_str(sb, shown);
        hk_sb_append(sb, ",\"ref\":");
        json_str(sb, full ? full : "");
        hk_sb_printf(sb, ",\"targetCommit\":\"%s\"}", refs[i].commit);
        free(full);
    }
    hk_refs_free(refs, n);
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_printf(&sb, "{\"branches\":[%s],\"tags\":[%s],\"converts\":[]", br.data ? br.data : "",
                 tg.data ? tg.data : "");
    if (prs) hk_sb_printf(&sb, ",\"pullRequests\":[%s]", pr.data ? pr.data : "");
    hk_sb_append(&sb, "}");
    hk_sb_free(&br);
    hk_sb_free(&tg);
    hk_sb_free(&pr);
    return send_json(c, ctx, 200, &sb, NULL);
}

static enum MHD_Result handle_org(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s) {
    char *org = seg_decode(s, 2);
    if (!org || !hk_repo_id_valid(org) || strchr(org, '/')) {
        free(org);
        return send_error(c, ctx, 404, NULL, NULL, "Organization not found");
    }
    bool trusted = false;
    for (size_t i = 0; i < srv->n_trusted; i++)
        if (strcmp(srv->trusted[i], org) == 0 || strcmp(srv->trusted[i], "*") == 0) trusted = true;
    bool exists = hk_store_has_namespace(srv->store, org);
    bool named = false;
    for (size_t i = 0; i < srv->n_trusted; i++)
        if (strcmp(srv->trusted[i], org) == 0) named = true;
    if (!exists && !named) {
        free(org);
        return send_error(c, ctx, 404, NULL, NULL, "Organization not found");
    }
    hk_strbuf sb;
    hk_sb_init(&sb);
    hk_sb_append(&sb, "{\"name\":");
    json_str(&sb, org);
    hk_sb_append(&sb, ",\"fullname\":");
    json_str(&sb, org);
    hk_sb_printf(&sb, ",\"avatarUrl\":\"\",\"type\":\"org\",\"isVerified\":false,\"trustedKernelPublisher\":%s}",
                 trusted ? "true" : "false");
    free(org);
    return send_json(c, ctx, 200, &sb, NULL);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */
static enum MHD_Result dispatch(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *url,
                                const char *method) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0,
         is_post = strcmp(method, "POST") == 0;
    if (strlen(url) > MAX_URL) return send_error(c, ctx, 414, NULL, NULL, "URL too long");
    if (url[0] != '/') return send_error(c, ctx, 400, NULL, NULL, "Bad request");
    seglist s;
    s.n = 0;
    for (const char *p = url + 1;;) {
        if (s.n == MAX_SEGS) return send_error(c, ctx, 414, NULL, NULL, "URL too deep");
        size_t n = strcspn(p, "/");
        s.p[s.n] = p;
        s.len[s.n] = n;
        s.n++;
        p += n;
        if (*p != '/') break;
        p++;
    }
    if (s.n == 1 && s.len[0] == 0) {
        hk_strbuf sb;
        hk_sb_init(&sb);
        hk_sb_printf(&sb, "{\"hubkern\":\"%s\",\"status\":\"ok\"}", hk_version());
        return send_json(c, ctx, 200, &sb, NULL);
    }
    /* the /lfs/ route authenticates through its signature */
    if (seg_is(&s, 0, "lfs")) {
        if (!is_get && !is_head) return send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
        return handle_lfs(srv, c, ctx, method, &s);
    }
    const token_spec *who = NULL;
    auth_result ar = check_token(srv, c, &who);
    /* As the Hub answers private repos to anonymous clients: 401 + RepoNotFound (existence not revealed) */
    if (ar == AUTH_MISSING) return send_error(c, ctx, 401, "RepoNotFound", NULL, "Repository not found (this mirror needs a token)");
    if (ar == AUTH_INVALID)
        return send_error(c, ctx, 401, NULL, NULL, "Invalid credentials in Authorization header");

    if (seg_is(&s, 0, "api")) {
        if (seg_is(&s, 1, "agent-harnesses") && s.n == 2) {
            /* huggingface_hub >= 2 fetches this registry for its User-Agent; an empty one is valid */
            hk_strbuf sb;
            hk_sb_init(&sb);
            hk_sb_append(&sb, "{\"standardEnvVars\":[],\"harnesses\":{}}");
            return send_json(c, ctx, 200, &sb, NULL);
        }
        if (seg_is(&s, 1, "organizations") && s.n == 4 && seg_is(&s, 3, "overview")) {
            if (!is_get && !is_head) return send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
            return handle_org(srv, c, ctx, &s);
        }
        hk_repo_type type;
        static const char *const types[] = {"models", "datasets", "spaces", "kernels"};
        int ti = -1;
        for (int i = 0; i < 4; i++)
            if (seg_is(&s, 1, types[i])) ti = i;
        if (ti < 0 || s.n < 3) return send_error(c, ctx, 404, NULL, NULL, "Not found");
        type = (hk_repo_type)ti;
        static const char *const kws[] = {"revision", "tree", "refs", "paths-info", "commits", NULL};
        repo_ref repo;
        if (!parse_repo(&repo, srv, &s, 2, type, kws)) {
            repo_ref_free(&repo);
            return repo_not_found(c, ctx);
        }
        enum MHD_Result ret;
        if (!token_allows(who, repo.id)) {
            ret = send_error(c, ctx, 403, "GatedRepo", NULL, "Access to %s is restricted: this token does not grant it", repo.id);
        } else if (!repo.dir) {
            ret = repo_not_found(c, ctx);
        } else {
            size_t a = repo.next;
            char commit[65];
            char *rev = NULL;
            size_t used = 0;
            if (a == s.n) { /* repo info at main */
                if (!is_get && !is_head) ret = send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
                else if (hk_store_resolve_rev(commit, repo.dir, "main") != HK_OK) {
                    hk_clear_error();
                    ret = send_error(c, ctx, 404, "RevisionNotFound", NULL, "Invalid rev id: main");
                } else ret = handle_repo_info(srv, c, ctx, &repo, commit);
            } else if (seg_is(&s, a, "refs") && s.n == a + 1) {
                ret = (is_get || is_head) ? handle_refs(c, ctx, &repo)
                                          : send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
            } else if (seg_is(&s, a, "revision") && s.n > a + 1) {
                if (!is_get && !is_head) ret = send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
                else if (resolve_rev_segs(commit, &rev, &used, &repo, &s, a + 1, true) != HK_OK) {
                    ret = rev_not_found(c, ctx, rev);
                } else ret = handle_repo_info(srv, c, ctx, &repo, commit);
            } else if (seg_is(&s, a, "paths-info") && s.n > a + 1) {
                if (!is_post) ret = send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
                else if (resolve_rev_segs(commit, &rev, &used, &repo, &s, a + 1, true) != HK_OK) {
                    ret = rev_not_found(c, ctx, rev);
                } else ret = handle_paths_info(srv, c, ctx, &repo, commit);
            } else if (seg_is(&s, a, "tree") && s.n > a + 1) {
                if (!is_get && !is_head) ret = send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
                else if (resolve_rev_segs(commit, &rev, &used, &repo, &s, a + 1, false) != HK_OK) {
                    ret = rev_not_found(c, ctx, rev);
                } else {
                    bool bad;
                    char *path = join_path(&s, a + 1 + used, &bad);
                    if (bad || !path) ret = send_error(c, ctx, 400, NULL, NULL, "Invalid path");
                    else ret = handle_tree(srv, c, ctx, &repo, commit, path);
                    free(path);
                }
            } else {
                ret = send_error(c, ctx, 404, NULL, NULL, "Not found");
            }
            free(rev);
        }
        repo_ref_free(&repo);
        return ret;
    }

    /* resolve: /[datasets/|spaces/|kernels/]{repo}/resolve/{rev}/{path} */
    static const char *const kws[] = {"resolve", NULL};
    size_t at = 0;
    hk_repo_type type = HK_REPO_MODEL;
    static const char *const prefixes[] = {NULL, "datasets", "spaces", "kernels"};
    for (int i = 1; i < 4; i++) {
        if (seg_is(&s, 0, prefixes[i]) && s.n >= 4) {
            /* "kernels/x/resolve/..." could also be the model "kernels/x": prefer the typed repo */
            repo_ref probe;
            bool okp = parse_repo(&probe, srv, &s, 1, (hk_repo_type)i, kws) && probe.dir;
            repo_ref_free(&probe);
            repo_ref mprobe;
            memset(&mprobe, 0, sizeof mprobe);
            bool okm = !okp && parse_repo(&mprobe, srv, &s, 0, HK_REPO_MODEL, kws) && mprobe.dir;
            repo_ref_free(&mprobe);
            if (okp || !okm) {
                type = (hk_repo_type)i;
                at = 1;
            }
        }
    }
    repo_ref repo;
    if (!parse_repo(&repo, srv, &s, at, type, kws) || !seg_is(&s, repo.next, "resolve")) {
        repo_ref_free(&repo);
        return send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    enum MHD_Result ret;
    char commit[65];
    char *rev = NULL;
    size_t used = 0;
    size_t a = repo.next + 1;
    if (!is_get && !is_head) {
        ret = send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
    } else if (!token_allows(who, repo.id)) {
        ret = send_error(c, ctx, 403, "GatedRepo", NULL, "Access to %s is restricted: this token does not grant it", repo.id);
    } else if (!repo.dir) {
        ret = repo_not_found(c, ctx);
    } else if (resolve_rev_segs(commit, &rev, &used, &repo, &s, a, false) != HK_OK) {
        ret = rev_not_found(c, ctx, rev);
    } else {
        bool bad;
        char *path = join_path(&s, a + used, &bad);
        hk_sfile f;
        if (bad || !path) {
            ret = send_error(c, ctx, 400, NULL, NULL, "Invalid path");
        } else if (!*path) {
            ret = send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
        } else if (hk_store_open_file(&f, srv->store, repo.dir, commit, path) != HK_OK) {
            hk_clear_error();
            ret = send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
        } else if (srv->lfs_302 && f.lfs) {
            ret = redirect_lfs(srv, c, ctx, &repo, &f, commit);
        } else {
            ret = serve_file(srv, c, ctx, method, &f, commit);
        }
        free(path);
    }
    free(rev);
    repo_ref_free(&repo);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    hk_server *srv = cls;
    req_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = calloc(1, sizeof *ctx);
        if (!ctx) return MHD_NO;
        hk_sb_init(&ctx->body);
        clock_gettime(CLOCK_MONOTONIC, &ctx->start);
        snprintf(ctx->method, sizeof ctx->method, "%s", method);
        if (srv->access_log) ctx->url = sanitize(url, 1024);
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (ctx->body.len + *upload_data_size > MAX_BODY) ctx->body_too_big = true;
        else hk_sb_append_n(&ctx->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return dispatch(srv, c, ctx, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    hk_server *srv = cls;
    req_ctx *ctx = *con_cls;
    if (!ctx) return;
    if (srv->access_log && hk_log_enabled(HK_LOG_INFO)) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        char ip[INET6_ADDRSTRLEN] = "?";
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ip, sizeof ip);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, ip, sizeof ip);
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ms = (double)(now.tv_sec - ctx->start.tv_sec) * 1e3 + (double)(now.tv_nsec - ctx->start.tv_nsec) / 1e6;
        hk_log(HK_LOG_INFO, "access %s \"%s %s\" %u %llu %.1fms%s", ip, ctx->method, ctx->url ? ctx->url : "?",
               ctx->status, (unsigned long long)ctx->bytes, ms,
               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
    hk_sb_free(&ctx->body);
    free(ctx->url);
    free(ctx);
    *con_cls = NULL;
}

/* The URL is handed to on_request undecoded: routing decodes each segment itself. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    hk_log(HK_LOG_DEBUG, "libmicrohttpd: %s", buf);
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */
static int listen_socket(int *out_fd, unsigned *out_port, const char *host, unsigned port) {
    *out_fd = -1;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0) return hk_fail(HK_ERR_INVALID_ARG, "cannot use address %s: %s", host, gai_strerror(gai));
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 512) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return hk_fail(HK_ERR_NETWORK, "cannot listen on %s:%u: %s", host, port, strerror(err));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return hk_fail(HK_ERR_NETWORK, "getsockname: %s", strerror(errno));
    }
    *out_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *out_fd = fd;
    return HK_OK;
}

static void free_server(hk_server *s) {
    if (!s) return;
    hk_store_close(s->store);
    for (size_t i = 0; i < s->n_tokens; i++) {
        OPENSSL_cleanse(s->tokens[i].token, strlen(s->tokens[i].token));
        free(s->tokens[i].token);
        for (size_t k = 0; k < s->tokens[i].n_orgs; k++) free(s->tokens[i].orgs[k]);
        free(s->tokens[i].orgs);
    }
    free(s->tokens);
    for (size_t i = 0; i < s->n_trusted; i++) free(s->trusted[i]);
    free(s->trusted);
    free(s->bound_base);
    free(s->public_url);
    free(s);
}

static int parse_token_spec(token_spec *t, const char *spec) {
    memset(t, 0, sizeof *t);
    const char *colon = strchr(spec, ':');
    size_t tl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (tl == 0) return hk_fail(HK_ERR_INVALID_ARG, "empty token in token list");
    for (size_t i = 0; i < tl; i++)
        if ((unsigned char)spec[i] <= 0x20 || spec[i] == 0x7f)
            return hk_fail(HK_ERR_INVALID_ARG, "a token contains a space or control character");
    t->token = hk_strndup(spec, tl);
    if (!t->token) return hk_fail(HK_ERR_NOMEM, "out of memory");
    if (!colon) return HK_OK;
    const char *p = colon + 1;
    size_t cap = 4;
    t->orgs = calloc(cap, sizeof *t->orgs);
    if (!t->orgs) return hk_fail(HK_ERR_NOMEM, "out of memory");
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n) {
            if (t->n_orgs == cap) {
                cap *= 2;
                char **no = realloc(t->orgs, cap * sizeof *no);
                if (!no) return hk_fail(HK_ERR_NOMEM, "out of memory");
                t->orgs = no;
            }
            if (!(t->orgs[t->n_orgs] = hk_strndup(p, n))) return hk_fail(HK_ERR_NOMEM, "out of memory");
            t->n_orgs++;
        }
        p += n;
        if (*p == ',') p++;
    }
    return HK_OK;
}

int hk_server_start(hk_server **out, const hk_serve_config *cfg) {
    *out = NULL;
    if (!cfg || !cfg->cache_dir) return hk_fail(HK_ERR_INVALID_ARG, "serve needs a store directory (--cache DIR)");
    hk_server *s = calloc(1, sizeof *s);
    if (!s) return hk_fail(HK_ERR_NOMEM, "out of memory");
    int rc = hk_store_open(&s->store, cfg->cache_dir, cfg->lfs_threshold);
    s->page_size = cfg->page_size ? cfg->page_size : HK_TREE_PAGE_SIZE_DEFAULT;
    s->lfs_302 = cfg->lfs_302;
    s->access_log = cfg->access_log;
    s->fault_cut_after = cfg->fault_cut_after;
    atomic_init(&s->fault_left, cfg->fault_cut_after ? (cfg->fault_cut_count ? cfg->fault_cut_count : 1) : 0);
    if (RAND_bytes(s->lfs_key, sizeof s->lfs_key) != 1 && rc == HK_OK)
        rc = hk_fail(HK_ERR_INTERNAL, "cannot generate a random key");
    if (rc == HK_OK && cfg->public_url && *cfg->public_url) {
        size_t n = strlen(cfg->public_url);
        while (n > 0 && cfg->public_url[n - 1] == '/') n--;
        if (!(s->public_url = hk_strndup(cfg->public_url, n))) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    if (rc == HK_OK && cfg->n_tokens) {
        s->tokens = calloc(cfg->n_tokens, sizeof *s->tokens);
        if (!s->tokens) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; rc == HK_OK && i < cfg->n_tokens; i++) {
            rc = parse_token_spec(&s->tokens[i], cfg->tokens[i]);
            s->n_tokens = i + 1;
        }
    }
    if (rc == HK_OK && cfg->n_trusted_orgs) {
        s->trusted = calloc(cfg->n_trusted_orgs, sizeof *s->trusted);
        if (!s->trusted) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; rc == HK_OK && i < cfg->n_trusted_orgs; i++) {
            if (!(s->trusted[i] = hk_strdup(cfg->trusted_orgs[i]))) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
            s->n_trusted = i + 1;
        }
    }
    const char *host = cfg->host && *cfg->host ? cfg->host : "127.0.0.1";
    int fd = -1;
    if (rc == HK_OK) rc = listen_socket(&fd, &s->port, host, cfg->port);
    if (rc == HK_OK) {
        bool v6 = strchr(host, ':') != NULL;
        s->bound_base = hk_asprintf(v6 ? "http://[%s]:%u" : "http://%s:%u", host, s->port);
        unsigned threads = cfg->threads ? cfg->threads : 4;
        unsigned maxc = cfg->max_connections ? cfg->max_connections : 1024;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
        if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES) flags |= MHD_USE_EPOLL;
        else flags |= MHD_USE_POLL;
        s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,                      /* */
                                     MHD_OPTION_LISTEN_SOCKET, fd,                               /* */
                                     MHD_OPTION_THREAD_POOL_SIZE, threads,                       /* */
                                     MHD_OPTION_CONNECTION_LIMIT, maxc,                          /* */
                                     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,              /* */
                                     MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, (void *)NULL,    /* */
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)s,       /* */
                                     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL,          /* */
                                     MHD_OPTION_END);
        if (!s->daemon) {
            close(fd);
            rc = hk_fail(HK_ERR_NETWORK, "cannot start the HTTP server on %s:%u", host, s->port);
        }
    }
    if (rc) {
        free_server(s);
        return rc;
    }
    hk_log(HK_LOG_INFO, "serving %s on %s (%u threads)", hk_store_root(s->store), s->bound_base,
           cfg->threads ? cfg->threads : 4);
    *out = s;
    return HK_OK;
}

unsigned hk_server_port(const hk_server *s) { return s ? s->port : 0; }

void hk_server_stop(hk_server *s) {
    if (!s) return;
    if (s->daemon) MHD_stop_daemon(s->daemon);
    free_server(s);
}
