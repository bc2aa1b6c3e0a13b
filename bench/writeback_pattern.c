/* The disk side of a durable pull without the network: TOTAL MiB written in 64 KiB writes over
 * NFILES files, CONCURRENT at a time (round-robin, the next file started as one ends), paced at
 * RATE MB/s (0: as fast as the page cache takes them), each file's writeback started every 8 MiB
 * and at its end (sync_file_range, as the pull does); then one fdatasync of every file, 64 at a
 * time. MODE says what else happens while writing:
 *   end    nothing (the pull before stop 38: every flush at the end)
 *   each   a thread fdatasyncs every finished file, queued (a flusher with a queue)
 *   one    the same, but a file finished while the thread is busy is skipped (util/flusher.c
 *          also rests after each flush as long as it took, which this leaves out)
 * Prints the time of the writes, of the thread's tail and of the final pass, one line a run.
 *
 *   writeback_pattern DIR NFILES CONCURRENT TOTAL_MiB RATE_MBps MODE
 *
 * (bench/durable_pull_bench.md, stop 38, says what it showed; DIR's files are left for the caller
 * to delete.) */
#define _GNU_SOURCE /* sync_file_range */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define KICK_STEP (8u << 20)
#define MAX_FILES 8192
#define MAX_CONCURRENT 64

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* the background thread's work: finished files, in order */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int q[MAX_FILES];
    int head, tail;
    bool busy, stop, skip_when_busy;
} bg = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, false, false, false};

static void *bg_main(void *arg) {
    const int *fds = arg;
    pthread_mutex_lock(&bg.mu);
    for (;;) {
        while (bg.head == bg.tail && !bg.stop) pthread_cond_wait(&bg.cv, &bg.mu);
        if (bg.head == bg.tail) break;
        int i = bg.q[bg.head++];
        bg.busy = true;
        pthread_mutex_unlock(&bg.mu);
        fdatasync(fds[i]);
        pthread_mutex_lock(&bg.mu);
        bg.busy = false;
    }
    pthread_mutex_unlock(&bg.mu);
    return NULL;
}

static void bg_give(int i) {
    pthread_mutex_lock(&bg.mu);
    if (!(bg.skip_when_busy && (bg.busy || bg.head != bg.tail))) {
        bg.q[bg.tail++] = i;
        pthread_cond_signal(&bg.cv);
    }
    pthread_mutex_unlock(&bg.mu);
}

typedef struct {
    const int *fds;
    int from, to;
} sync_range;

static void *sync_some(void *arg) {
    const sync_range *r = arg;
    for (int i = r->from; i < r->to; i++) fdatasync(r->fds[i]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: writeback_pattern DIR NFILES CONCURRENT TOTAL_MiB RATE_MBps end|each|one\n");
        return 2;
    }
    const char *dir = argv[1], *mode = argv[6];
    int nfiles = atoi(argv[2]), conc = atoi(argv[3]);
    size_t total = (size_t)atol(argv[4]) << 20;
    double rate = atof(argv[5]) * 1e6;
    bool background = strcmp(mode, "end") != 0;
    bg.skip_when_busy = strcmp(mode, "one") == 0;
    if (nfiles < 1 || nfiles > MAX_FILES || conc < 1 || conc > MAX_CONCURRENT || total < (size_t)nfiles * CHUNK ||
        (background && strcmp(mode, "each") != 0 && !bg.skip_when_busy)) {
        fprintf(stderr, "writeback_pattern: bad arguments (NFILES 1-%d, CONCURRENT 1-%d, MODE end|each|one)\n",
                MAX_FILES, MAX_CONCURRENT);
        return 2;
    }
    static int fds[MAX_FILES];
    static size_t written[MAX_FILES], kicked[MAX_FILES];
    static char chunk[CHUNK];
    for (int i = 0; i < CHUNK; i++) chunk[i] = (char)(i * 7 + 3);
    for (int i = 0; i < nfiles; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/wb-%d", dir, i);
        if ((fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
            perror(path);
            return 1;
        }
    }
    size_t per_file = total / (size_t)nfiles / CHUNK * CHUNK;
    pthread_t bg_thread;
    if (background && pthread_create(&bg_thread, NULL, bg_main, fds) != 0) return 1;
    int active[MAX_CONCURRENT], nactive = conc < nfiles ? conc : nfiles, next = nactive;
    for (int j = 0; j < nactive; j++) active[j] = j;
    double t0 = now_s();
    size_t done = 0;
    while (nactive > 0) {
        for (int j = 0; j < nactive; j++) {
            int i = active[j];
            if (write(fds[i], chunk, CHUNK) != CHUNK) {
                perror("write");
                return 1;
            }
            written[i] += CHUNK;
            done += CHUNK;
            if (written[i] - kicked[i] >= KICK_STEP || written[i] == per_file) {
                sync_file_range(fds[i], 0, 0, SYNC_FILE_RANGE_WRITE);
                kicked[i] = written[i];
            }
            if (written[i] == per_file) {
                if (background) bg_give(i);
                active[j] = next < nfiles ? next++ : active[--nactive];
            }
            if (rate > 0)
                while (now_s() < t0 + (double)done / rate) {
                }
        }
    }
    double t1 = now_s();
    if (background) {
        pthread_mutex_lock(&bg.mu);
        bg.stop = true;
        pthread_cond_signal(&bg.cv);
        pthread_mutex_unlock(&bg.mu);
        pthread_join(bg_thread, NULL);
    }
    double t2 = now_s();
    pthread_t th[64];
    sync_range r[64];
    int nt = nfiles < 64 ? nfiles : 64;
    for (int k = 0; k < nt; k++) {
        r[k] = (sync_range){fds, nfiles * k / nt, nfiles * (k + 1) / nt};
        if (pthread_create(&th[k], NULL, sync_some, &r[k]) != 0) return 1;
    }
    for (int k = 0; k < nt; k++) pthread_join(th[k], NULL);
    double t3 = now_s();
    for (int i = 0; i < nfiles; i++) close(fds[i]);
    printf("%-4s %5d files %2d at a time %6zu MiB at %4.0f MB/s: writes %.3f s, thread's tail %.3f s, "
           "final pass %.3f s, total %.3f s\n",
           mode, nfiles, conc, total >> 20, rate / 1e6, t1 - t0, t2 - t1, t3 - t2, t3 - t0);
    return 0;
}
