/* Per-thread last error and the process-wide log callback. */
#include "internal.h"
#include "util/text.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_ERRMSG_MAX 4096

static _Thread_local int tl_code;
static _Thread_local char tl_msg[HK_ERRMSG_MAX];

static const char *const k_names[] = {
    "HK_OK", "HK_ERR_INVALID_ARG", "HK_ERR_NOMEM", "HK_ERR_IO", "HK_ERR_DISK_FULL",
    "HK_ERR_PARSE", "HK_ERR_NOT_FOUND", "HK_ERR_REPO_NOT_FOUND", "HK_ERR_REVISION_NOT_FOUND",
    "HK_ERR_ENTRY_NOT_FOUND", "HK_ERR_VERSION_NOT_FOUND", "HK_ERR_NO_VARIANT", "HK_ERR_AUTH",
    "HK_ERR_FORBIDDEN", "HK_ERR_RATE_LIMITED", "HK_ERR_NETWORK", "HK_ERR_TIMEOUT", "HK_ERR_HTTP",
    "HK_ERR_PROTOCOL", "HK_ERR_INTEGRITY", "HK_ERR_DIGEST", "HK_ERR_UNSAFE_PATH",
    "HK_ERR_OFFLINE", "HK_ERR_UNTRUSTED", "HK_ERR_LOCK", "HK_ERR_LOAD", "HK_ERR_SYMBOL",
    "HK_ERR_RUNTIME_MISSING", "HK_ERR_ARCH", "HK_ERR_KERNEL", "HK_ERR_TYPE",
    "HK_ERR_UNSUPPORTED", "HK_ERR_LOCKFILE", "HK_ERR_CANCELLED", "HK_ERR_INTERNAL", "HK_ERR_SIGNATURE", "HK_ERR_DEPENDENCY",
};

HK_API const char *hk_error_name(int code) {
    if (code >= 0 && (size_t)code < HK_ARRAY_LEN(k_names)) return k_names[code];
    return "HK_ERR_UNKNOWN";
}

HK_API const char *hk_last_error(void) { return tl_msg; }
HK_API int hk_last_error_code(void) { return tl_code; }
HK_API void hk_clear_error(void) {
    tl_code = HK_OK;
    tl_msg[0] = '\0';
}

/* A message as it may be shown: names and texts from outside (a server's listing, header or
 * error, a kernel-status.toml, a bundle) are formatted into messages, and their raw bytes must not
 * reach a terminal (an ESC sequence) or a JSON error (invalid UTF-8). C0 controls other than '\n'
 * and '\t', DEL, and bytes of no valid UTF-8 sequence become "\xNN"; the rest is kept. */
static void printable_copy(char *dst, size_t cap, const char *src) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && o + 1 < cap;) {
        size_t k = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = k == 1 ? (*p >= 0x20 && *p != 0x7f) || *p == '\n' || *p == '\t'
                         : k > 1 && strnlen((const char *)p, k) == k && hk__utf8_valid((const char *)p, k);
        if (ok && o + k < cap) {
            memcpy(dst + o, p, k);
            o += k;
            p += k;
        } else if (!ok && o + 4 < cap) {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[*p >> 4];
            dst[o++] = hex[*p & 15];
            p++;
        } else {
            break; /* no room for the rest: cut here, never in the middle of a sequence */
        }
    }
    dst[o] = '\0';
}

/* Every message is formatted into a local buffer and then copied: its arguments may be
 * hk_last_error() or point into it (a message wrapping the previous one), and vsnprintf into the
 * buffer it reads is undefined (glibc overwrites the text before it has read it). */
int hk__fail(int code, const char *fmt, ...) {
    char msg[HK_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printable_copy(tl_msg, sizeof tl_msg, msg);
    tl_code = code;
    return code;
}

/* "<prefix>: <current message>", cut at the buffer's size; the prefix (at most 1023 characters,
 * so that the cause stays readable) is formatted before the current message is touched, so its
 * arguments may point into it too. */
static void wrap_current(const char *fmt, va_list ap) {
    char msg[HK_ERRMSG_MAX];
    enum { PREFIX_MAX = 1024 };
    int n = vsnprintf(msg, PREFIX_MAX, fmt, ap);
    size_t used = n < 0 ? 0 : (size_t)n < PREFIX_MAX ? (size_t)n : PREFIX_MAX - 1;
    for (const char *t = ": "; *t && used < sizeof msg - 1; t++) msg[used++] = *t;
    size_t old = strnlen(tl_msg, sizeof msg - 1 - used);
    memcpy(msg + used, tl_msg, old);
    msg[used + old] = '\0';
    printable_copy(tl_msg, sizeof tl_msg, msg); /* the prefix is new text; the rest was made printable */
}

int hk__check_options_version(const char *type_name, unsigned int got, unsigned int supported) {
    if (got >= 1 && got <= supported) return HK_OK;
    return hk__fail(HK_ERR_INVALID_ARG,
                   "%s has version %u, but this libhubkern %s knows versions 1 to %u: initialise it with "
                   "%s_init(&opts, <its _VERSION macro>) or the _INIT macro of the headers you build with",
                   type_name, got, HK_VERSION_STRING, supported, type_name);
}

int hk__fail_context(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wrap_current(fmt, ap);
    va_end(ap);
    return tl_code;
}

int hk__fail_wrap(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wrap_current(fmt, ap);
    va_end(ap);
    tl_code = code;
    return code;
}

int hk__errno_code(int err) {
    switch (err) {
    case ENOSPC:
#ifdef EDQUOT
    case EDQUOT:
#endif
        return HK_ERR_DISK_FULL;
    case ENOENT: return HK_ERR_NOT_FOUND;
    case ENOMEM: return HK_ERR_NOMEM;
    default: return HK_ERR_IO;
    }
}

/* ---- logging ------------------------------------------------------------------------------ */
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_log_fn g_log_fn;
static void *g_log_ud;
static hk_log_level g_log_max = HK_LOG_WARN;

HK_API void hk_set_log_callback(hk_log_fn fn, void *userdata, hk_log_level max_level) {
    pthread_mutex_lock(&g_log_lock);
    g_log_fn = fn;
    g_log_ud = userdata;
    g_log_max = max_level;
    pthread_mutex_unlock(&g_log_lock);
}

bool hk__log_enabled(hk_log_level level) {
    pthread_mutex_lock(&g_log_lock);
    bool on = g_log_fn != NULL && level <= g_log_max;
    pthread_mutex_unlock(&g_log_lock);
    return on;
}

void hk__log(hk_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&g_log_lock);
    hk_log_fn fn = g_log_fn;
    void *ud = g_log_ud;
    bool on = fn != NULL && level <= g_log_max;
    pthread_mutex_unlock(&g_log_lock);
    if (!on) return;
    char msg[2048], shown[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printable_copy(shown, sizeof shown, msg); /* "Hub: <X-HF-Warning>" and names from outside */
    fn(ud, level, shown);
}

HK_API const char *hk_version(void) { return HK_VERSION_STRING; }
HK_API void hk_free(void *ptr) { free(ptr); }
