/* call_trace_hook.so: __cyg_profile_func_enter/exit for a -finstrument-functions build, loaded with
 * LD_PRELOAD by bench/call_trace.py. Appends one line per event to $HK_TRACE_OUT:
 *   E|X <tid> <module path> <offset of the function in the module>
 * The offset is fn - dli_fbase (the module's load base), so addr2line on a PIE/shared object takes it
 * as is; bench/call_trace.py adds the base back for a non-PIE executable. Events are recorded from the
 * first call on; call_trace.py cuts out the outermost hk_get_kernel frames. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static FILE *out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int busy;

__attribute__((no_instrument_function)) static void record(char kind, void *fn) {
    if (busy) return;
    busy = 1;
    pthread_mutex_lock(&mu);
    if (!out) {
        const char *p = getenv("HK_TRACE_OUT");
        out = fopen(p ? p : "call_trace.events", "w");
    }
    if (out) {
        Dl_info info;
        memset(&info, 0, sizeof info);
        if (dladdr(fn, &info) && info.dli_fname)
            fprintf(out, "%c %ld %s %lx\n", kind, (long)syscall(SYS_gettid), info.dli_fname,
                    (unsigned long)((char *)fn - (char *)info.dli_fbase));
        else
            fprintf(out, "%c %ld ? %lx\n", kind, (long)syscall(SYS_gettid), (unsigned long)fn);
    }
    pthread_mutex_unlock(&mu);
    busy = 0;
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    record('E', fn);
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) {
    (void)site;
    record('X', fn);
}

__attribute__((no_instrument_function, destructor)) static void done(void) {
    pthread_mutex_lock(&mu);
    if (out) fflush(out);
    pthread_mutex_unlock(&mu);
}
