/* Who the client is: the trusted proxies (--trusted-proxy), the client address of a request
 * (forwarded by a trusted proxy, else the socket's peer), and the per-address limit
 * (--max-connections-per-ip) keyed on it.
 *
 * X-Forwarded-For and Forwarded are read only on connections from a trusted proxy: from anyone
 * else they are a value the client picks, and a limit or budget keyed on it would be the client's
 * choice. Each proxy appends the address it received from, so the list is read from the right and
 * the first address that is not itself a trusted proxy is the client; an entry that is not an
 * address (garbage, "unknown", an obfuscated name) ends the walk at the hop before it. */
#include "server/srv_http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

struct srv_proxy_net {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    unsigned prefix;
};

/* An IPv4 address mapped into IPv6 (a dual-stack socket's peers) compares as the IPv4 one. */
static void unmap(int *family, unsigned char a[16]) {
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (*family == AF_INET6 && memcmp(a, mapped, 12) == 0) {
        memmove(a, a + 12, 4);
        *family = AF_INET;
    }
}

/* Text to an address; false when it is not a numeric IPv4/IPv6 address. */
static bool parse_addr(int *family, unsigned char a[16], const char *s, size_t n) {
    char buf[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    memset(a, 0, 16);
    if (inet_pton(AF_INET, buf, a) == 1) *family = AF_INET;
    else if (inet_pton(AF_INET6, buf, a) == 1) *family = AF_INET6;
    else return false;
    unmap(family, a);
    return true;
}

static void addr_text(char *out, size_t cap, int family, const unsigned char a[16]) {
    if (!inet_ntop(family, a, out, (socklen_t)cap)) snprintf(out, cap, "?");
}

int srv_proxy_nets_parse(srv_proxy_net **out, const char *const *specs, size_t n) {
    *out = NULL;
    if (n == 0) return HK_OK;
    srv_proxy_net *v = calloc(n, sizeof *v);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = specs[i], *slash = strchr(s, '/');
        size_t alen = slash ? (size_t)(slash - s) : strlen(s);
        bool ok = parse_addr(&v[i].family, v[i].addr, s, alen);
        unsigned max = v[i].family == AF_INET ? 32 : 128;
        v[i].prefix = max;
        if (ok && slash) {
            char *end;
            unsigned long p = strtoul(slash + 1, &end, 10);
            /* a mapped ::ffff:a.b.c.d/P counts its prefix over the IPv6 bits */
            unsigned long skip = v[i].family == AF_INET && memchr(s, ':', alen) ? 96 : 0;
            ok = isdigit((unsigned char)slash[1]) && !*end && p >= skip && p - skip <= max;
            v[i].prefix = ok ? (unsigned)(p - skip) : 0;
        }
        if (!ok) {
            free(v);
            return hk__fail(HK_ERR_INVALID_ARG, "trusted proxy '%s': give an IPv4 or IPv6 address, optionally with "
                            "/PREFIX (e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8)", s);
        }
    }
    *out = v;
    return HK_OK;
}

static bool in_net(const srv_proxy_net *p, int family, const unsigned char a[16]) {
    if (p->family != family) return false;
    unsigned full = p->prefix / 8, rest = p->prefix % 8;
    if (memcmp(p->addr, a, full) != 0) return false;
    if (!rest) return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (p->addr[full] & mask) == (a[full] & mask);
}

static bool trusted(const srv_server *srv, int family, const unsigned char a[16]) {
    for (size_t i = 0; i < srv->n_proxies; i++)
        if (in_net(&srv->proxies[i], family, a)) return true;
    return false;
}

/* The socket peer's address; false when libmicrohttpd has none. */
static bool peer_addr(int *family, unsigned char a[16], struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return false;
    const struct sockaddr *sa = ci->client_addr;
    memset(a, 0, 16);
    if (sa->sa_family == AF_INET) memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6) memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    else return false;
    *family = sa->sa_family;
    unmap(family, a);
    return true;
}

bool srv_peer_is_proxy(const srv_server *srv, struct MHD_Connection *c) {
    int family;
    unsigned char a[16];
    return srv->n_proxies && peer_addr(&family, a, c) && trusted(srv, family, a);
}

/* One element's address: an X-Forwarded-For entry ("1.2.3.4", "2001:db8::1", tolerated with a port:
 * "1.2.3.4:80", "[2001:db8::1]:80") or a Forwarded for= value (quoted or not, same forms). */
static bool element_addr(int *family, unsigned char a[16], const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') s++, n -= 2;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        return close && parse_addr(family, a, s + 1, (size_t)(close - s - 1));
    }
    const char *colon = memchr(s, ':', n);
    if (colon && !memchr(colon + 1, ':', n - (size_t)(colon + 1 - s))) n = (size_t)(colon - s); /* v4:port */
    return parse_addr(family, a, s, n);
}

/* The for= value of one Forwarded element ("for=1.2.3.4;proto=http"), or NULL. */
static const char *forwarded_for(const char *s, size_t n, size_t *len) {
    const char *end = s + n;
    while (s < end) {
        const char *semi = memchr(s, ';', (size_t)(end - s));
        const char *pe = semi ? semi : end;
        while (s < pe && (*s == ' ' || *s == '\t')) s++;
        if (pe - s > 4 && strncasecmp(s, "for=", 4) == 0) {
            *len = (size_t)(pe - s - 4);
            return s + 4;
        }
        s = semi ? semi + 1 : end;
    }
    return NULL;
}

