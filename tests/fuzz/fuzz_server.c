/* The mirror server's request handling (server/http_*.c) against a real store: libmicrohttpd runs
 * in-process on loopback and each input becomes one HTTP/1.1 request. Input: line 1 = method and
 * target ("GET /api/kernels/org/k/tree/main/build"), the next lines up to an empty one = headers,
 * the rest = body. Host, Connection: close and Content-Length are set by the harness (and header
 * lines lose leading blanks, so none folds into them) so that every request ends; a request that
 * gets no answer within 10 s is a hang and aborts. */
#include "fuzz_util.h"
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

static srv_server *srv;
static unsigned port;

static void put_file(const char *root, const char *rel, const char *text) {
    char *p = hk__path_join(root, rel);
    char *slash = p ? strrchr(p, '/') : NULL;
    if (!slash) abort();
    *slash = '\0';
    if (hk__mkdirs(p, 0777)) abort();
    *slash = '/';
    if (hk__write_file_atomic(p, text, strlen(text))) abort();
    free(p);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = hk_fuzz_dir("server");
    char src[600], store[600];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    put_file(src, "build/torch-universal/relu/__init__.py", "def relu(x):\n    return x\n");
    put_file(src, "build/torch-universal/metadata.json", "{\"name\": \"relu\", \"version\": 1}\n");
    put_file(src, "build/tvm-ffi01-cpu-x86_64-linux/metadata.json", "{\"version\": 1}\n");
    put_file(src, "README.md", "# relu\n");
    srv_publish_options p;
    memset(&p, 0, sizeof p);
    p.src_dir = src;
    p.repo_id = "org/relu";
    p.repo_type = HK_REPO_KERNEL;
    p.branch = "v1";
    p.cache_dir = store;
    p.lfs_threshold = 16; /* some files LFS, some not */
    srv_publish_result r;
    if (srv_publish(&r, &p)) abort();
    p.branch = "main";
    if (srv_publish(&r, &p)) abort();
    /* read tokens (one scoped) and a write token: uploads are refused to the first two */
    static const char *tokens[] = {"tok-all", "tok-org:org", "tok-w:org:write"};
    static const char *trusted[] = {"org"};
    srv_config c;
    memset(&c, 0, sizeof c);
    c.cache_dir = store;
    c.host = "127.0.0.1";
    c.threads = 2;
    c.page_size = 2;
    c.trusted_orgs = trusted;
    c.n_trusted_orgs = 1;
    /* requests need a token (the seeds carry one): 401/403 and the scoped answers get exercised */
    c.tokens = getenv("HK_FUZZ_SERVER_NO_TOKENS") ? NULL : tokens;
    c.n_tokens = c.tokens ? 3 : 0;
    c.max_connections_per_ip = 1000;
    if (srv_start(&srv, &c)) abort();
    port = srv_port(srv);
    return 0;
}

static void append_clean(hk_strbuf *sb, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\r' || ch == '\n' || ch == '\0') hk__sb_printf(sb, "%%%02X", ch);
        else hk__sb_append_n(sb, s + i, 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    const char *s = (const char *)data, *end = s + size;
    const char *nl = memchr(s, '\n', size);
    const char *line_end = nl ? nl : end;
    hk_strbuf req;
    hk__sb_init(&req);
    append_clean(&req, s, (size_t)(line_end - s));
    hk__sb_append(&req, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const char *p = nl ? nl + 1 : end;
    while (p < end) { /* headers until an empty line */
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        if (e == p) {
            p++;
            break;
        }
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r') n--;
        /* no leading blanks: a folded line would continue the harness's own headers */
        while (n && (*p == ' ' || *p == '\t')) p++, n--;
        if (memchr(p, ':', n) && strncasecmp(p, "content-length", 14) && strncasecmp(p, "transfer-encoding", 17) &&
            strncasecmp(p, "connection", 10) && strncasecmp(p, "host:", 5) && strncasecmp(p, "expect", 6)) {
            append_clean(&req, p, n);
            hk__sb_append(&req, "\r\n");
        }
        p = e + 1;
    }
    size_t body = p < end ? (size_t)(end - p) : 0;
    hk__sb_printf(&req, "Connection: close\r\nContent-Length: %zu\r\n\r\n", body);
    hk__sb_append_n(&req, p, body);
    if (req.oom) abort();

    /* Thousands of connections a second can run this client out of local ports, or meet a full
     * accept queue for a moment: retry for a while (about 1 s in all), then treat a lack of local
     * ports as the harness's limit and anything else (a refused or reset server) as a failure. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 40; attempt++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) abort();
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
        struct timespec pause = {0, 500000L * (attempt + 1)}; /* 0.5 ms, 1 ms, ... */
        nanosleep(&pause, NULL);
    }
    if (fd < 0) {
        hk__sb_free(&req);
        if (err == EADDRNOTAVAIL || err == EADDRINUSE) return 0;
        fprintf(stderr, "fuzz_server: connect to the server failed: %s\n", strerror(err));
        abort();
    }
    /* close with a reset so this side keeps no TIME_WAIT port per input */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    size_t off = 0;
    while (off < req.len) {
        ssize_t w = send(fd, req.data + off, req.len - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may answer and close before reading everything */
        off += (size_t)w;
    }
    char buf[16384];
    for (;;) { /* until the server closes */
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int pr = poll(&pf, 1, 10000);
        if (pr == 0) abort(); /* no answer: a hang */
        if (pr < 0) break;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
    }
    close(fd);
    hk__sb_free(&req);
    return 0;
}
