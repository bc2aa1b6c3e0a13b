/* hubkern — common definitions: export macro, return codes, last error, logging.
 *
 * Conventions of the whole API:
 *  - every function that can fail returns an `int` from `hk_error` (HK_OK == 0);
 *  - out-parameters come first;
 *  - on failure, hk_last_error() gives a message for the calling thread that says what to do;
 *  - the library never prints: messages go to the log callback set with hk_set_log_callback().
 */
#ifndef HUBKERN_COMMON_H
#define HUBKERN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HK_BUILDING_LIBRARY)
#define HK_API __attribute__((visibility("default")))
#else
#define HK_API
#endif

#define HK_VERSION_MAJOR 0
#define HK_VERSION_MINOR 1
#define HK_VERSION_PATCH 0
#define HK_VERSION_STRING "0.1.0"

/* Return codes. Values are stable: append, never renumber. */
typedef enum hk_error {
    HK_OK = 0,
    HK_ERR_INVALID_ARG = 1,      /* a caller passed something unusable (NULL, bad repo id, both version and revision) */
    HK_ERR_NOMEM = 2,            /* allocation failed */
    HK_ERR_IO = 3,               /* a file operation failed (errno text in the message) */
    HK_ERR_DISK_FULL = 4,        /* ENOSPC / EDQUOT while writing; nothing partial was kept */
    HK_ERR_PARSE = 5,            /* malformed JSON / TOML / variant name / lockfile / header */
    HK_ERR_NOT_FOUND = 6,        /* a local file or directory the caller named does not exist */
    HK_ERR_REPO_NOT_FOUND = 7,   /* the Hub says RepoNotFound (or 401 on a repo URL) */
    HK_ERR_REVISION_NOT_FOUND = 8, /* the branch, tag or commit does not exist */
    HK_ERR_ENTRY_NOT_FOUND = 9,  /* a file does not exist at that commit */
    HK_ERR_VERSION_NOT_FOUND = 10, /* no branch vN for the requested version N */
    HK_ERR_NO_VARIANT = 11,      /* no build variant fits this machine (trace in the message) */
    HK_ERR_AUTH = 12,            /* 401: missing or invalid token */
    HK_ERR_FORBIDDEN = 13,       /* 403: token valid but not allowed (gated, disabled) */
    HK_ERR_RATE_LIMITED = 14,    /* 429 after all retries */
    HK_ERR_NETWORK = 15,         /* connection failed, reset, DNS, TLS */
    HK_ERR_TIMEOUT = 16,         /* the server stalled past the configured timeout */
    HK_ERR_HTTP = 17,            /* any other unexpected HTTP status */
    HK_ERR_PROTOCOL = 18,        /* the server broke the Hub protocol (missing X-Repo-Commit, bad JSON shape) */
    HK_ERR_INTEGRITY = 19,       /* size or hash of a download differs from what was promised */
    HK_ERR_DIGEST = 20,          /* metadata.json digest violations */
    HK_ERR_UNSAFE_PATH = 21,     /* a server-supplied name would leave the snapshot (.., /, \\) */
    HK_ERR_OFFLINE = 22,         /* offline and the cache lacks what is needed */
    HK_ERR_UNTRUSTED = 23,       /* publisher not trusted (trustedKernelPublisher != true) */
    HK_ERR_LOCK = 24,            /* a cache lock could not be taken */
    HK_ERR_LOAD = 25,            /* dlopen of a kernel library failed */
    HK_ERR_SYMBOL = 26,          /* a function is not exported by the kernel */
    HK_ERR_RUNTIME_MISSING = 27, /* libtvm_ffi or libtorch needed but not found / not loaded */
    HK_ERR_ARCH = 28,            /* the GPU (CUDA capability / ROCm arch) is not supported by the build */
    HK_ERR_KERNEL = 29,          /* the kernel itself raised an error (its message is carried) */
    HK_ERR_TYPE = 30,            /* wrong argument type or count in a kernel call */
    HK_ERR_UNSUPPORTED = 31,     /* a feature this build or platform lacks */
    HK_ERR_LOCKFILE = 32,        /* kernels.lock does not match what is cached or on the Hub */
    HK_ERR_CANCELLED = 33,       /* a progress callback asked to stop */
    HK_ERR_INTERNAL = 34,        /* a bug in hubkern: please report it */
    HK_ERR_SIGNATURE = 35,       /* a Sigstore signature is present and fails a check (which check and the
                                    identity seen are in the message), or is required and missing */
    HK_ERR_DEPENDENCY = 36       /* a kernel dependency tree is unusable: a cycle, or deeper / wider than the bounds */
} hk_error;