typedef struct hop_walk {
    const srv_server *srv;
    int family;          /* the client found so far: starts as the peer */
    unsigned char a[16];
    bool done;           /* an untrusted address (the client) or a bad entry was reached */
} hop_walk;

/* Walk one header value's comma-separated elements right to left. */
static void walk_value(hop_walk *w, const char *v, bool forwarded) {
    size_t end = strlen(v);
    while (!w->done) {
        size_t start = end;
        while (start > 0 && v[start - 1] != ',') start--;
        const char *el = v + start;
        size_t n = end - start;
        while (n && (*el == ' ' || *el == '\t')) el++, n--;
        if (n) { /* empty elements (", ,") are skipped, as RFC 7230 lists allow */
            if (forwarded) el = forwarded_for(el, n, &n);
            int family;
            unsigned char a[16];
            if (!el || !element_addr(&family, a, el, n)) {
                w->done = true; /* not an address: the last trusted hop is all that is known */
                return;
            }
            w->family = family;
            memcpy(w->a, a, 16);
            if (!trusted(w->srv, family, a)) w->done = true;
        }
        if (start == 0) return;
        end = start - 1;
    }
}

#define MAX_HOP_HEADERS 16

typedef struct header_list {
    const char *name;
    const char *v[MAX_HOP_HEADERS];
    size_t n;
    bool overflow;
} header_list;

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    header_list *h = cls;
    if (strcasecmp(key, h->name) != 0 || !value) return MHD_YES;
    if (h->n == MAX_HOP_HEADERS) h->overflow = true;
    else h->v[h->n++] = value;
    return MHD_YES;
}

/* Walk every header of that name (in order; the last one holds the nearest hops); false when
 * the request has none. */
static bool walk_headers(hop_walk *w, struct MHD_Connection *c, const char *name, bool forwarded) {
    header_list h = {.name = name};
    MHD_get_connection_values(c, MHD_HEADER_KIND, collect, &h);
    for (size_t i = h.n; i-- > 0 && !w->done;) walk_value(w, h.v[i], forwarded);
    if (h.overflow) w->done = true; /* the earliest headers were not kept: stop where they begin */
    return h.n > 0;
}

bool srv_request_client_addr(srv_client_addr *out, const srv_server *srv, struct MHD_Connection *c) {
    hop_walk w = {.srv = srv};
    if (!peer_addr(&w.family, w.a, c)) {
        out->family = 0; /* unknown: its text is "?" */
        return false;
    }
    bool via_proxy = srv->n_proxies && trusted(srv, w.family, w.a);
    /* X-Forwarded-For first (nginx's $proxy_add_x_forwarded_for); Forwarded only without it. A
     * proxy that writes Forwarded must drop a client's X-Forwarded-For (docs/serve.md). */
    if (via_proxy && !walk_headers(&w, c, "X-Forwarded-For", false)) walk_headers(&w, c, "Forwarded", true);
    out->family = w.family;
    memcpy(out->a, w.a, sizeof out->a);
    return via_proxy;
}

void srv_client_addr_text(char *out, size_t cap, const srv_client_addr *a) {
    if (a->family) addr_text(out, cap, a->family, a->a);
    else snprintf(out, cap, "?");
}

bool srv_request_client(char *out, size_t cap, const srv_server *srv, struct MHD_Connection *c) {
    srv_client_addr a;
    bool via_proxy = srv_request_client_addr(&a, srv, c);
    srv_client_addr_text(out, cap, &a);
    return via_proxy;
}

/* ---- the per-address count ---------------------------------------------------------------- */

#define ADDR_BUCKETS 1024

typedef struct addr_slot {
    struct addr_slot *next;
    unsigned count;
    char key[INET6_ADDRSTRLEN];
} addr_slot;

struct srv_addr_count {
    pthread_mutex_t mu;
    unsigned limit;
    addr_slot *bucket[ADDR_BUCKETS];
};

int srv_addr_count_new(srv_addr_count **out, unsigned limit) {
    *out = NULL;
    srv_addr_count *t = calloc(1, sizeof *t);
    if (!t) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->limit = limit;
    *out = t;
    return HK_OK;
}

void srv_addr_count_free(srv_addr_count *t) {
    if (!t) return;
    for (size_t i = 0; i < ADDR_BUCKETS; i++)
        for (addr_slot *s = t->bucket[i]; s;) {
            addr_slot *n = s->next;
            free(s);
            s = n;
        }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static addr_slot **slot_of(srv_addr_count *t, const char *key) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    addr_slot **s = &t->bucket[h % ADDR_BUCKETS];
    while (*s && strcmp((*s)->key, key) != 0) s = &(*s)->next;
    return s;
}

bool srv_addr_acquire(srv_addr_count *t, const char *key) {
    pthread_mutex_lock(&t->mu);
    addr_slot **s = slot_of(t, key);
    bool ok = true;
    if (!*s) {
        addr_slot *n = calloc(1, sizeof *n);
        if (n) snprintf(n->key, sizeof n->key, "%s", key);
        *s = n;
    }
    if (!*s || (*s)->count >= t->limit) ok = false; /* out of memory refuses too: the limit holds */
    else (*s)->count++;
    if (*s && (*s)->count == 0) { /* a fresh slot that was refused */
        addr_slot *dead = *s;
        *s = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

void srv_addr_release(srv_addr_count *t, const char *key) {
    pthread_mutex_lock(&t->mu);
    addr_slot **s = slot_of(t, key);
    if (*s && --(*s)->count == 0) {
        addr_slot *dead = *s;
        *s = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&t->mu);
}
