/* Open-addressing string map: linear probing, load factor at most 1/2. */
#include "util/strmap.h"

#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

void hk__strmap_init(hk_strmap *m) { memset(m, 0, sizeof *m); }

void hk__strmap_free(hk_strmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

bool hk__strmap_get(const hk_strmap *m, const char *key, size_t *out) {
    if (m->cap == 0) return false;
    for (size_t i = (size_t)fnv1a(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return false;
        if (strcmp(m->keys[i], key) == 0) {
            if (out) *out = m->vals[i];
            return true;
        }
    }
}

static void place(const char **keys, size_t *vals, size_t cap, const char *key, size_t val) {
    size_t i = (size_t)fnv1a(key) & (cap - 1);
    while (keys[i]) i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

int hk__strmap_put(hk_strmap *m, const char *key, size_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        const char **nk = calloc(nc, sizeof *nk);
        size_t *nv = calloc(nc, sizeof *nv);
        if (!nk || !nv || nc < m->cap) {
            free(nk);
            free(nv);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) place(nk, nv, nc, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = nc;
    }
    place(m->keys, m->vals, m->cap, key, val);
    m->n++;
    return HK_OK;
}
