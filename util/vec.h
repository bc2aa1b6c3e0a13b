/* Growable arrays: the one place that grows a buffer by doubling (util layer). */
#ifndef HK_UTIL_VEC_H
#define HK_UTIL_VEC_H

#include <stddef.h>

/* Make room for at least `need` elements of elem_size bytes in *data (capacity in *cap): doubles
 * from 8, checks the multiplication for overflow. HK_OK, or HK_ERR_NOMEM with *data and *cap
 * unchanged (the old buffer stays valid and owned by the caller). */
int hk__vec_reserve(void **data, size_t *cap, size_t need, size_t elem_size);

/* Typed convenience: HK_VEC_RESERVE(items, cap, n + 1) for `T *items; size_t cap;`. */
#define HK_VEC_RESERVE(ptr, cap, need) hk__vec_reserve((void **)&(ptr), &(cap), (need), sizeof *(ptr))

#endif
