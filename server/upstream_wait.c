/* Coalescing inside one process: the first thread to ask for a key leads (does the upstream work);
 * the others wait on a condition variable until it is done and then read the store. Across
 * processes the leaders meet again at an flock (upstream_blob.c, upstream_rev.c).
 *
 * A wait has a deadline and ends early when the waiting client disconnects or the mirror stops:
 * a leader stuck on a dripping upstream must not pin every waiter's thread with it. */
#include "server/srv_upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_MS 200 /* how often a waiter looks at its client and the clock */

typedef struct up_wait {
    char *key;
    up_answer failed; /* the leader's answer when it failed (status 0: it succeeded) */
    bool done;
    unsigned users; /* leader + waiters still holding the entry */
    struct up_wait *next;
} up_wait;

struct up_waitset {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    up_wait *head;
};

int srv_up_waitset_new(up_waitset **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&(*out)->cv, &ca);
    pthread_condattr_destroy(&ca);
    return HK_OK;
}

void srv_up_waitset_free(up_waitset *w) {
    if (!w) return;
    for (up_wait *e = w->head, *n; e; e = n) {
        n = e->next;
        free(e->key);
        free(e);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void unlink_entry(up_waitset *w, up_wait *e) {
    for (up_wait **p = &w->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    free(e->key);
    free(e);
}

static up_wait *find_open(up_waitset *w, const char *key) {
    up_wait *e = w->head;
    while (e && (e->done || strcmp(e->key, key) != 0)) e = e->next;
    return e;
}

bool srv_up_enter(up_waitset *w, const char *key, double wait_s, const atomic_bool *stopping, up_answer *leader) {
    memset(leader, 0, sizeof *leader);
    pthread_mutex_lock(&w->mu);
    up_wait *e = find_open(w, key);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (e && !(e->key = hk__strdup(key))) {
            free(e);
            e = NULL;
        }
        if (e) {
            e->users = 1;
            e->next = w->head;
            w->head = e;
        }
        pthread_mutex_unlock(&w->mu);
        return true; /* out of memory: lead without coalescing; srv_up_leave finds nothing */
    }
    e->users++;
    double until = srv_up_now() + wait_s;
    const char *why = NULL;
    while (!e->done) {
        double left = until - srv_up_now();
        if (left <= 0) why = "the upstream transfer this request waits on is past --upstream-deadline";
        else if (stopping && atomic_load(stopping)) why = "the mirror is stopping";
        else if (srv_up_client_gone()) why = "the client disconnected";
        if (why) break;
        double slice = left < WAIT_SLICE_MS / 1e3 ? left : WAIT_SLICE_MS / 1e3;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + (long)(slice * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    if (e->done) *leader = e->failed;
    else {
        /* given up: the leader goes on for the others; this client is told to come back */
        leader->status = 503;
        leader->retry_after = 5;
        snprintf(leader->msg, sizeof leader->msg, "Upstream unavailable: %s", why);
    }
    if (--e->users == 0) unlink_entry(w, e);
    pthread_mutex_unlock(&w->mu);
    return false;
}

unsigned srv_up_waiters(up_waitset *w, const char *key) {
    pthread_mutex_lock(&w->mu);
    up_wait *e = find_open(w, key);
    unsigned n = e && e->users > 0 ? e->users - 1 : 0;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void srv_up_leave(up_waitset *w, const char *key, const up_answer *failed) {
    pthread_mutex_lock(&w->mu);
    up_wait *e = find_open(w, key);
    if (e) {
        e->done = true;
        if (failed) e->failed = *failed;
        if (--e->users == 0) unlink_entry(w, e);
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}
