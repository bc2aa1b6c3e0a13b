/* util/arena.h: blocks of 64 KiB (larger requests get a block of their own). */
#include "util/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct hk_arena_block {
    hk_arena_block *next;
    alignas(max_align_t) unsigned char data[];
};

enum { ARENA_BLOCK = 64 * 1024 };

/* n bytes at an offset aligned to al (a power of two); strings take al 1, so no padding per string */
static void *arena_get(hk_arena *a, size_t n, size_t al) {
    if (n > SIZE_MAX / 2) return NULL;
    size_t at = (a->used + al - 1) & ~(al - 1), need = n;
    if (!a->head || at > a->cap || need > a->cap - at) {
        size_t cap = need > ARENA_BLOCK ? need : ARENA_BLOCK;
        hk_arena_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        if (cap > ARENA_BLOCK && a->head) { /* a big one: kept behind head, head's free room stays usable */
            b->next = a->head->next;
            a->head->next = b;
            return b->data;
        }
        b->next = a->head;
        a->head = b;
        a->used = 0;
        a->cap = cap;
    } else {
        a->used = at;
    }
    void *p = a->head->data + a->used;
    a->used += need;
    return p;
}

void *hk__arena_alloc(hk_arena *a, size_t n) { return arena_get(a, n ? n : 1, alignof(max_align_t)); }

char *hk__arena_strdup(hk_arena *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = arena_get(a, n, 1);
    if (p) memcpy(p, s, n);
    return p;
}

void hk__arena_free(hk_arena *a) {
    for (hk_arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    memset(a, 0, sizeof *a);
}
