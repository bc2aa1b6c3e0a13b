/* Threads the library starts for its own work. */
#include "internal.h"

#include <signal.h>

int hk__thread_start(pthread_t *out, void *(*fn)(void *), void *arg) {
    /* every signal blocked in the new thread (it inherits the mask it was created with): the
     * application's signals stay with its own threads, whose handlers and sigwait expect them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(out, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}
