/* Misses off the pool's threads (hubkern serve --upstream): the mirror's workers never wait on an
 * upstream. A request whose revision, file or pass-through answer needs the upstream records that
 * step (srv_up_defer) instead of doing it; the access handler then submits the step to this queue
 * and suspends its connection. A few transfer threads of the server's own run the steps with the
 * blocking code of upstream_rev.c / upstream_blob.c (which still coalesces with the other
 * processes over the store); the end of a step, success or not, resumes every connection that
 * waits on its key, and their handlers run again and answer from the store, or with the step's
 * answer (srv_up_step_done).
 *
 * Against hostile clients: the steps in flight (running or waiting for a thread) are bounded
 * (--upstream-queue); one more distinct miss gets a 503 with Retry-After, never a thread or an
 * unbounded list. Requests for a key already in flight join it at no cost. The connections waiting
 * on a step are looked at while it runs: one whose client closed is resumed at once (answered into
 * a closed socket and cleaned up by libmicrohttpd), and a step whose clients all left is given up.
 * Stopping ends the running steps (u->stopping), answers the waiting ones with a 503, and resumes
 * every suspended connection before the daemon stops (libmicrohttpd refuses to stop with one). */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/srv_http.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UP_REQ_STEPS 4     /* upstream steps one request may wait for (revision, file, overview, refs) */
#define GONE_CHECK_S 0.1   /* how often a running step looks at its waiting clients */

typedef struct up_job up_job;
typedef struct up_queue up_queue;

struct up_req {
    up_result steps[UP_REQ_STEPS]; /* this request's finished steps, in order */
    unsigned n_steps;
    char *pkey; /* the step recorded by this dispatch, not yet submitted (NULL: none): its job's key */
    char *pstep; /* and the key this request finds its end under (srv_up_step_done) */
    char *wkey;  /* while suspended: that key */
    up_job_fn pfn;
    void *parg;
    void (*pfree)(void *);
    int fd;          /* the client's socket, for noticing that it left */
    char client[72]; /* its budget key */
    struct MHD_Connection *conn; /* while suspended */
    up_req *next;    /* the next waiter of the same job */
};

struct up_job {
    char *key;
    up_job_fn fn;
    void *arg;
    void (*free_arg)(void *);
    char client[72];  /* the budget of the request that asked first is spent */
    up_req *waiters;  /* suspended connections (q->mu) */
    double gone_at;   /* when the waiters were last looked at */
    double queued_at; /* when it was submitted */
    up_job *next_all, *next_q;
};

struct up_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_server *srv;
    up_job *all;            /* every step in flight, running or queued */
    up_job *head, *tail;    /* queued, oldest first */
    unsigned n_jobs, cap;
    bool closed;
    pthread_t *threads;
    unsigned n_threads;
};

/* The request a pool thread answers: its req_ctx's slot, filled on its first step (a hit, the
 * common case, allocates nothing), its socket and budget key. */
static _Thread_local up_req **t_slot;
static _Thread_local int t_fd = -1;
static _Thread_local char t_key[72];
static up_req *cur_req(void) { return t_slot ? *t_slot : NULL; }
static _Thread_local up_job *t_job;  /* the step a transfer thread runs */
static _Thread_local up_queue *t_q;

static void answer(up_answer *a, unsigned status, unsigned retry, const char *msg) {
    memset(a, 0, sizeof *a);
    a->status = status;
    a->retry_after = retry;
    snprintf(a->msg, sizeof a->msg, "%s", msg);
}

up_req *srv_up_req_new(void) {
    up_req *r = calloc(1, sizeof *r);
    if (r) r->fd = -1;
    return r;
}

static void clear_pending(up_req *r) {
    if (r->pfree && r->parg) r->pfree(r->parg);
    free(r->pkey);
    free(r->pstep);
    r->pkey = r->pstep = NULL;
    r->parg = NULL;
    r->pfn = NULL;
    r->pfree = NULL;
}

