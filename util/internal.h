/* Internal helpers shared by every part of libhubkern. Not installed. */
#ifndef HK_INTERNAL_H
#define HK_INTERNAL_H

#include "hubkern/common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- errors (util/error.c) ---------------------------------------------------------------- */
/* Record `code` with a printf-style message as this thread's last error; returns `code` so that
 * call sites read `return hk__fail(HK_ERR_IO, "cannot open %s: %s", path, strerror(errno));`.
 * The arguments may be hk_last_error() itself (formatted apart, then copied), but a message that
 * wraps the previous one is written with hk__fail_context / hk__fail_wrap. */
int hk__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current last-error message with context ("pulling org/x: <old message>"); keeps the code. */
int hk__fail_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a new code: `return hk__fail_wrap(HK_ERR_SIGNATURE, "invalid bundle %s", p);` gives
 * "invalid bundle p: <old message>" as HK_ERR_SIGNATURE. */
int hk__fail_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* errno → HK_ERR_DISK_FULL / HK_ERR_NOT_FOUND / HK_ERR_IO. */
int hk__errno_code(int err);
/* The entry check of every versioned options struct (libgit2 style): HK_OK when `got` is a version
 * this library knows (1..supported), else HK_ERR_INVALID_ARG naming the struct and the init call. */
int hk__check_options_version(const char *type_name, unsigned int got, unsigned int supported);
/* The whole body of every public hk_<name>_init(opts, version): refuse NULL and unknown versions,
 * fill the defaults of the _INIT macro, record the version the caller was built with, and write
 * only `size` bytes: once a struct grows (version 2+), a caller built with an older header holds
 * only the fields of its version (size: an expression of `version`, read after the check; the
 * readers check opts->version first). The defaults come last, as the braced list they expand to. */
