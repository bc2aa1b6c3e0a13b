/* The background flusher (util/flusher.h): one thread, one file at a time. */
#include "internal.h"
#include "util/flusher.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One file at a time, and busy at most half the time: a file handed over while the last is still
 * being flushed, or sooner after that flush than it took, is left to the final pass. Flushes thus
 * never queue behind a slow disk and get rarer as they get slower (a device's cache flush covers
 * what every file wrote so far). A 300 MB pull of 20 files and a 2 GB one of 202, medians of 8 in
 * one run (bench/durable_pull_bench.md, stop 38): no early flush 0.85 / 5.45 s, one at a time
 * 0.70 / 5.61, this 0.69 / 5.43; a queue of every file, in another run, 0.71 / 6.03 against 0.96 /
 * 5.85 without. */
struct hk_flusher {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work arrived, or stop */
    pthread_t thread;
    bool started, start_failed, stop;
    bool busy;   /* a file is handed over or being flushed */
    double idle_until; /* takes no file before (monotonic s): as long after a flush as it took */
    int fd;      /* the file handed over, -1: taken by the thread */
    char *label;
    int failed_errno; /* the first failure's, 0: none */
    char *failed_label;
};

static void *flusher_main(void *arg) {
    hk_flusher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->fd < 0 && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        if (f->fd < 0) break; /* stopped, nothing left */
        int fd = f->fd;
        char *label = f->label;
        f->fd = -1;
        f->label = NULL;
        pthread_mutex_unlock(&f->mu);
        int e = 0;
        double t0 = hk__now_s();
        while (fdatasync(fd) != 0 && (e = errno) == EINTR) e = 0;
        double t1 = hk__now_s();
        close(fd);
        pthread_mutex_lock(&f->mu);
        f->busy = false;
        f->idle_until = t1 + (t1 - t0);
        if (e && !f->failed_errno) {
            f->failed_errno = e;
            f->failed_label = label;
            label = NULL;
        }
        free(label);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

hk_flusher *hk__flusher_new(void) {
    hk_flusher *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = -1;
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
        f->started = hk__thread_start(&f->thread, flusher_main, f) == 0;
        f->start_failed = !f->started;
    }
    bool taken = f->started && !f->busy && hk__now_s() >= f->idle_until;
    if (taken) {
        f->busy = true;
        f->fd = fd;
        f->label = label ? strdup(label) : NULL;
        pthread_cond_signal(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    if (!taken) close(fd);
}

/* Stop the thread once its file is flushed; the first failure's errno (0: none), its label in *label. */
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
