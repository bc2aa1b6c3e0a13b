/* A fake Hub for the client harnesses: a loopback HTTP/1.1 server thread in the fuzzer's process
 * that answers every request with what the harness's answer function returns (status line,
 * headers and body written verbatim, then the connection is closed). The harness also points
 * http_proxy at it so that a redirect or Link to any other host lands here too: nothing leaves
 * the machine and no name is looked up. */
#ifndef HK_FUZZ_FAKE_HUB_H
#define HK_FUZZ_FAKE_HUB_H

#include "internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Fill *out with the whole raw response to request number `index` (0-based in this input) whose
 * request line is `request_line` ("GET /api/... HTTP/1.1"). */
typedef void (*hk_fake_answer_fn)(hk_strbuf *out, unsigned index, const char *request_line);

static hk_fake_answer_fn hk_fake_answer;
static atomic_uint hk_fake_count;
static int hk_fake_fd = -1;

static void *hk_fake_loop(void *arg) {
    (void)arg;
    for (;;) {
        int c = accept(hk_fake_fd, NULL, NULL);
        if (c < 0) continue;
        char req[8192];
        size_t len = 0;
        while (len + 1 < sizeof req) { /* up to the end of the request headers */
            ssize_t r = recv(c, req + len, sizeof req - 1 - len, 0);
            if (r <= 0) break;
            len += (size_t)r;
            req[len] = '\0';
            if (strstr(req, "\r\n\r\n")) break;
        }
        req[len] = '\0';
        char *eol = strstr(req, "\r\n");
        if (eol) *eol = '\0';
        hk_strbuf out;
        hk__sb_init(&out);
        hk_fake_answer(&out, atomic_fetch_add(&hk_fake_count, 1), req);
        size_t off = 0;
        while (off < out.len) {
            ssize_t w = send(c, out.data + off, out.len - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        hk__sb_free(&out);
        shutdown(c, SHUT_WR);
        close(c);
    }
    return NULL;
}

/* Start the server; returns "http://127.0.0.1:<port>" (static storage). */
static inline const char *hk_fake_hub_start(hk_fake_answer_fn fn) {
    static char endpoint[64];
    hk_fake_answer = fn;
    hk_fake_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (hk_fake_fd < 0 || bind(hk_fake_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(hk_fake_fd, 64) != 0 ||
        getsockname(hk_fake_fd, (struct sockaddr *)&a, &al) != 0)
        abort();
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    pthread_t t;
    if (pthread_create(&t, NULL, hk_fake_loop, NULL) != 0) abort();
    pthread_detach(t);
    /* every other origin too (redirects, Link headers); https through the proxy fails at once */
    setenv("http_proxy", endpoint, 1);
    setenv("HTTPS_PROXY", endpoint, 1);
    setenv("ALL_PROXY", endpoint, 1);
    unsetenv("NO_PROXY");
    unsetenv("no_proxy");
    setenv("HUBKERN_RETRY_BASE_MS", "0", 1);
    return endpoint;
}

/* Append a response made of `head` (header lines separated by '\n', sanitised to CRLF; lines
 * without ':' dropped) and body, with the status; Content-Length and Connection: close added. */
static inline void hk_fake_response(hk_strbuf *out, int status, const char *head, size_t head_len, const char *body,
                                    size_t body_len) {
    hk__sb_printf(out, "HTTP/1.1 %d X\r\n", status);
    const char *p = head, *end = head + head_len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r') n--;
        if (n && memchr(p, ':', n) && !memchr(p, '\r', n) && !memchr(p, '\0', n) &&
            strncasecmp(p, "content-length", 14) && strncasecmp(p, "transfer-encoding", 17) &&
            strncasecmp(p, "connection", 10) && strncasecmp(p, "content-encoding", 16)) {
            hk__sb_append_n(out, p, n);
            hk__sb_append(out, "\r\n");
        }
        p = e + 1;
    }
    hk__sb_printf(out, "Content-Length: %zu\r\nConnection: close\r\n\r\n", body_len);
    hk__sb_append_n(out, body, body_len);
}

#endif
