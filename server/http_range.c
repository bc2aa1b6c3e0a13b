/* File bodies: the conditional answer (If-None-Match → 304), a single byte range (206, or 416 when
 * unsatisfiable; several ranges are answered with the whole file), and the full 200. */
#include "server/srv_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void srv_quote_etag(char q[80], const char *etag) {
    size_t n = strnlen(etag, 64);
    q[0] = '"';
    memcpy(q + 1, etag, n);
    q[n + 1] = '"';
    q[n + 2] = '\0';
}

void srv_add_file_headers(struct MHD_Response *r, const srv_sfile *f, const char *commit) {
    char q[80];
    srv_quote_etag(q, f->etag);
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

int srv_parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len) {
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

static enum MHD_Result not_modified(struct MHD_Connection *c, req_ctx *ctx, srv_sfile *f, const char *commit) {
    close(f->fd);
    f->fd = -1;
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    srv_add_file_headers(r, f, commit);
    return srv_queue(c, ctx, 304, r, 0);
}

static enum MHD_Result unsatisfiable(struct MHD_Connection *c, req_ctx *ctx, srv_sfile *f, const char *commit) {
    close(f->fd);
    f->fd = -1;
    hk_strbuf b;
    hk__sb_init(&b);
    hk__sb_append(&b, "{\"error\":\"Requested range not satisfiable\"}");
    size_t blen = b.len;
    char *data = hk__sb_steal(&b);
    struct MHD_Response *r = data ? MHD_create_response_from_buffer(blen, data, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(data);
        return MHD_NO;
    }
    char cr[64];
    snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)f->size);
    MHD_add_response_header(r, "Content-Range", cr);
    srv_add_file_headers(r, f, commit);
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    return srv_queue(c, ctx, 416, r, blen);
}

/* A body this small is read into memory (fd closed); NULL leaves fd alone (a short read: the file
 * changed under us, so the fd path answers what is there). */
static struct MHD_Response *small_body(int fd, uint64_t start, uint64_t len) {
    char *buf = malloc(len);
    if (!buf) return NULL;
    ssize_t n = pread(fd, buf, len, (off_t)start);
    struct MHD_Response *r = n == (ssize_t)len ? MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(buf);
        return NULL;
    }
    close(fd);
    return r;
}

enum MHD_Result srv_serve_file(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  srv_sfile *f, const char *commit, const srv_file_memo *fm) {
    bool is_get = strcmp(method, "GET") == 0;
    char q[80];
    srv_quote_etag(q, f->etag);
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
    if (inm && (strcmp(inm, q) == 0 || strcmp(inm, f->etag) == 0 || strcmp(inm, "*") == 0))
        return not_modified(c, ctx, f, commit);
    uint64_t start = 0, len = f->size;
    unsigned status = 200;
    int rr = srv_parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range"), f->size, &start, &len);
    if (rr < 0) return unsatisfiable(c, ctx, f, commit);
    if (rr > 0) status = 206;
    struct MHD_Response *r = NULL;
    bool inline_body = false;
    if (len == 0) {
        close(f->fd);
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
#ifdef HK_TEST_HOOKS
    else if (srv_fault_cut(&r, &srv->fault, is_get, f->fd, start, len)) {
        /* r (or NULL) already owns or closed the fd */
    }
#endif
    else if (is_get && len <= HK_SRV_INLINE_BODY_MAX && (r = small_body(f->fd, start, len)) != NULL) {
        /* read: the body goes out with the headers, one send and one segment, not send + sendfile */
        inline_body = true;
    } else {
        r = MHD_create_response_from_fd_at_offset64(len, f->fd, start);
        if (!r) close(f->fd);
    }
    f->fd = -1;
    if (!r) return MHD_NO;
    srv_add_file_headers(r, f, commit);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    if (status == 206) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)start, (unsigned long long)(start + len - 1),
                 (unsigned long long)f->size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    if (fm && srv->memo && status == 200 && inline_body && fm->proof.ok) {
        /* the whole answer, headers included, is reused while fm's proof holds (http_file.c) */
        enum MHD_Result ret = srv_queue_keep(c, ctx, status, r, len);
        if (ret != MHD_YES) {
            MHD_destroy_response(r);
            return ret;
        }
        srv_kept_file kf;
        memset(&kf, 0, sizeof kf);
        kf.proof = fm->proof;
        memcpy(kf.etag, f->etag, sizeof kf.etag);
        srv_memo_keep(srv->memo, fm->key, fm->klen, &kf, sizeof kf, r, status, len);
        return ret;
    }
    return srv_queue(c, ctx, status, r, is_get ? len : 0);
}
