/* A background flusher: fdatasync of finished files on a thread of its own while the caller goes
 * on writing others, so that the disk's work (and a device cache flush, which on a virtual disk
 * is the host writing everything it buffered) overlaps the transfers instead of following them.
 * An early start only: the caller still flushes every file before publishing anything
 * (hk__fdatasync_all, a cheap second call for a clean file), but must fail on an error this
 * reports, since the kernel tells a writeback error to one file descriptor only. */
#ifndef HK_UTIL_FLUSHER_H
#define HK_UTIL_FLUSHER_H

#include <stdbool.h>

typedef struct hk_flusher hk_flusher;

/* A flusher with no thread yet (it starts at the first hand-over); NULL when out of memory, which
 * callers treat as "no early flushes". */
hk_flusher *hk__flusher_new(void);
/* Hand fd over: it is flushed, then closed, by the flusher. `label` (copied) names the file in an
 * error. When the flusher does not take it (no flusher, its thread failed to start, or it is busy
 * or resting after a flush: the disk is behind, and the caller's final pass loses nothing by
 * waiting), fd is closed at once. Never fails. */
void hk__flusher_give(hk_flusher *f, int fd, const char *label);
/* Wait until every file handed over is flushed, stop the thread, free f. HK_OK, or the first
 * failed flush as an I/O-family error with a message. NULL: HK_OK. */
int hk__flusher_end(hk_flusher *f);
/* The same on a path that already failed: waits (the thread owns descriptors), reports nothing. */
void hk__flusher_abandon(hk_flusher *f);

#endif
