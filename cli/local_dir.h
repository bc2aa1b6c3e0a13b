/* hubkern download --local-dir (cli/local_dir.c): pulled files as real files under a folder. */
#ifndef HK_CLI_LOCAL_DIR_H
#define HK_CLI_LOCAL_DIR_H

#include <hubkern.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Is dir/<path> a regular file of `size` bytes whose hash is `blob` (hashed now)? */
bool cli_local_file_ok(const char *dir, const char *path, const char *blob, uint64_t size);
/* File i of the pull r into dir/<its repo path>: kept when already there and equal to its blob
 * (*out_reused), else copied from the cache through a temp file, hashed and renamed into place;
 * then huggingface_hub's download metadata written for it. HK_OK, or an error code with the last
 * error set (nothing partial left in dir). */
/* Remove the temp files killed runs left in dir/.cache/huggingface/download (our naming only,
 * each only when no live run holds its blob's lock); how many were removed. Never fails. */
size_t cli_local_sweep(const char *dir);
int cli_local_put(bool *out_reused, const char *dir, const hk_pull_result *r, size_t i);

#endif
