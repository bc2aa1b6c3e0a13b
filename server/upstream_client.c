/* The client of the request a thread answers, and the per-client budgets of upstream misses: each
 * client (its token when the mirror has tokens, else its address) may cause --client-miss-budget
 * misses per --client-miss-window (a token bucket), so that one client cannot spend the fleet's
 * upstream quota nor bring on the upstream's 429 for everyone. And the clock the tier measures
 * ages and deadlines with. Apart from the transfers (upstream_http.c), the revisions
 * (upstream_rev.c) and the waits (upstream_wait.c), which all ask it. */
#define _GNU_SOURCE /* POLLRDHUP: a client that closed its side */
#include "server/srv_http.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UP_BUDGET_CLIENTS 1024 /* clients whose budgets are remembered (the least recent is forgotten) */

struct up_budget {
    char key[72];   /* "" = free slot */
    double tokens;  /* misses left (may go below 0: misses already on their way) */
    double at;      /* when tokens was last refilled */
};

/* The client of the request this thread answers (a pool worker; on a transfer thread the budget
 * key of the step's first client, its disconnect asked through t_gone). */
static _Thread_local struct {
    int fd;
    char key[72];
} t_client = {-1, ""};

/* a transfer thread asks its step's clients (upstream_queue.c) */
static _Thread_local bool (*t_gone)(void);

void srv_up_client_gone_hook(bool (*gone)(void)) { t_gone = gone; }

void srv_up_client_set(int fd, const char *key) {
    t_client.fd = fd;
    snprintf(t_client.key, sizeof t_client.key, "%s", key ? key : "");
}

bool srv_up_client_gone(void) {
    if (t_gone) return t_gone();
    if (t_client.fd < 0) return false;
    /* the client closed its side (or the connection broke): nobody will read this answer */
    struct pollfd p = {.fd = t_client.fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The budget slot of this thread's client (u->bmu held), refilled to now; NULL without a client. */
static up_budget *budget_of(srv_upstream *u) {
    if (!t_client.key[0] || !u->budgets) return NULL;
    double now = hk__now_s();
    up_budget *b = NULL, *oldest = &u->budgets[0];
    for (size_t i = 0; i < UP_BUDGET_CLIENTS && !b; i++) {
        up_budget *c = &u->budgets[i];
        if (strcmp(c->key, t_client.key) == 0) b = c;
        else if (!c->key[0] || (oldest->key[0] && c->at < oldest->at)) oldest = c;
    }
    if (!b) { /* a new client (or one forgotten): a full budget */
        b = oldest;
        snprintf(b->key, sizeof b->key, "%s", t_client.key);
        b->tokens = u->miss_budget;
        b->at = now;
    }
    double rate = (double)u->miss_budget / (double)u->miss_window;
    b->tokens += (now - b->at) * rate;
    if (b->tokens > u->miss_budget) b->tokens = u->miss_budget;
    b->at = now;
    return b;
}

bool srv_up_client_may_miss(srv_upstream *u, unsigned *retry_s) {
    *retry_s = 0;
    pthread_mutex_lock(&u->bmu);
    up_budget *b = budget_of(u);
    bool ok = !b || b->tokens >= 1.0;
    if (!ok) {
        double wait = (1.0 - b->tokens) * (double)u->miss_window / (double)u->miss_budget;
        *retry_s = wait < 1 ? 1 : (unsigned)(wait + 0.999);
    }
    pthread_mutex_unlock(&u->bmu);
    return ok;
}

void srv_up_client_spend(srv_upstream *u) {
    pthread_mutex_lock(&u->bmu);
    up_budget *b = budget_of(u);
    if (b) b->tokens -= 1.0;
    pthread_mutex_unlock(&u->bmu);
}

up_budget *srv_up_budgets_new(void) { return calloc(UP_BUDGET_CLIENTS, sizeof(up_budget)); }
