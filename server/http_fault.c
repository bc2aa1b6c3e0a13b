/* Fault injection for tests (serve --fault-cut-after / --fault-cut-count): the first N GET bodies
 * longer than BYTES end after BYTES bytes, the connection closed, so that clients' resume paths can
 * be exercised against a real server. Compiled only with HK_TEST_HOOKS: a product build has none. */
#include "server/srv_http.h"

#ifndef HK_TEST_HOOKS
#error "http_fault.c is built only with HK_TEST_HOOKS (server/CMakeLists.txt leaves it out otherwise)"
#endif

#include <stdlib.h>
#include <unistd.h>

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

void srv_fault_init(srv_fault *f, const srv_config *cfg) {
    f->cut_after = cfg->fault_cut_after;
    atomic_init(&f->left, cfg->fault_cut_after ? (cfg->fault_cut_count ? cfg->fault_cut_count : 1) : 0);
}

bool srv_fault_cut(struct MHD_Response **out, srv_fault *f, bool is_get, int fd, uint64_t start,
                      uint64_t len) {
    *out = NULL;
    if (!is_get || !f->cut_after || len <= f->cut_after) return false;
    unsigned left = atomic_load(&f->left);
    while (left > 0 && !atomic_compare_exchange_weak(&f->left, &left, left - 1)) {
    }
    if (left == 0) return false;
    cut_reader *cr = malloc(sizeof *cr);
    if (cr) {
        cr->fd = fd;
        cr->offset = start;
        cr->cut = f->cut_after;
        *out = MHD_create_response_from_callback(len, 64 * 1024, cut_read, cr, cut_free);
        if (!*out) free(cr);
    }
    if (!*out) close(fd);
    else hk__log(HK_LOG_INFO, "fault injection: cutting this response after %llu bytes", (unsigned long long)f->cut_after);
    return true;
}
