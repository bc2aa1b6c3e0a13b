/* Coalescing inside one process: the first thread to ask for a key leads (does the upstream work);
 * the others wait on that key's own condition variable until it is done and then read the store.
 * Across processes the leaders meet again at an flock (upstream_blob.c, upstream_rev.c).
 *
 * One condition variable per key, not one for the set: a cold edge under a burst has hundreds of
 * waiters on a dozen keys, and a shared one woke every waiter at each leader's end, each to find
 * its own transfer still running; on a small machine those wake-ups took the CPU the remaining
 * leaders needed, and every file waited on the slowest (issue 25).
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
    pthread_cond_t cv; /* on CLOCK_MONOTONIC; its waiters only */
    up_answer failed; /* the leader's answer when it failed (status 0: it succeeded) */
    bool done;
    unsigned users; /* leader + waiters still holding the entry */
    struct up_wait *next;
} up_wait;

struct up_waitset {
    pthread_mutex_t mu;
    pthread_condattr_t ca; /* CLOCK_MONOTONIC, for each entry's cv */
    up_wait *head;
    unsigned long futile; /* wake-ups by a signal that found the wait's own transfer still running */
    unsigned retry_s;     /* the Retry-After of a waiter that gives up (--upstream-retry-after) */
};

int srv_up_waitset_new(up_waitset **out, unsigned retry_s) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    (*out)->retry_s = retry_s;
    pthread_mutex_init(&(*out)->mu, NULL);
    pthread_condattr_init(&(*out)->ca);
    pthread_condattr_setclock(&(*out)->ca, CLOCK_MONOTONIC);
    return HK_OK;
}

void srv_up_waitset_free(up_waitset *w) {
    if (!w) return;
    for (up_wait *e = w->head, *n; e; e = n) {
        n = e->next;
        pthread_cond_destroy(&e->cv);
        free(e->key);
        free(e);
    }
    pthread_condattr_destroy(&w->ca);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void unlink_entry(up_waitset *w, up_wait *e) {
    for (up_wait **p = &w->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    pthread_cond_destroy(&e->cv); /* users == 0: nobody waits on it */
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
        if (e && pthread_cond_init(&e->cv, &w->ca) != 0) {
            free(e->key);
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
    double until = hk__now_s() + wait_s;
    const char *why = NULL;
    while (!e->done) {
        double left = until - hk__now_s();
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
        /* a wake-up that is not the slice's end nor the leader's: counted, for the tests */
        if (pthread_cond_timedwait(&e->cv, &w->mu, &ts) == 0 && !e->done) w->futile++;
    }
    if (e->done) *leader = e->failed;
    else {
        /* given up: the leader goes on for the others; this client is told to come back */
        leader->status = 503;
        leader->retry_after = w->retry_s;
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
        pthread_cond_broadcast(&e->cv); /* this key's waiters, before the entry may go */
        if (--e->users == 0) unlink_entry(w, e);
    }
    pthread_mutex_unlock(&w->mu);
}

unsigned long srv_up_futile_wakeups(up_waitset *w) {
    pthread_mutex_lock(&w->mu);
    unsigned long n = w->futile;
    pthread_mutex_unlock(&w->mu);
    return n;
}
