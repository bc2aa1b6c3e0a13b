/* The common file request without realpath(): snapshots/<commit>/<path> walked one folder at a
 * time with openat(O_NOFOLLOW), the entry a symlink whose target is exactly "../"×(depth+2) +
 * "blobs/<etag>" (what huggingface_hub and hubkern write), and the blob opened from the repo's
 * blobs/ folder, itself opened with O_NOFOLLOW. No step follows a link the store did not write in
 * that shape, so no symlink can lead the request out of the repo; anything else (a regular file in
 * the snapshot, another link shape, a linked folder) is for store.c's realpath() checks. */
#include "server/srv_internal.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* openat a folder without following a link in its last component; -1 when it is none. */
static int open_dir_at(int at, const char *name) {
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The blob name the link target points at: "../"×ups + "blobs/" + 40 or 64 hex; NULL otherwise. */
static const char *canonical_blob(const char *target, size_t ups) {
    for (size_t i = 0; i < ups; i++) {
        if (strncmp(target, "../", 3) != 0) return NULL;
        target += 3;
    }
    if (strncmp(target, "blobs/", 6) != 0) return NULL;
    target += 6;
    size_t n = strlen(target);
    return (n == 40 || n == 64) && hk__is_hex(target, n) ? target : NULL;
}

/* Walk the folders of rel (safe relative, checked by the caller) from the snapshot folder; *leaf
 * is rel's last component, *depth the folders walked. The fd of the entry's folder, or -1. */
static int walk_to_leaf(int snap_fd, const char *rel, const char **leaf, size_t *depth) {
    int dir = dup(snap_fd);
    *depth = 0;
    const char *p = rel;
    for (const char *slash; dir >= 0 && (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        char part[NAME_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n > NAME_MAX) {
            close(dir);
            return -1;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        int next = open_dir_at(dir, part);
        close(dir);
        dir = next;
        (*depth)++;
    }
    *leaf = p;
    return dir;
}

bool srv_store_open_linked(srv_sfile *out, const char *repo_dir, const char *commit, const char *rel) {
    bool ok = false;
    size_t cl = strlen(commit);
    if (!((cl == 40 || cl == 64) && hk__is_hex(commit, cl))) return false; /* one folder name, never a path */
    int repo = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the repo folder itself may be a link */
    int snaps = repo >= 0 ? open_dir_at(repo, "snapshots") : -1;
    int snap = snaps >= 0 ? open_dir_at(snaps, commit) : -1;
    const char *leaf = NULL;
    size_t depth = 0;
    int dir = snap >= 0 ? walk_to_leaf(snap, rel, &leaf, &depth) : -1;
    char target[PATH_MAX];
    ssize_t tn = dir >= 0 ? readlinkat(dir, leaf, target, sizeof target - 1) : -1;
    const char *etag = NULL;
    if (tn > 0) {
        target[tn] = '\0';
        etag = canonical_blob(target, depth + 2);
    }
    int blobs = etag ? open_dir_at(repo, "blobs") : -1;
    int fd = blobs >= 0 ? openat(blobs, etag, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        out->fd = fd;
        out->size = (uint64_t)st.st_size;
        out->lfs = strlen(etag) == 64;
        memcpy(out->etag, etag, strlen(etag) + 1); /* 40 or 64 hex: fits */
        ok = true;
    } else if (fd >= 0) {
        close(fd);
    }
    int fds[] = {blobs, dir, snap, snaps, repo};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    return ok;
}
