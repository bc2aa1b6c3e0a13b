/* util/arena.h: strings and arrays that stay intact across many blocks, big requests, alignment,
 * an impossible size, and freeing (ASan's leak checker counts the blocks). */
#include "support.h"

#include "util/arena.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void test_arena(void) {
    hk_arena a;
    memset(&a, 0, sizeof a);
    enum { N = 20000 }; /* ~20 bytes each: several 64 KiB blocks */
    static char *s[N];
    for (int i = 0; i < N; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "build/x/f%05d.bin", i);
        s[i] = hk__arena_strdup(&a, buf);
        CHECK(s[i] != NULL);
    }
    /* a request larger than a block, between small ones: the small ones keep filling head */
    unsigned char *big = hk__arena_alloc(&a, 200000);
    CHECK(big != NULL);
    memset(big, 0xab, 200000);
    void **arr = hk__arena_alloc(&a, 3 * sizeof(void *));
    CHECK(arr != NULL && (uintptr_t)arr % alignof(max_align_t) == 0);
    arr[0] = s[0], arr[1] = s[1], arr[2] = big;
    char *after = hk__arena_strdup(&a, "after");
    CHECK(after && strcmp(after, "after") == 0);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "build/x/f%05d.bin", i);
        bad += strcmp(s[i], buf) != 0;
    }
    CHECK(bad == 0);
    CHECK(big[0] == 0xab && big[199999] == 0xab && arr[2] == big);
    CHECK(hk__arena_strdup(&a, NULL) == NULL);
    CHECK(hk__arena_alloc(&a, SIZE_MAX - 8) == NULL); /* overflow: refused, arena unchanged */
    CHECK(strcmp(hk__arena_strdup(&a, "still"), "still") == 0);
    hk__arena_free(&a);
    CHECK(a.head == NULL && a.used == 0 && a.cap == 0);
    hk__arena_free(&a); /* twice: harmless */
}

int main(void) {
    test_arena();
    return hk_test_finish();
}
