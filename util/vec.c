#include "util/vec.h"

#include "internal.h"

#include <stdint.h>
#include <stdlib.h>

int hk__vec_reserve(void **data, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return HK_OK;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2) return hk__fail(HK_ERR_NOMEM, "out of memory (array of %zu elements)", need);
        n *= 2;
    }
    if (elem_size && n > SIZE_MAX / elem_size) return hk__fail(HK_ERR_NOMEM, "out of memory (array of %zu elements)", need);
    void *p = realloc(*data, n * elem_size);
    if (!p) return hk__fail(HK_ERR_NOMEM, "out of memory (array of %zu elements)", need);
    *data = p;
    *cap = n;
    return HK_OK;
}