void srv_up_req_free(up_req *r) {
    if (!r) return;
    clear_pending(r);
    free(r->wkey);
    for (unsigned i = 0; i < r->n_steps; i++) {
        free(r->steps[i].key);
        free(r->steps[i].body);
    }
    free(r);
}

void srv_up_req_enter(up_req **slot, int fd, const char *client) {
    t_slot = slot;
    t_fd = fd;
    size_t n = client ? strnlen(client, sizeof t_key - 1) : 0;
    memcpy(t_key, client, n);
    t_key[n] = '\0';
}

bool srv_up_req_leave(void) {
    bool pending = cur_req() && cur_req()->pkey;
    t_slot = NULL;
    t_fd = -1;
    return pending;
}

bool srv_up_deferring(void) { return t_slot != NULL; }

bool srv_up_has_steps(void) { return cur_req() && cur_req()->n_steps > 0; }

up_mark srv_up_req_mark(const up_req *r, unsigned i) { return r && i < r->n_steps ? r->steps[i].mark : UP_NONE; }

bool srv_up_deferred(void) { return cur_req() && cur_req()->pkey; }

const up_result *srv_up_step_done(const char *key) {
    if (!cur_req() || !key) return NULL;
    for (unsigned i = 0; i < cur_req()->n_steps; i++)
        if (cur_req()->steps[i].key && strcmp(cur_req()->steps[i].key, key) == 0) return &cur_req()->steps[i];
    return NULL;
}

int srv_up_defer(const char *key, const char *step_key, up_job_fn fn, void *arg, void (*free_arg)(void *),
                 up_answer *ans) {
    if (!*t_slot && (*t_slot = srv_up_req_new())) {
        (*t_slot)->fd = t_fd;
        memcpy((*t_slot)->client, t_key, sizeof t_key);
    }
    up_req *r = *t_slot;
    if (!r) {
        if (free_arg) free_arg(arg);
        answer(ans, 503, HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT, "Upstream unavailable: out of memory");
        return 1;
    }
    /* what a caller that answers it sends: dropped by srv_queue while the step is pending */
    answer(ans, 503, 1, "Upstream transfer pending");
    if (!arg || r->pkey) { /* out of memory, or a step already recorded: this one comes next time */
        if (arg && free_arg) free_arg(arg);
        if (!arg) answer(ans, 503, HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT, "Upstream unavailable: out of memory");
        return 1;
    }
    if (r->n_steps >= UP_REQ_STEPS) { /* a loop would be a bug; never an endless one */
        if (free_arg) free_arg(arg);
        answer(ans, 503, HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT, "Upstream unavailable: this request needs too many upstream steps");
        return 1;
    }
    r->pkey = hk__strdup(key);
    r->pstep = hk__strdup(step_key ? step_key : key);
    if (!r->pkey || !r->pstep) {
        free(r->pkey);
        free(r->pstep);
        r->pkey = r->pstep = NULL;
        hk_clear_error();
        if (free_arg) free_arg(arg);
        answer(ans, 503, HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT, "Upstream unavailable: out of memory");
        return 1;
    }
    r->pfn = fn;
    r->parg = arg;
    r->pfree = free_arg;
    return 1;
}

/* The step's end into the waiter's list of finished steps (q->mu held; the connection is
 * suspended, so its handler does not run). The body, when one was kept for the step's first
 * client only (too large for the memo), goes to that client, as a coalesced waiter never had it. */
static void deliver(up_req *r, const up_result *res, bool first, char **body) {
    if (r->n_steps < UP_REQ_STEPS) {
        up_result *s = &r->steps[r->n_steps++];
        memset(s, 0, sizeof *s);
        s->key = r->wkey; /* its own key: a file of another path that joined a blob's transfer */
        r->wkey = NULL;
        s->out = res->out;
        s->ans = res->ans;
        s->mark = !first && res->mark == UP_MISS ? UP_COALESCED : res->mark;
        if (first && body) {
            s->body = *body;
            *body = NULL;
        }
    }
    hk_clear_error();
}

