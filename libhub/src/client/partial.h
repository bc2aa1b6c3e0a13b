/* Resumable partial downloads (partial.c): blobs/<etag>.incomplete, the name huggingface_hub <= 1.17
 * used and resumed (hub-protocol.md §7.2), so that an attempt, a later process and such a Python
 * resume each other's bytes. Internal. */
#ifndef HK_CLIENT_PARTIAL_H
#define HK_CLIENT_PARTIAL_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

/* Open (creating when absent) blobs/<etag>.incomplete for a blob of `size` bytes, to be called
 * under the blob's lock. *out_kept: the bytes it already holds, the file offset is left there; a
 * kept part longer than size is discarded (fresh file, *out_kept = 0). When the deterministic name
 * cannot be used (not a regular file, a race on a filesystem where locks do not exclude), a unique
 * blobs/<etag>.<rand8>.incomplete is opened instead and *out_resumable is false: it is never kept.
 * *out_path is freed by the caller. */
int hk__partial_open(int *out_fd, char **out_path, uint64_t *out_kept, bool *out_resumable, const char *repo_dir,
                     const char *etag, uint64_t size);

/* Feed the first `kept` bytes of fd (path for messages) to h. */
int hk__partial_rehash(hk_hasher *h, int fd, uint64_t kept, const char *path);

/* Throw away the kept bytes: close and unlink *io_fd / *io_path, then open a fresh file as
 * hk__partial_open does (kept 0). */
int hk__partial_discard(int *io_fd, char **io_path, bool *out_resumable, const char *repo_dir, const char *etag);

/* Before the rename into blobs/: move the deterministic name of the finished file open as fd to a
 * unique blobs/<etag>.<rand8>.incomplete (*io_path replaced) and check that it is fd's file, so
 * that no other writer's file (a filesystem whose locks do not exclude) gets the blob's name.
 * *out_gone: the name was gone (another writer of the same bytes committed it already). A name
 * that held another file is put back and HK_ERR_LOCK returned. */
int hk__partial_claim(bool *out_gone, int fd, char **io_path, const char *repo_dir, const char *etag);

/* Remove a stale blobs/<etag>.incomplete once the blob itself is present (under the blob's lock). */
void hk__partial_forget(const char *repo_dir, const char *etag);

#endif