/* Short stable name of a code, e.g. "HK_ERR_INTEGRITY". Never NULL. */
HK_API const char *hk_error_name(int code);

/* Message describing the last failure on this thread ("" if none). Valid until the next hubkern
 * call on the same thread. */
HK_API const char *hk_last_error(void);
/* Code of the last failure on this thread (HK_OK if none). */
HK_API int hk_last_error_code(void);
/* Forget the last error of this thread. */
HK_API void hk_clear_error(void);

/* Logging. The library writes nothing to stdout/stderr; it hands messages to this callback.
 * The callback may be called from any thread; it must be thread-safe. Tokens never appear. */
typedef enum hk_log_level {
    HK_LOG_ERROR = 0,
    HK_LOG_WARN = 1,
    HK_LOG_INFO = 2,
    HK_LOG_DEBUG = 3
} hk_log_level;

typedef void (*hk_log_fn)(void *userdata, hk_log_level level, const char *message);

/* Install (or, with fn == NULL, remove) the process-wide log callback. Messages above max_level
 * are not formatted at all. */
HK_API void hk_set_log_callback(hk_log_fn fn, void *userdata, hk_log_level max_level);

/* Progress of a long operation. `total` is 0 when unknown. Return non-zero to cancel
 * (the operation then fails with HK_ERR_CANCELLED). */
typedef struct hk_progress {
    const char *stage;       /* "resolve", "download", "verify", "load" */
    const char *item;        /* a file streaming now (of several, the one with the most bytes still to come),
                                or NULL when none is; never a file already finished */
    uint64_t done_bytes;
    uint64_t total_bytes;
    uint32_t done_files;
    uint32_t total_files;
    uint32_t active_files;   /* how many files are streaming now (item is one of them). Appended last: the
                                library fills the struct, so a callback built against the shorter layout
                                reads its fields unchanged */
} hk_progress;

typedef int (*hk_progress_fn)(void *userdata, const hk_progress *progress);

/* Process-wide initialisation (libcurl's global state, which libcurl requires to be set up once
 * and torn down last). Reference-counted and thread-safe: each hk_init() that returned HK_OK is
 * paired with one hk_shutdown(); the first initialises, the last cleans up. Call hk_init() early in
 * main(), before threads start, and hk_shutdown() after the last hubkern object is freed.
 * hk_init returns HK_OK, or HK_ERR_INTERNAL when libcurl cannot be initialised. hk_shutdown returns
 * how many hk_init() calls remain unpaired (0 when this one cleaned up; 0 too when nothing was
 * initialised).
 *
 * Without hk_init(): programs keep working. The first hk_hub_new() (directly, or through
 * hk_get_kernel) initialises libcurl itself, once (pthread_once-style), and that implicit reference
 * is never released: libcurl stays initialised until the process exits, and hk_shutdown() never
 * cleans up underneath it. That implicit initialisation is not safe against other threads using
 * libcurl at the same moment, which is why calling hk_init() is recommended. */
HK_API int hk_init(void);
HK_API int hk_shutdown(void);

/* Library version string, e.g. "0.1.0". */
HK_API const char *hk_version(void);

/* Free memory returned by hubkern functions documented as "free with hk_free". */
HK_API void hk_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_COMMON_H */
