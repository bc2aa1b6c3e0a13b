/* A bump allocator for the many small strings of one operation (a pull's per-file paths and blob
 * ids): one malloc per 64 KiB block instead of one per string, all freed at once (util layer). */
#ifndef HK_UTIL_ARENA_H
#define HK_UTIL_ARENA_H

#include <stddef.h>

typedef struct hk_arena_block hk_arena_block;
typedef struct hk_arena {
    hk_arena_block *head; /* newest block first */
    size_t used, cap;     /* of head */
} hk_arena;

/* A zeroed hk_arena is empty and valid. */
/* n bytes aligned for any object, valid until hk__arena_free; NULL when out of memory (or n
 * overflows), with the arena unchanged. */
void *hk__arena_alloc(hk_arena *a, size_t n);
/* A copy of s in the arena (NULL-safe: NULL for NULL). */
char *hk__arena_strdup(hk_arena *a, const char *s);
/* Frees every block; the arena is empty again. */
void hk__arena_free(hk_arena *a);

#endif
