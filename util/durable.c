/* Durability primitives: flush a file's or a directory's entry to stable storage, start a file's
 * writeback early. The cache commits bytes in batches built from these (cache/blobs.c,
 * client/stage.c) instead of one blocking fsync per file in the download loop. */
#define _GNU_SOURCE /* sync_file_range */
#include "internal.h"
#include "util/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int sync_path(const char *path, bool data_only) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        return hk__fail(hk__errno_code(e), "cannot open %s to flush it to disk: %s", path, strerror(e));
    }
    int r = data_only ? fdatasync(fd) : fsync(fd);
    int e = errno;
    close(fd);
    if (r != 0)
        return hk__fail(hk__errno_code(e), "cannot flush %s to disk: %s (the disk or file system failed a write; "
                        "check it and pull again)", path, strerror(e));
    return HK_OK;
}

int hk__fsync_path(const char *path) { return sync_path(path, false); }

int hk__fdatasync_path(const char *path) { return sync_path(path, true); }

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

void hk__writeback_start(int fd) {
    /* a hint: where the file system lacks it (EINVAL, ENOSYS) the final flush does all the work */
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}
