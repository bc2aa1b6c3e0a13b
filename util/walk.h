/* Directory walks: the one recursive readdir loop of the project (util layer). */
#ifndef HK_UTIL_WALK_H
#define HK_UTIL_WALK_H

#include <stddef.h>
#include <sys/stat.h>

typedef struct hk_walk_entry {
    const char *path;     /* full path (dir joined with rel) */
    const char *rel;      /* path relative to the walked directory, '/'-separated */
    const char *name;     /* last component */
    struct stat st;       /* lstat: symlinks are reported as links, never followed (HK_WALK_TYPE_ONLY:
                             only st_mode's file type, the rest 0) */
    int dirfd;            /* the directory holding the entry, open during the call: for *at() calls */
    int depth;            /* 0 for entries directly in the walked directory */
} hk_walk_entry;

/* What the callback answers. */
enum {
    HK_WALK_CONTINUE = 0, /* go on (into a directory: after this call, its entries) */
    HK_WALK_SKIP = 1,     /* for a directory: do not descend into it */
    HK_WALK_STOP = 2      /* end the walk; hk__walk returns HK_OK */
};

/* Flags. */
enum {
    HK_WALK_POSTORDER = 1u, /* also call fn for each directory after its entries (post = 1) */
    HK_WALK_SORTED = 2u,    /* entries of each directory in strcmp order (else readdir order) */
    HK_WALK_TYPE_ONLY = 4u  /* st holds the file type readdir reports, no lstat (one fewer syscall an
                               entry; lstat where the file system does not report types) */
};

/* fn returns HK_WALK_* or a negative value to abort; `post` is 1 only for the post-order call.
 * A callback that wants to fail with an hk error records it with hk__fail and returns -1. */
typedef int (*hk_walk_fn)(void *ud, const hk_walk_entry *e, int post);

/* Walk dir depth-first (no "." / "..", symlinks not followed, max_depth < 0: unlimited).
 * HK_OK when the walk ended (completed or HK_WALK_STOP); HK_ERR_NOT_FOUND when dir cannot be
 * opened; a callback's abort gives the error it recorded (HK_ERR_INTERNAL if it recorded none).
 * Subdirectories that cannot be opened are skipped with a debug log line. */
int hk__walk(const char *dir, int max_depth, unsigned flags, hk_walk_fn fn, void *ud);

#endif
