/* Allocation-failure injection for the tests of tests/alloc: the test executables are linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, so every allocation that libhubkern's objects
 * (and the server's, and the test's) make goes through alloc_fail.c. Armed on one thread, the
 * Nth allocation of that thread returns NULL (ENOMEM); every other allocation, before and after,
 * and on other threads (the in-process mirror), succeeds. Libraries linked as shared objects
 * (libcurl, cJSON, libarchive) keep their own malloc: their failures are theirs to test. */
#ifndef HK_ALLOC_FAIL_H
#define HK_ALLOC_FAIL_H

#include <stddef.h>

/* Fail the nth (1-based) allocation from now on the calling thread. */
void hk_alloc_fail_arm(size_t nth);
/* Stop counting; returns how many allocations the calling thread made while armed. */
size_t hk_alloc_fail_disarm(void);
/* Pause (1) or resume (0) counting on the calling thread: the test's own bookkeeping. */
void hk_alloc_fail_pause(int paused);
/* Did the armed run reach its nth allocation (so a failure was injected)? */
int hk_alloc_fail_fired(void);

#endif