/* Resume a list of waiters taken off their job (their connections stay suspended until here). */
static void resume_all(up_req *list) {
    while (list) {
        up_req *n = list->next;
        struct MHD_Connection *c = list->conn;
        list->conn = NULL;
        list->next = NULL;
        MHD_resume_connection(c);
        list = n;
    }
}

/* Has every client waiting on this thread's step left? Those that left are resumed now. */
static bool job_gone(void) {
    up_job *j = t_job;
    up_queue *q = t_q;
    if (!j || !q) return false;
    up_req *gone = NULL;
    pthread_mutex_lock(&q->mu);
    double now = hk__now_s();
    if (now - j->gone_at >= GONE_CHECK_S) {
        j->gone_at = now;
        up_result left = {.out = 1};
        answer(&left.ans, 503, q->srv->up->retry_s, "Upstream unavailable: the client disconnected");
        for (up_req **p = &j->waiters; *p;) {
            up_req *r = *p;
            struct pollfd pf = {.fd = r->fd, .events = POLLRDHUP};
            bool closed = r->fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
            if (!closed) {
                p = &r->next;
                continue;
            }
            *p = r->next;
            deliver(r, &left, false, NULL);
            r->next = gone;
            gone = r;
        }
    }
    bool all = j->waiters == NULL;
    pthread_mutex_unlock(&q->mu);
    resume_all(gone);
    return all;
}

/* The step is over: every waiter gets its end and is resumed; the job is freed. */
static void finish(up_queue *q, up_job *j, up_result *res) {
    pthread_mutex_lock(&q->mu);
    for (up_job **p = &q->all; *p; p = &(*p)->next_all)
        if (*p == j) {
            *p = j->next_all;
            break;
        }
    q->n_jobs--;
    up_req *list = j->waiters;
    j->waiters = NULL;
    bool first = true;
    for (up_req *r = list; r; r = r->next) {
        deliver(r, res, first, &res->body);
        first = false;
    }
    pthread_mutex_unlock(&q->mu);
    resume_all(list);
    free(res->body);
    if (j->free_arg) j->free_arg(j->arg);
    free(j->key);
    free(j);
}

static void *worker(void *p) {
    up_queue *q = p;
    t_q = q;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->closed) pthread_cond_wait(&q->cv, &q->mu);
        up_job *j = q->head;
        if (!j) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        q->head = j->next_q;
        if (!q->head) q->tail = NULL;
        bool closed = q->closed;
        j->gone_at = 0;
        pthread_mutex_unlock(&q->mu);
        up_result res;
        memset(&res, 0, sizeof res);
        t_job = j;
        if (closed || atomic_load(&q->srv->up->stopping)) {
            res.out = 1;
            answer(&res.ans, 503, q->srv->up->retry_s, "Upstream unavailable: the mirror is stopping");
        } else if (hk__now_s() - j->queued_at > srv_up_wait_s(q->srv->up, 0)) {
            /* a wait for a thread counts as a wait for a transfer: past the deadline, come back */
            res.out = 1;
            answer(&res.ans, 503, q->srv->up->retry_s, "Upstream unavailable: every transfer thread was busy past --upstream-deadline");
        } else if (job_gone()) { /* every client left while it waited for a thread */
            res.out = 1;
            answer(&res.ans, 503, q->srv->up->retry_s, "Upstream unavailable: the client disconnected");
        } else {
            srv_up_client_set(-1, j->client);
            srv_up_client_gone_hook(job_gone);
            j->fn(q->srv, j->arg, &res);
            srv_up_client_gone_hook(NULL);
            srv_up_client_set(-1, NULL);
            hk_clear_error();
        }
        t_job = NULL;
        finish(q, j, &res);
    }
    return NULL;
}

