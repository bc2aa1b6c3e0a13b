/* A string → index map (open addressing, FNV-1a) for lookups whose size a server or a variant
 * controls: blob etags of a listing, pages of a listing already visited (client/), digest entries
 * and receipt paths of a variant (cache/). Keys are borrowed (they must outlive the map). Internal. */
#ifndef HK_UTIL_STRMAP_H
#define HK_UTIL_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct hk_strmap {
    const char **keys;
    size_t *vals;
    size_t cap, n; /* cap: a power of two, or 0 */
} hk_strmap;

void hk__strmap_init(hk_strmap *m);
void hk__strmap_free(hk_strmap *m);
/* true and *out set when key is present. */
bool hk__strmap_get(const hk_strmap *m, const char *key, size_t *out);
/* Insert key (not present yet) with val; HK_ERR_NOMEM when it cannot grow. */
int hk__strmap_put(hk_strmap *m, const char *key, size_t val);

#endif