#define HK__OPTIONS_INIT_SIZED(type, opts, version, current_version, size, ...)                        \
    do {                                                                                               \
        if (!(opts)) return hk__fail(HK_ERR_INVALID_ARG, #type "_init: the options pointer is NULL"); \
        int rc_ = hk__check_options_version(#type, (version), (current_version));                     \
        if (rc_) return rc_;                                                                           \
        type d_ = __VA_ARGS__;                                                                         \
        d_.version = (version);                                                                        \
        memcpy((opts), &d_, (size));                                                                   \
        return HK_OK;                                                                                  \
    } while (0)
/* The same for a struct still at version 1 (the whole struct). */
#define HK__OPTIONS_INIT_BODY(type, opts, version, current_version, init_value) \
    HK__OPTIONS_INIT_SIZED(type, opts, version, current_version, sizeof(type), init_value)

/* ---- logging (util/error.c) --------------------------------------------------------------- */
void hk__log(hk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool hk__log_enabled(hk_log_level level);

/* ---- growable string (util/strbuf.c) ------------------------------------------------------ */
typedef struct hk_strbuf {
    char *data; /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
    bool oom;   /* sticky: an append failed */
} hk_strbuf;

void hk__sb_init(hk_strbuf *sb);
void hk__sb_free(hk_strbuf *sb);
void hk__sb_append(hk_strbuf *sb, const char *s);
void hk__sb_append_n(hk_strbuf *sb, const char *s, size_t n);
/* Room for exactly extra more bytes (and the NUL), not rounded up to a power of two. */
void hk__sb_reserve_exact(hk_strbuf *sb, size_t extra);
void hk__sb_printf(hk_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hk__sb_vprintf(hk_strbuf *sb, const char *fmt, va_list ap);
/* Give the buffer away (caller frees); "" if empty; NULL if an append ran out of memory. */
char *hk__sb_steal(hk_strbuf *sb);

char *hk__strdup(const char *s);                    /* NULL-safe */
char *hk__strndup(const char *s, size_t n);
char *hk__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The strings up to the NULL, one after another, in one allocation (NULL when out of memory): the
 * paths made on every request, without a printf-style format to parse. */
char *hk__concat(const char *first, ...) __attribute__((sentinel));
bool hk__str_starts_with(const char *s, const char *prefix);
bool hk__str_ends_with(const char *s, const char *suffix);
bool hk__is_hex(const char *s, size_t n);           /* exactly n lowercase hex chars, then NUL */
/* Environment booleans as huggingface_hub reads them: 1/ON/YES/TRUE, any case. */
bool hk__env_true(const char *name);
/* getenv that treats "" as unset. */
const char *hk__getenv(const char *name);

/* ---- files (util/fs.c) -------------------------------------------------------------------- */
char *hk__path_join(const char *a, const char *b);  /* "a/b", tolerant of trailing '/' on a */
int hk__mkdirs(const char *path, unsigned mode);    /* mkdir -p */
bool hk__path_exists(const char *path);
bool hk__is_dir(const char *path);
/* *out_fd = open(path, flags | O_CREAT, mode), making the folder that holds path (mkdir -p) only
 * when the open says it is missing: a folder that is there costs one syscall per file, not a
 * mkdir per file. HK_OK with *out_fd -1 and errno set when the open fails; an error (recorded)
 * when the folder cannot be made. */
int hk__open_creating_parent(int *out_fd, const char *path, int flags, unsigned mode);
/* Swap the entries a and b (both exist) in one step, like rename(2): 0, or -1 with errno (EINVAL or
 * ENOSYS where the kernel or file system cannot exchange). */
int hk__rename_exchange(const char *a, const char *b);
/* Names of the directories in dir (symlinks followed, dot entries skipped), in readdir order, as
 * a NULL-terminated array of *count names; free each and the array. HK_ERR_NOT_FOUND when dir
 * cannot be listed. */
int hk__list_subdirs(char ***out, size_t *count, const char *dir);
/* Read a whole (small) file; NUL-terminated; *out_len may be NULL. */
int hk__read_file(char **out, size_t *out_len, const char *path, size_t max_len);
/* The same for path relative to the folder dirfd, with extra open flags (O_NOFOLLOW). */
int hk__read_file_at(char **out, size_t *out_len, int dirfd, const char *path, int oflags, size_t max_len);
/* Write via a unique temp file in the same directory, fsync, rename. Mode 0666 & ~umask. */
int hk__write_file_atomic(const char *path, const void *data, size_t len);
/* The same made in pieces (a document too big to hold whole): begin makes the temp file beside
 * path, each write appends (a failed one cancels), finish syncs it and renames it over path (a
 * failure removes the temp file), cancel removes it. path must outlive the writes. */
typedef struct hk_atomic_file {
    int fd;
    char *tmp;
    const char *path;
} hk_atomic_file;
int hk__atomic_begin(hk_atomic_file *a, const char *path);
int hk__atomic_write(hk_atomic_file *a, const void *data, size_t len);
int hk__atomic_finish(hk_atomic_file *a);
void hk__atomic_cancel(hk_atomic_file *a);
/* Durability (util/durable.c). fsync of the file or directory at path (a link is followed);
 * HK_ERR_IO-family codes with a message on failure. */
int hk__fsync_path(const char *path);
/* fdatasync every path (files, not followed if links), several at a time; the first failure's
 * error. */
int hk__fdatasync_all(const char *const *paths, size_t n);
/* fsync dir and every directory below it (their entries: names, links), dir last. */
int hk__fsync_dir_tree(const char *dir);
/* Ask the kernel to start writing fd's dirty pages now, without waiting (a later fdatasync then
 * finds little left to do). Never fails: a file system without it just flushes later. */
void hk__writeback_start(int fd);
/* One syncfs(2) of the file system holding path instead of n fdatasyncs, where the rule says it
 * pays (util/durable.c: n >= HK__SYNCFS_MIN_FILES, Linux >= 5.8 so that syncfs reports writeback
 * errors, and at most HK__SYNCFS_MAX_DIRTY bytes dirty or under writeback machine-wide, which
 * bounds the other writers' data it flushes too). *out_done: it ran and succeeded; false: the
 * caller flushes each file. Errors of the syncfs itself are returned. */
#define HK__SYNCFS_MIN_FILES 64
#define HK__SYNCFS_MAX_DIRTY ((unsigned long long)64 << 20)
int hk__syncfs_if_cheap(bool *out_done, const char *path, size_t n);
/* The monotonic clock in milliseconds and in seconds; a sleep that resumes after a signal
 * (util/clock.c). */
uint64_t hk__now_ms(void);
double hk__now_s(void);
void hk__sleep_ms(long ms);
/* pthread_create with every signal blocked in the new thread (util/thread.c): a thread of the
 * library never takes the application's signals. 0 or an errno. */
int hk__thread_start(pthread_t *out, void *(*fn)(void *), void *arg);
/* Remove a directory tree (no symlink following). */
int hk__rmtree(const char *path);
/* 8 random lowercase hex chars + NUL into buf[9] (for temp names). */
void hk__random_hex8(char buf[9]);
/* Relative path from directory `from_dir` to `to` (both absolute, normalised). */
char *hk__relpath(const char *to, const char *from_dir);
/* Is `rel` a safe relative path inside a directory: no absolute, no "..", no "\", no empty or
 * "." components, no control characters. */
bool hk__path_is_safe_relative(const char *rel);

/* ---- hashing (util/hash.c) ---------------------------------------------------------------- */
typedef struct hk_hasher hk_hasher;
typedef enum { HK_HASH_SHA256, HK_HASH_SHA512, HK_HASH_SHA1, HK_HASH_GIT_BLOB } hk_hash_kind;
/* For HK_HASH_GIT_BLOB the content size must be known up front (git hashes "blob <len>\0"). */
hk_hasher *hk__hasher_new(hk_hash_kind kind, uint64_t git_blob_size);
void hk__hasher_update(hk_hasher *h, const void *data, size_t len);
/* Digest into out (up to 64 bytes); returns its length; frees h. */
size_t hk__hasher_finish(hk_hasher *h, unsigned char out[64]);
void hk__hasher_free(hk_hasher *h);
void hk__hex(char *out, const unsigned char *bytes, size_t n); /* out gets 2n chars + NUL */
/* sha256 of a buffer as 64 hex chars + NUL; 0, or -1 (hex "") when out of memory. */
int hk__sha256_hex(char hex[65], const void *data, size_t len);
/* Whole-file digests: hex (sha256/sha1/git-blob) or base64 (for metadata.json digests). */
int hk__hash_file_hex(char *out_hex, size_t out_cap, hk_hash_kind kind, const char *path);
/* The same for path relative to the folder dirfd (AT_FDCWD: as open(2)), and the bytes it hashed
 * in *out_bytes (NULL: not wanted). */
int hk__hash_file_hex_at(char *out_hex, size_t out_cap, uint64_t *out_bytes, hk_hash_kind kind, int dirfd,
                         const char *path);
int hk__hash_file_b64(char *out_b64, size_t out_cap, hk_hash_kind kind, const char *path);
/* The same relative to dirfd, with extra open flags (O_NOFOLLOW: a link is not followed). */
int hk__hash_file_b64_at(char *out_b64, size_t out_cap, hk_hash_kind kind, int dirfd, const char *path, int oflags);
void hk__base64(char *out, const unsigned char *bytes, size_t n); /* out needs 4*((n+2)/3)+1 */

#define HK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
