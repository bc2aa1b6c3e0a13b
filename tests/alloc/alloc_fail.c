/* The allocation wrappers of alloc_fail.h (-Wl,--wrap). Thread-local state: only the arming
 * thread's allocations are counted. */
#include "alloc_fail.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static _Thread_local int armed;
static _Thread_local size_t count, target;
static _Thread_local int fired;

void hk_alloc_fail_arm(size_t nth) {
    count = 0;
    target = nth;
    fired = 0;
    armed = 1;
}

size_t hk_alloc_fail_disarm(void) {
    armed = 0;
    return count;
}

int hk_alloc_fail_fired(void) { return fired; }

void hk_alloc_fail_pause(int paused) { armed = !paused; }

static int should_fail(void) {
    if (!armed) return 0;
    if (++count != target) return 0;
    fired = 1;
    errno = ENOMEM;
    /* debugging aid: HK_ALLOC_TRAP=N stops a debugger at each injected failure number N */
    const char *trap = getenv("HK_ALLOC_TRAP");
    if (trap && (size_t)strtoul(trap, NULL, 10) == target) raise(SIGTRAP);
    return 1;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) {
    /* realloc(p, 0) frees: never a failure to inject */
    if (n == 0) return __real_realloc(p, n);
    return should_fail() ? NULL : __real_realloc(p, n);
}
