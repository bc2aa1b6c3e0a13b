/* Git object ids for snapshot listings: LFS pointer blobs, trees and commits, hashed exactly as git
 * does, so the mirror's oids are the ones a git clone of the same content would show. */
#include "server/srv_internal.h"
#include "util/vec.h"

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t srv_git_lfs_pointer(char *buf, size_t cap, const char *sha256_hex, uint64_t size) {
    int n = snprintf(buf, cap, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %llu\n",
                     sha256_hex, (unsigned long long)size);
    return n < 0 ? 0 : (size_t)n;
}

static void git_hash_object(char out[41], const char *kind, const void *data, size_t len) {
    hk_hasher *h = hk__hasher_new(HK_HASH_SHA1, 0);
    unsigned char d[64];
    if (!h) {
        out[0] = '\0';
        return;
    }
    char hdr[48];
    int n = snprintf(hdr, sizeof hdr, "%s %zu", kind, len);
    hk__hasher_update(h, hdr, (size_t)n + 1); /* with its NUL */
    hk__hasher_update(h, data, len);
    hk__hasher_finish(h, d);
    hk__hex(out, d, 20);
}

void srv_git_lfs_pointer_oid(char out[41], size_t *pointer_size, const char *sha256_hex, uint64_t size) {
    char ptr[256];
    size_t n = srv_git_lfs_pointer(ptr, sizeof ptr, sha256_hex, size);
    if (pointer_size) *pointer_size = n;
    git_hash_object(out, "blob", ptr, n);
}

void srv_git_commit_oid(char out[41], const char *tree_oid, const char *parent_oid, const char *message) {
    /* Fixed identity and time: the id depends only on tree, parent and message. */
    static const char who[] = "hubkern <hubkern@localhost> 0 +0000";
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_printf(&sb, "tree %s\n", tree_oid);
    if (parent_oid && *parent_oid) hk__sb_printf(&sb, "parent %s\n", parent_oid);
    hk__sb_printf(&sb, "author %s\ncommitter %s\n\n%s", who, who, message ? message : "");
    if (sb.len == 0 || sb.data[sb.len - 1] != '\n') hk__sb_append(&sb, "\n");
    if (sb.oom) {
        out[0] = '\0';
        hk__sb_free(&sb);
        return;
    }
    git_hash_object(out, "commit", sb.data, sb.len);
    hk__sb_free(&sb);
}

/* ---- listings ------------------------------------------------------------------------------ */
int srv_path_cmp(const char *a, const char *b) {
    for (;; a++, b++) {
        unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == cb) {
            if (!ca) return 0;
            continue;
        }
        if (!ca) return -1;
        if (!cb) return 1;
        if (ca == '/') return -1;
        if (cb == '/') return 1;
        return ca < cb ? -1 : 1;
    }
}

static int entry_cmp(const void *x, const void *y) {
    return srv_path_cmp(((const srv_sentry *)x)->path, ((const srv_sentry *)y)->path);
}

void srv_listing_free(srv_listing *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(atomic_load(&l->v[i].json));
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static srv_sentry *listing_push(srv_listing *l) {
    if (HK_VEC_RESERVE(l->v, l->cap, l->n + 1) != HK_OK) return NULL;
    srv_sentry *e = &l->v[l->n++];
    memset(e, 0, sizeof *e);
    return e;
}

int srv_listing_add_file(srv_listing *l, char *path, uint64_t size, const char *etag, bool lfs) {
    srv_sentry *e = listing_push(l);
    if (!e) return hk__fail(HK_ERR_NOMEM, "out of memory");
    e->path = path;
    e->size = size;
    e->lfs = lfs;
    snprintf(e->etag, sizeof e->etag, "%s", etag);
    if (lfs) srv_git_lfs_pointer_oid(e->oid, &e->pointer_size, etag, size);
    else snprintf(e->oid, sizeof e->oid, "%s", etag);
    l->total_bytes += size;
    return HK_OK;
}

/* A git tree entry being assembled: name, mode, raw 20-byte id. */
typedef struct tree_item {
    const char *name;
    size_t name_len;
    bool dir;
    unsigned char id[20];
} tree_item;

static int tree_item_cmp(const void *x, const void *y) {
    /* git orders tree entries by name, comparing a directory as if its name ended in '/' */
    const tree_item *a = x, *b = y;
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->name, b->name, n);
    if (c) return c;
    unsigned char ca = a->name_len > n ? (unsigned char)a->name[n] : (a->dir ? '/' : 0);
    unsigned char cb = b->name_len > n ? (unsigned char)b->name[n] : (b->dir ? '/' : 0);
    return (int)ca - (int)cb;
}

