/* The background flusher (util/flusher.h): one thread, a bounded queue of descriptors. */
#include "internal.h"
#include "util/flusher.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Files waiting at most: each holds a descriptor. Past it the disk is behind the network, and
 * the final pass flushes the rest just as soon. */
#define FLUSHER_MAX_PENDING 32

typedef struct pending {
    int fd;
    char *label;
} pending;

struct hk_flusher {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work arrived, or stop */
    pthread_t thread;
    bool started, start_failed, stop;
    pending q[FLUSHER_MAX_PENDING]; /* a ring */
    size_t head, len;
    int failed_errno; /* the first failure's, 0: none */
    char *failed_label;
};

static void *flusher_main(void *arg) {
    hk_flusher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->len == 0 && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        if (f->len == 0) break; /* stopped and drained */
        pending p = f->q[f->head];
        f->head = (f->head + 1) % FLUSHER_MAX_PENDING;
        f->len--;
        pthread_mutex_unlock(&f->mu);
        int e = 0;
        while (fdatasync(p.fd) != 0 && (e = errno) == EINTR) e = 0;
        close(p.fd);
        pthread_mutex_lock(&f->mu);
        if (e && !f->failed_errno) {
            f->failed_errno = e;
            f->failed_label = p.label;
            p.label = NULL;
        }
        free(p.label);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

hk_flusher *hk__flusher_new(void) {
    hk_flusher *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return NULL;
    }
    if (pthread_cond_init(&f->cv, NULL) != 0) {
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    return f;
}

void hk__flusher_give(hk_flusher *f, int fd, const char *label) {
    if (!f) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&f->mu);
    if (!f->started && !f->start_failed) {
        /* started by the first file: a pull of small files never pays for a thread */
        f->started = pthread_create(&f->thread, NULL, flusher_main, f) == 0;
        f->start_failed = !f->started;
    }
    bool taken = f->started && f->len < FLUSHER_MAX_PENDING;
    if (taken) {
        pending *p = &f->q[(f->head + f->len) % FLUSHER_MAX_PENDING];
        p->fd = fd;
        p->label = label ? strdup(label) : NULL;
        f->len++;
        pthread_cond_signal(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    if (!taken) close(fd);
}

/* Stop the thread once the queue is empty; the first failure's errno (0: none), its label in *label. */
static int drain(hk_flusher *f, char **label) {
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_signal(&f->cv);
    bool started = f->started;
    pthread_mutex_unlock(&f->mu);
    if (started) pthread_join(f->thread, NULL);
    int e = f->failed_errno;
    *label = f->failed_label;
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return e;
}

int hk__flusher_end(hk_flusher *f) {
    if (!f) return HK_OK;
    char *label = NULL;
    int e = drain(f, &label);
    int rc = HK_OK;
    if (e)
        rc = hk__fail(hk__errno_code(e), "cannot flush %s to disk: %s (the disk or file system failed a write; "
                      "check it and pull again)", label ? label : "a downloaded file", strerror(e));
    free(label);
    return rc;
}

void hk__flusher_abandon(hk_flusher *f) {
    if (!f) return;
    char *label = NULL;
    (void)drain(f, &label);
    free(label);
}
