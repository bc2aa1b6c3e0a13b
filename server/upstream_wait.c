/* Coalescing inside one process: the first thread to ask for a key leads (does the upstream work);
 * the others wait on a condition variable until it is done and then read the store. Across
 * processes the leaders meet again at an flock (upstream_blob.c, upstream_rev.c). */
#include "server/srv_upstream.h"

#include <stdlib.h>
#include <string.h>

typedef struct up_wait {
    char *key;
    up_answer failed; /* the leader's answer when it failed (status 0: it succeeded) */
    bool done;
    unsigned users; /* leader + waiters still holding the entry */
    struct up_wait *next;
} up_wait;

struct up_waitset {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    up_wait *head;
};

int hk_up_waitset_new(up_waitset **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    pthread_cond_init(&(*out)->cv, NULL);
    return HK_OK;
}

void hk_up_waitset_free(up_waitset *w) {
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

bool hk_up_enter(up_waitset *w, const char *key, up_answer *leader) {
    memset(leader, 0, sizeof *leader);
    pthread_mutex_lock(&w->mu);
    up_wait *e = w->head;
    while (e && (e->done || strcmp(e->key, key) != 0)) e = e->next;
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
        return true; /* out of memory: lead without coalescing; hk_up_leave finds nothing */
    }
    e->users++;
    while (!e->done) pthread_cond_wait(&w->cv, &w->mu);
    *leader = e->failed;
    if (--e->users == 0) unlink_entry(w, e);
    pthread_mutex_unlock(&w->mu);
    return false;
}

void hk_up_leave(up_waitset *w, const char *key, const up_answer *failed) {
    pthread_mutex_lock(&w->mu);
    up_wait *e = w->head;
    while (e && (e->done || strcmp(e->key, key) != 0)) e = e->next;
    if (e) {
        e->done = true;
        if (failed) e->failed = *failed;
        if (--e->users == 0) unlink_entry(w, e);
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}
