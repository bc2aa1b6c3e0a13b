/* libarchive loaded on first use (cache/archive_lib.h says why it is not linked). */
#define HK__ARCHIVE_NO_REDIRECT
#include "cache/archive_lib.h"

#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

/* The soname libarchive has had since 3.0 (Debian: libarchive13 / libarchive13t64). */
#define HK__ARCHIVE_SONAME "libarchive.so.13"

hk__archive_fns hk__archive;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_code = HK_OK;
static char g_why[512];

static void load_once(void) {
    const char *path = hk__getenv("HUBKERN_LIBARCHIVE_LIB");
    bool from_env = path && *path;
    if (!from_env) path = HK__ARCHIVE_SONAME;
    /* RTLD_LOCAL: its symbols stay out of the program's namespace, as if it were not there */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "bundles need libarchive, which could not be loaded (%s): install it "
                 "(Debian/Ubuntu: apt-get install libarchive13, Fedora: dnf install libarchive)%s",
                 e ? e : path, from_env ? " or fix HUBKERN_LIBARCHIVE_LIB" : "");
        g_code = HK_ERR_RUNTIME_MISSING;
        return;
    }
    hk__archive_fns f;
    /* dlsym returns void *; converting it to a function pointer is what POSIX requires to work */
#define HK__ARCHIVE_RESOLVE(name)                                                                  \
    *(void **)(&f.name) = dlsym(h, #name);                                                         \
    if (!f.name) {                                                                                 \
        snprintf(g_why, sizeof g_why, "%s lacks %s (bundles need libarchive 3.3.3 or later, for "     \
                 "zstd): update libarchive", path, #name);                                         \
        g_code = HK_ERR_RUNTIME_MISSING;                                                           \
        dlclose(h);                                                                                \
        return;                                                                                    \
    }
    HK__ARCHIVE_FUNCTIONS(HK__ARCHIVE_RESOLVE)
#undef HK__ARCHIVE_RESOLVE
    hk__archive = f; /* published by pthread_once's own synchronisation; the handle stays open */
}

int hk__archive_load(void) {
    pthread_once(&g_once, load_once);
    return g_code ? hk__fail(g_code, "%s", g_why) : HK_OK;
}