static void unhex20(unsigned char out[20], const char *hex) {
    for (int i = 0; i < 20; i++) {
        int hi = hex[2 * i], lo = hex[2 * i + 1];
        hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
        lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
}

/* Hash the tree whose entries start at v[i] and all lie under `prefix` (length plen, "" or "dir/").
 * Returns the index after the subtree, or (size_t)-1 on allocation failure. */
static size_t hash_tree(srv_listing *l, size_t i, const char *prefix, size_t plen, char out_oid[41]) {
    size_t cap = 16, n = 0;
    tree_item *items = malloc(cap * sizeof *items);
    if (!items) return (size_t)-1;
    while (i < l->n && strncmp(l->v[i].path, prefix, plen) == 0) {
        srv_sentry *e = &l->v[i];
        if (n == cap) {
            cap *= 2;
            tree_item *t = realloc(items, cap * sizeof *t);
            if (!t) {
                free(items);
                return (size_t)-1;
            }
            items = t;
        }
        tree_item *it = &items[n++];
        it->name = e->path + plen;
        it->name_len = strlen(it->name);
        it->dir = e->is_dir;
        if (e->is_dir) {
            size_t clen = strlen(e->path);
            char *child = malloc(clen + 2);
            if (!child) {
                free(items);
                return (size_t)-1;
            }
            memcpy(child, e->path, clen);
            child[clen] = '/';
            child[clen + 1] = '\0';
            size_t next = hash_tree(l, i + 1, child, clen + 1, e->oid);
            free(child);
            if (next == (size_t)-1) {
                free(items);
                return next;
            }
            i = next;
        } else {
            i++;
        }
        unhex20(it->id, e->oid);
    }
    qsort(items, n, sizeof *items, tree_item_cmp);
    hk_strbuf body;
    hk__sb_init(&body);
    for (size_t k = 0; k < n; k++) {
        hk__sb_append(&body, items[k].dir ? "40000 " : "100644 ");
        hk__sb_append_n(&body, items[k].name, items[k].name_len);
        hk__sb_append_n(&body, "\0", 1);
        hk__sb_append_n(&body, (const char *)items[k].id, 20);
    }
    free(items);
    if (body.oom) {
        hk__sb_free(&body);
        return (size_t)-1;
    }
    git_hash_object(out_oid, "tree", body.data ? body.data : "", body.len);
    hk__sb_free(&body);
    return i;
}

int srv_listing_finish(srv_listing *l) {
    qsort(l->v, l->n, sizeof *l->v, entry_cmp);
    /* Drop duplicate paths (keep the first). */
    size_t w = 0;
    for (size_t r = 0; r < l->n; r++) {
        if (w > 0 && strcmp(l->v[w - 1].path, l->v[r].path) == 0) {
            free(l->v[r].path);
            continue;
        }
        l->v[w++] = l->v[r];
    }
    l->n = w;
    /* Synthesise one directory entry per distinct parent prefix. */
    size_t nfiles = l->n;
    for (size_t i = 0; i < nfiles; i++) {
        const char *p = l->v[i].path;
        for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
            size_t dlen = (size_t)(s - p);
            /* the previous file shares this prefix → the directory was added already */
            if (i > 0 && strncmp(l->v[i - 1].path, p, dlen) == 0 && l->v[i - 1].path[dlen] == '/') continue;
            char *d = hk__strndup(p, dlen);
            if (!d) return hk__fail(HK_ERR_NOMEM, "out of memory");
            srv_sentry *e = listing_push(l);
            if (!e) {
                free(d);
                return hk__fail(HK_ERR_NOMEM, "out of memory");
            }
            e->path = d;
            e->is_dir = true;
            p = l->v[i].path; /* listing_push may have moved the array */
            s = p + dlen;
        }
    }
    qsort(l->v, l->n, sizeof *l->v, entry_cmp);
    if (hash_tree(l, 0, "", 0, l->root_oid) == (size_t)-1) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

long srv_listing_find(const srv_listing *l, const char *path) {
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = srv_path_cmp(l->v[mid].path, path);
        if (c == 0) return (long)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}
