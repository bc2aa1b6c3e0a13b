/* The cross-process half of pull-through coalescing: an exclusive flock of
 * <root>/.locks/<repo folder>/<name>.lock, held by the process that fetches a revision or blob
 * while other mirrors sharing the store wait for it.
 *
 * The wait wakes as soon as the holder lets go: the holder's close of the lock file (srv_up_unlock
 * unlocks and closes; a crashed holder's fds are closed by the kernel) is an inotify event on that
 * file, watched before the first try so that no release between a try and the wait is missed.
 * (A 20 ms poll, the earlier way, put every waiter up to 20 ms behind the holder's answer.) Where
 * inotify is not to be had (another OS, or the user's inotify instances used up) the wait polls. */
#include "server/srv_upstream.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

/* How often a waiter looks at the mirror's stop and its clients' disconnects (and, without inotify,
 * retries the lock). */
#define LOCK_CHECK_MS 100
#define LOCK_POLL_MS 20

static int check_ms = LOCK_CHECK_MS;
static _Atomic unsigned wakeups; /* the waits' turns, for the tests */

/* An inotify descriptor watching path for closes (and its removal), or -1. */
static int watch_closes(const char *path) {
#ifdef __linux__
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in < 0) return -1;
    if (inotify_add_watch(in, path, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
        close(in);
        return -1;
    }
    return in;
#else
    (void)path;
    return -1;
#endif
}

/* Wait up to ms for an event on in (or sleep ms without one), then drop what arrived. */
static void wait_event(int in, int ms) {
    if (in < 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
        nanosleep(&ts, NULL);
        return;
    }
    struct pollfd p = {.fd = in, .events = POLLIN};
    if (poll(&p, 1, ms) > 0) {
        char buf[4096];
        while (read(in, buf, sizeof buf) > 0) {
        }
    }
}

int srv_up_lock(srv_upstream *u, const char *root, const char *repo_dir, const char *name, double wait_s) {
    const char *folder = strrchr(repo_dir, '/');
    folder = folder ? folder + 1 : repo_dir;
    char *dir = hk__asprintf("%s/.locks/%s", root, folder);
    char *path = dir ? hk__asprintf("%s/%s.lock", dir, name) : NULL;
    int fd = -1;
    if (path && hk__mkdirs(dir, 0755) == HK_OK) fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    hk_clear_error();
    free(dir);
    if (fd < 0) {
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 || (errno != EWOULDBLOCK && errno != EINTR)) {
        free(path); /* taken at once, or no locking here: done unlocked */
        return fd;
    }
    int in = watch_closes(path); /* before the next try: a release after it is an event */
    free(path);
    const int step_ms = in >= 0 ? check_ms : LOCK_POLL_MS;
    double until = hk__now_s() + wait_s;
    for (unsigned n = 0;; n++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) break;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        bool check = in >= 0 || (n & 7) == 7; /* polling: a client's socket is looked at every 8th */
        if (hk__now_s() >= until || atomic_load(&u->stopping) || (check && srv_up_client_gone())) {
            close(fd);
            fd = -2;
            break;
        }
        atomic_fetch_add(&wakeups, 1);
        double left_ms = (until - hk__now_s()) * 1000.0;
        wait_event(in, left_ms < step_ms ? (left_ms > 1.0 ? (int)left_ms : 1) : step_ms);
    }
    if (in >= 0) close(in);
    return fd;
}

void srv_up_unlock(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd); /* the close is what wakes the waiters of other processes (watch_closes) */
}

#ifdef HK_TEST_HOOKS
void srv_up_lock_test_hooks(int wait_check_ms, unsigned *turns) {
    if (wait_check_ms > 0) check_ms = wait_check_ms;
    if (turns) *turns = atomic_load(&wakeups);
}
#endif
