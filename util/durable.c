/* Durability primitives: flush a file's or a directory's entry to stable storage, start a file's
 * writeback early. The cache commits bytes in batches built from these (cache/blobs.c,
 * client/stage.c) instead of one blocking fsync per file in the download loop. */
#define _GNU_SOURCE /* sync_file_range */
#include "internal.h"
#include "util/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

int hk__fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* a repo folder linked to another disk is flushed there */
    if (fd < 0) {
        int e = errno;
        return hk__fail(hk__errno_code(e), "cannot open %s to flush it to disk: %s", path, strerror(e));
    }
    int r = fsync(fd);
    int e = errno;
    close(fd);
    if (r != 0)
        return hk__fail(hk__errno_code(e), "cannot flush %s to disk: %s (the disk or file system failed a write; "
                        "check it and pull again)", path, strerror(e));
    return HK_OK;
}

static int sync_dir_entry(void *ud, const hk_walk_entry *e, int post) {
    (void)ud;
    (void)post;
    if (!S_ISDIR(e->st.st_mode)) return HK_WALK_CONTINUE;
    return hk__fsync_path(e->path) == HK_OK ? HK_WALK_CONTINUE : -1;
}

int hk__fsync_dir_tree(const char *dir) {
    int rc = hk__walk(dir, -1, 0, sync_dir_entry, NULL);
    return rc ? rc : hk__fsync_path(dir);
}

/* Parallel fdatasync: concurrent flushes of one file system share its journal commits (ext4, xfs
 * group them), where one after another each file waits for a commit of its own. */
#define SYNC_THREADS 8

typedef struct sync_batch {
    const char *const *paths;
    size_t n;
    atomic_size_t next;
    atomic_size_t failed;    /* index of a path that failed, n: none */
    int failed_errno;        /* written by the thread that set `failed` first */
} sync_batch;

static int fdatasync_errno(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return errno;
    int e = fdatasync(fd) == 0 ? 0 : errno;
    close(fd);
    return e;
}

static void *sync_worker(void *arg) {
    sync_batch *b = arg;
    for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n && atomic_load(&b->failed) == b->n;) {
        int e = fdatasync_errno(b->paths[i]);
        size_t none = b->n;
        if (e && atomic_compare_exchange_strong(&b->failed, &none, i)) b->failed_errno = e;
    }
    return NULL;
}

int hk__fdatasync_all(const char *const *paths, size_t n) {
    sync_batch b = {paths, n, 0, n, 0};
    pthread_t t[SYNC_THREADS];
    size_t nt = 0;
    size_t want = n / 4 < SYNC_THREADS ? n / 4 : SYNC_THREADS; /* a few files: this thread alone */
    while (nt < want && hk__thread_start(&t[nt], sync_worker, &b) == 0) nt++;
    sync_worker(&b);
    for (size_t i = 0; i < nt; i++) pthread_join(t[i], NULL);
    size_t bad = atomic_load(&b.failed);
    if (bad == n) return HK_OK;
    return hk__fail(hk__errno_code(b.failed_errno), "cannot flush %s to disk: %s (the disk or file system failed "
                    "a write; check it and pull again)", paths[bad], strerror(b.failed_errno));
}

void hk__writeback_start(int fd) {
    /* a hint: where the file system lacks it (EINVAL, ENOSYS) the final flush does all the work */
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* syncfs reports the file system's writeback errors only since Linux 5.8 (errseq on the
 * superblock); before, it returned 0 whatever failed, so it cannot stand for fdatasync there. */
static bool syncfs_reports_errors(void) {
#ifdef __linux__
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    return major > 5 || (major == 5 && minor >= 8);
#else
    return false;
#endif
}

/* Dirty + Writeback of /proc/meminfo in bytes; ULLONG_MAX when unknown (then syncfs is not used). */
static unsigned long long dirty_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return (unsigned long long)-1;
    char line[128];
    unsigned long long sum = 0, kb;
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Dirty: %llu kB", &kb) == 1 || sscanf(line, "Writeback: %llu kB", &kb) == 1) {
            sum += kb << 10;
            seen++;
        }
    }
    fclose(f);
    return seen == 2 ? sum : (unsigned long long)-1;
}

int hk__syncfs_if_cheap(bool *out_done, const char *path, size_t n) {
    *out_done = false;
    if (n < HK__SYNCFS_MIN_FILES) return HK_OK;
    const char *force = NULL;
#ifdef HK_TEST_HOOKS
    force = getenv("HUBKERN_TEST_FLUSH"); /* "each" or "syncfs": the benchmark's and tests' choice */
    if (force && strcmp(force, "each") == 0) return HK_OK;
#endif
    if (!force && (!syncfs_reports_errors() || dirty_bytes() > HK__SYNCFS_MAX_DIRTY)) return HK_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (fd < 0) return HK_OK; /* the caller's own flushes report what is wrong with it */
    int r = syncfs(fd);
    int e = errno;
    close(fd);
    if (r != 0)
        return hk__fail(hk__errno_code(e), "cannot flush the file system of %s to disk: %s (the disk or file system "
                        "failed a write; check it and pull again)", path, strerror(e));
    *out_done = true;
    return HK_OK;
}