int srv_up_queue_start(srv_server *srv, unsigned threads, unsigned cap) {
    up_queue *q = calloc(1, sizeof *q);
    if (!q || !(q->threads = calloc(threads, sizeof *q->threads))) {
        free(q);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->srv = srv;
    q->cap = cap;
    srv->up->queue = q;
    for (unsigned i = 0; i < threads; i++) {
        if (pthread_create(&q->threads[i], NULL, worker, q) != 0) {
            srv_up_queue_free(srv->up);
            return hk__fail(HK_ERR_INTERNAL, "cannot start the upstream transfer threads");
        }
        q->n_threads = i + 1;
    }
    return HK_OK;
}

void srv_up_queue_stop(srv_upstream *u) {
    up_queue *q = u ? u->queue : NULL;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    /* the threads drain what is queued (answered 503) and end the running steps (u->stopping) */
    for (unsigned i = 0; i < q->n_threads; i++) pthread_join(q->threads[i], NULL);
    q->n_threads = 0; /* joined once; the queue stays (closed) while the daemon's threads may ask it */
}

void srv_up_queue_free(srv_upstream *u) {
    up_queue *q = u ? u->queue : NULL;
    if (!q) return;
    srv_up_queue_stop(u);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->threads);
    free(q);
    u->queue = NULL;
}

int srv_up_submit(srv_upstream *u, up_req *r, struct MHD_Connection *c, up_answer *refused) {
    up_queue *q = u->queue;
    if (!q) { /* stopped: the daemon is closing its connections */
        clear_pending(r);
        answer(refused, 503, u->retry_s, "Upstream unavailable: the mirror is stopping");
        return 1;
    }
    srv_server *srv = q->srv;
    pthread_mutex_lock(&q->mu);
    up_job *j = q->all;
    while (j && strcmp(j->key, r->pkey) != 0) j = j->next_all;
    int rc = 0;
    if (q->closed) {
        answer(refused, 503, u->retry_s, "Upstream unavailable: the mirror is stopping");
        rc = 1;
    } else if (j) { /* in flight already: this request waits for the same end */
        atomic_fetch_add(&srv->metrics.coalesced, 1);
    } else if (q->n_jobs >= q->cap) {
        char msg[160];
        snprintf(msg, sizeof msg, "Upstream busy: %u distinct misses in flight (--upstream-queue); retry later", q->cap);
        answer(refused, 503, 2, msg);
        rc = 1;
    } else if (!(j = calloc(1, sizeof *j))) {
        answer(refused, 503, u->retry_s, "Upstream unavailable: out of memory");
        rc = 1;
    } else {
        j->key = r->pkey;
        j->fn = r->pfn;
        j->arg = r->parg;
        j->free_arg = r->pfree;
        r->pkey = NULL;
        r->parg = NULL;
        memcpy(j->client, r->client, sizeof j->client);
        j->queued_at = hk__now_s();
        j->next_all = q->all;
        q->all = j;
        if (q->tail) q->tail->next_q = j;
        else q->head = j;
        q->tail = j;
        q->n_jobs++;
        pthread_cond_signal(&q->cv);
    }
    if (rc == 0) {
        /* the first waiter (whose budget paid) stays first: it gets a body kept for it alone */
        if (j->waiters) {
            r->next = j->waiters->next;
            j->waiters->next = r;
        } else {
            r->next = NULL;
            j->waiters = r;
        }
        r->conn = c;
        free(r->wkey);
        r->wkey = r->pstep;
        r->pstep = NULL;
        /* under q->mu: the step cannot end (and resume it) before it is suspended */
        MHD_suspend_connection(c);
    }
    clear_pending(r);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

unsigned srv_up_queue_depth(srv_upstream *u) {
    up_queue *q = u ? u->queue : NULL;
    if (!q) return 0;
    pthread_mutex_lock(&q->mu);
    unsigned n = q->n_jobs;
    pthread_mutex_unlock(&q->mu);
    return n;
}
