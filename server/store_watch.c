/* Folder watches that let a request skip re-proving what no change has touched (issue 25).
 *
 * A kept verdict about a folder (the repo folder is a folder, refs/ and snapshots/ have their
 * stamps) was proven by a stat() on every request: 3 of a warm listing's 6 syscalls. The folders
 * behind such verdicts are watched with inotify, and every change the kernel reports on any of
 * them moves one generation. A verdict proven by its stat() at generation g holds, without the
 * stat, for as long as the generation is still g.
 *
 * Why that is as strong as the stat(): inotify queues an event inside the system call that makes
 * the change, before it returns, so a change that completed before a request began is in the
 * queue when the request drains it (once, on first use: srv_watch_gen). A verdict is only ever
 * stamped with the generation drained before its own stat(), on a folder whose watch was already
 * in place: a change before the stat() shows in the stat, one after it moves the generation. Every
 * kind of change that moves a folder's stamps (an entry made, removed or renamed; chmod, touch,
 * xattr; the folder removed or moved) is an event in WATCH_MASK. The queue overflowing is an event
 * too. Only local file systems are watched: a change made by another host on a network file
 * system raises no event here, so there every verdict is proven by its stat() as before.
 *
 * The generation is per request: srv_watch_begin / srv_watch_end bracket one on the thread that
 * answers it (http_daemon.c), and outside that bracket (transfer threads, housekeeping) no verdict
 * may be skipped: srv_watch_gen answers 0. */
#define _GNU_SOURCE
#include "server/srv_internal.h"

#include "internal.h"

#include <errno.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define WATCH_MASK                                                                                     \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | \
     IN_ONLYDIR)

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

struct srv_watch {
    int fd;
    pthread_mutex_t mu;  /* one drain at a time: a reader must see the generation its drain moved */
    atomic_uint_least64_t gen; /* starts at 1: 0 is "no verdict may be skipped" */
    dev_t dev; /* the root's file system: a folder on another (a mount inside the store) is not watched */
    int max_wd; /* the highest watch descriptor given (they count up from 1), under mu */
};

/* Watches are the user's (fs.inotify.max_user_watches, shared with every other program they run)
 * and stay until the folder goes: at most this many, so a store of many repos cannot take them all;
 * a folder past the cap is simply proven by its stat() on every request. */
#define WATCH_MAX 1024

/* The request being answered on this thread: the watch it drains, whether it drained it yet, and
 * the generation that drain left. */
static _Thread_local srv_watch *tls_watch;
static _Thread_local bool tls_drained;
static _Thread_local uint64_t tls_gen;

int srv_watch_new(srv_watch **out, int root_fd) {
    *out = NULL;
    struct statfs fs;
    struct stat st;
    if (root_fd < 0 || fstatfs(root_fd, &fs) != 0 || fstat(root_fd, &st) != 0) return HK_OK;
    /* the file systems whose every change, whoever makes it, raises the event here */
    switch ((unsigned long)fs.f_type) {
    case EXT4_SUPER_MAGIC: case XFS_SUPER_MAGIC: case BTRFS_SUPER_MAGIC: case TMPFS_MAGIC: break;
    default: return HK_OK;
    }
    srv_watch *w = calloc(1, sizeof *w);
    if (!w) return hk__fail(HK_ERR_NOMEM, "out of memory");
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) { /* no inotify (limits, seccomp): every verdict by its stat() */
        free(w);
        return HK_OK;
    }
    pthread_mutex_init(&w->mu, NULL);
    atomic_init(&w->gen, 1);
    w->dev = st.st_dev;
    *out = w;
    return HK_OK;
}

void srv_watch_free(srv_watch *w) {
    if (!w) return;
    close(w->fd);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

bool srv_watch_dir(srv_watch *w, int dir_fd) {
    struct stat st; /* a folder mounted inside the store may be a network file system's */
    if (!w || dir_fd < 0 || fstat(dir_fd, &st) != 0 || st.st_dev != w->dev) return false;
    char p[64]; /* the folder the descriptor names, whatever path leads to it now */
    snprintf(p, sizeof p, "/proc/self/fd/%d", dir_fd);
    pthread_mutex_lock(&w->mu);
    int wd = w->max_wd < WATCH_MAX ? inotify_add_watch(w->fd, p, WATCH_MASK) : -1;
    if (wd > w->max_wd) w->max_wd = wd; /* (a folder already watched gets its old, lower one) */
    pthread_mutex_unlock(&w->mu);
    return wd >= 0;
}

void srv_watch_begin(srv_watch *w) {
    tls_watch = w;
    tls_drained = false;
    tls_gen = 0;
}

void srv_watch_end(void) {
    tls_watch = NULL;
    tls_drained = false;
    tls_gen = 0;
}

uint64_t srv_watch_gen(srv_watch *w) {
    if (!w || w != tls_watch) return 0;
    if (tls_drained) return tls_gen;
    pthread_mutex_lock(&w->mu);
    /* what the events say does not matter, only that there were some */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool moved = false, failed = false;
    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0) {
            moved = true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        failed = n == 0 || errno != EAGAIN; /* EAGAIN: drained; anything else: nothing is known */
        break;
    }
    if (moved) atomic_fetch_add(&w->gen, 1);
    tls_gen = failed ? 0 : atomic_load(&w->gen);
    pthread_mutex_unlock(&w->mu);
    tls_drained = true;
    return tls_gen;
}
