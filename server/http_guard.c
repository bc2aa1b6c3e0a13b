/* The connection guard: a deadline for receiving a request's headers, so that clients that drip
 * their headers a byte at a time (slowloris) cannot hold connections for as long as they like.
 * libmicrohttpd only has an inactivity timeout, which a drip-feeding client never triggers.
 *
 * Every connection is tracked from accept (MHD_OPTION_NOTIFY_CONNECTION) to close. The deadline runs
 * while the server waits for headers: from accept, and again from the end of each answer on a
 * keep-alive connection. Once a request's headers are in (the access handler's first call) it no
 * longer applies; bodies and answers are bounded by the inactivity timeout. A watchdog thread shuts
 * down (shutdown(2), not close) the socket of a connection past its deadline; libmicrohttpd then sees
 * the end of the stream and closes the connection itself. libmicrohttpd reports the close before
 * it closes the descriptor, and both sides hold the guard's mutex, so the watchdog never touches a
 * descriptor that was already reused.
 *
 * The per-address limit (--max-connections-per-ip) is counted here too, from accept to close, for
 * every peer that is not a trusted proxy: one over it is shut down at once. A trusted proxy's
 * connections carry many clients; their requests are counted by forwarded address instead
 * (http_daemon.c), and the proxy itself is bounded by --max-connections only. */
#include "server/srv_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct conn_watch {
    struct conn_watch *prev, *next;
    srv_conn_guard *guard;
    int fd;
    bool waiting;          /* for a request's headers */
    bool served;           /* answered a request already (keep-alive) */
    bool counted;          /* holds a slot of the per-address limit */
    double since;          /* hk__now_s() when the wait began */
    char ip[INET6_ADDRSTRLEN];
} conn_watch;

struct srv_conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled to stop */
    pthread_t thread;
    bool stop;
    unsigned timeout_s;
    const srv_server *srv;
    conn_watch head; /* sentinel of a circular list */
};

/* How often the watchdog looks: the deadline is kept to within this much. */
#define GUARD_TICK_MS 200

static void *guard_main(void *arg) {
    srv_conn_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        const double now_s = hk__now_s();
        for (conn_watch *w = g->head.next; w != &g->head; w = w->next) {
            if (!w->waiting || now_s - w->since < (double)g->timeout_s) continue;
            w->waiting = false; /* once */
            /* an idle keep-alive connection is ordinary; one that never sent its headers is not */
            hk__log(w->served ? HK_LOG_DEBUG : HK_LOG_INFO,
                   "closing a connection from %s: no complete request headers within %u s%s", w->ip, g->timeout_s,
                   w->served ? " (idle keep-alive)" : "");
            shutdown(w->fd, SHUT_RDWR);
        }
        struct timespec until; /* the condition variable's clock (CLOCK_MONOTONIC), as a timespec */
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += GUARD_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int srv_conn_guard_start(srv_conn_guard **out, unsigned timeout_s, const srv_server *srv) {
    *out = NULL;
    srv_conn_guard *g = calloc(1, sizeof *g);
    if (!g) return hk__fail(HK_ERR_NOMEM, "out of memory");
    g->timeout_s = timeout_s;
    g->srv = srv;
    g->head.next = g->head.prev = &g->head;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_mutex_init(&g->mu, NULL);
    if (e == 0 && (e = pthread_cond_init(&g->cv, &ca)) != 0) pthread_mutex_destroy(&g->mu);
    pthread_condattr_destroy(&ca);
    if (e == 0 && (e = pthread_create(&g->thread, NULL, guard_main, g)) != 0) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
    }
    if (e != 0) {
        free(g);
        return hk__fail(HK_ERR_INTERNAL, "cannot start the connection guard: %s", strerror(e));
    }
    *out = g;
    return HK_OK;
}

void srv_conn_guard_stop(srv_conn_guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    /* MHD_stop_daemon reported every close; anything left is only memory */
    for (conn_watch *w = g->head.next; w != &g->head;) {
        conn_watch *n = w->next;
        free(w);
        w = n;
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void srv_conn_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_conn_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = NULL;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_watch *w = ci ? calloc(1, sizeof *w) : NULL;
        if (!w) return; /* unguarded; the inactivity timeout still applies */
        w->guard = g;
        w->fd = ci->connect_fd;
        w->waiting = true;
        w->since = hk__now_s();
        srv_client_ip(w->ip, sizeof w->ip, c);
        if (g->srv->per_ip && !srv_peer_is_proxy(g->srv, c)) {
            w->counted = srv_addr_acquire(g->srv->per_ip, w->ip);
            if (!w->counted) {
                hk__log(HK_LOG_INFO, "closing a connection from %s: it has %u open already (--max-connections-per-ip)",
                        w->ip, g->srv->per_ip_limit);
                w->waiting = false;
                shutdown(w->fd, SHUT_RDWR);
            }
        }
        pthread_mutex_lock(&g->mu);
        w->prev = g->head.prev;
        w->next = &g->head;
        g->head.prev->next = w;
        g->head.prev = w;
        pthread_mutex_unlock(&g->mu);
        *socket_context = w;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_watch *w = *socket_context;
        if (!w) return;
        pthread_mutex_lock(&g->mu);
        w->prev->next = w->next;
        w->next->prev = w->prev;
        pthread_mutex_unlock(&g->mu);
        if (w->counted) srv_addr_release(g->srv->per_ip, w->ip);
        free(w);
        *socket_context = NULL;
    }
}

static conn_watch *watch_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void srv_conn_guard_headers_done(struct MHD_Connection *c) {
    conn_watch *w = watch_of(c);
    if (!w) return;
    pthread_mutex_lock(&w->guard->mu);
    w->waiting = false;
    pthread_mutex_unlock(&w->guard->mu);
}

void srv_conn_guard_request_done(struct MHD_Connection *c) {
    conn_watch *w = watch_of(c);
    if (!w) return;
    pthread_mutex_lock(&w->guard->mu);
    w->waiting = true;
    w->served = true;
    w->since = hk__now_s();
    pthread_mutex_unlock(&w->guard->mu);
}
