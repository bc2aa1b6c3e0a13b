/* The client's memo (libhub/src/client/memo.c), in the default share and in shares of their own
 * (hk_share, hubkern/hub.h): keys name the endpoint and token,
 * string answers expire with the window (and never with a window < 0), listings are shared by
 * reference (one listing however many hold it, still valid in a holder after the memo evicted it),
 * bounds evict the oldest, an operation reuses its own answers with the window off (and only its
 * own, on its own thread), hk_shutdown of the last reference clears it. */
#include "support.h"

#include "client/client.h"
#include "client/memo.h"
#include "hubkern/hub.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define D hk__memo_default()

static hk_hub *hub_for(const char *endpoint, const char *token) {
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = endpoint;
    o.token = token;
    o.offline = 1;
    o.cache_dir = hk_test_tmpdir();
    hk_hub *h = NULL;
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    return h;
}

static void test_keys_and_windows(void) {
    hk_hub *a = hub_for("http://127.0.0.1:1", "hf_one"), *b = hub_for("http://127.0.0.1:1", "hf_two"),
           *c = hub_for("http://127.0.0.1:2", "hf_one");
    char *ka = hk__memo_key(a, "refs", "org/x", NULL), *kb = hk__memo_key(b, "refs", "org/x", NULL),
         *kc = hk__memo_key(c, "refs", "org/x", NULL);
    CHECK(ka && kb && kc && strcmp(ka, kb) != 0 && strcmp(ka, kc) != 0); /* token and endpoint in the key */
    CHECK(!strstr(ka, "hf_one"));                                        /* the token itself is not */
    hk__memo_put(D, ka, "{\"branches\":[]}");
    char *v = hk__memo_get(D, ka, 60000);
    CHECK(v && strcmp(v, "{\"branches\":[]}") == 0);
    free(v);
    CHECK(hk__memo_get(D, kb, 60000) == NULL && hk__memo_get(D, kc, 60000) == NULL);
    CHECK(hk__memo_get(D, ka, 0) == NULL); /* window off */
    usleep(30000);
    CHECK(hk__memo_get(D, ka, 10) == NULL); /* older than the window: gone */
    CHECK(hk__memo_get(D, ka, -1) == NULL); /* ... for good */
    hk__memo_put(D, ka, "1");
    v = hk__memo_get(D, ka, -1);
    CHECK(v && strcmp(v, "1") == 0);
    free(v);
    free(ka);
    free(kb);
    free(kc);
    hk_hub_free(a);
    hk_hub_free(b);
    hk_hub_free(c);
}

static void test_trees_and_bounds(void) {
    hk_hub *h = hub_for("http://127.0.0.1:3", "");
    tree *t;
    CHECK_RC(hk__client_tree_new(&t), HK_OK);
    CHECK_RC(hk__client_tree_add(t, "build/v/a.so", false, 7, NULL, "ab"), HK_OK);
    CHECK_RC(hk__client_tree_add(t, "build/v", true, 0, NULL, NULL), HK_OK);
    char *k = hk__memo_key(h, "tree", "org/x", "0123");
    hk__memo_put_tree(D, k, t);
    hk__client_tree_unref(t); /* the memo's reference keeps it */
    const tree *got, *again;
    CHECK(hk__memo_get_tree(D, &got, k, -1));
    CHECK(got->n == 2 && strcmp(got->e[0].path, "build/v/a.so") == 0 && got->e[0].size == 7 &&
          strcmp(got->e[0].lfs_oid, "ab") == 0 && !got->e[0].oid && got->e[1].dir);
    CHECK(hk__memo_get_tree(D, &again, k, -1) && again == got); /* shared, not copied */
    CHECK(got == t && atomic_load(&got->refs) == 3);
    hk__client_tree_unref(again);
    hk__client_tree_unref(got);
    CHECK(hk__memo_get(D, k, -1) == NULL); /* a listing is not a string answer */
    /* more entries than the memo holds: the oldest go, the newest stay */
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "org/r%d", i);
        char *ki = hk__memo_key(h, "refs", name, NULL);
        hk__memo_put(D, ki, "x");
        free(ki);
    }
    char *first = hk__memo_key(h, "refs", "org/r0", NULL), *last = hk__memo_key(h, "refs", "org/r299", NULL);
    char *v0 = hk__memo_get(D, first, -1), *v1 = hk__memo_get(D, last, -1);
    CHECK(v0 == NULL && v1 && strcmp(v1, "x") == 0);
    free(v0);
    free(v1);
    hk__memo_clear(D);
    CHECK(hk__memo_get(D, last, -1) == NULL);
    free(first);
    free(last);
    free(k);
    hk_hub_free(h);
}

/* A listing got from the memo stays whole while the memo drops it: evicted by the weight bound
 * (a second heavy listing), by a new listing stored under its key, and by a clear. A copy-free
 * memo that handed out its own pointer without a reference would fail here (under ASan: a
 * use after free; without: the contents checked). */
static tree *listing_of(size_t n, const char *tag) {
    tree *t;
    CHECK_RC(hk__client_tree_new(&t), HK_OK);
    char path[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "build/%s/f%06zu.py", tag, i);
        CHECK_RC(hk__client_tree_add(t, path, false, i, "0123456789012345678901234567890123456789", NULL), HK_OK);
    }
    return t;
}

static bool listing_is(const tree *t, size_t n, const char *tag) {
    char path[64];
    snprintf(path, sizeof path, "build/%s/f%06zu.py", tag, n - 1);
    return t->n == n && strcmp(t->e[n - 1].path, path) == 0 && t->e[n - 1].size == n - 1 &&
           strcmp(t->e[0].oid, "0123456789012345678901234567890123456789") == 0;
}

static void test_tree_outlives_eviction(void) {
    hk_hub *h = hub_for("http://127.0.0.1:6", "");
    char *ka = hk__memo_key(h, "tree", "org/big", "a"), *kb = hk__memo_key(h, "tree", "org/big", "b");
    enum { HEAVY = 120000 }; /* two weigh more than the memo's bound on held listings */
    tree *a = listing_of(HEAVY, "a");
    hk__memo_put_tree(D, ka, a);
    hk__client_tree_unref(a);
    const tree *held = NULL;
    CHECK(hk__memo_get_tree(D, &held, ka, -1) && held == a);
    tree *b = listing_of(HEAVY, "b");
    hk__memo_put_tree(D, kb, b); /* evicts a: the least recently used listing */
    hk__client_tree_unref(b);
    const tree *gone = NULL;
    CHECK(!hk__memo_get_tree(D, &gone, ka, -1) && gone == NULL);
    CHECK(listing_is(held, HEAVY, "a") && atomic_load(&held->refs) == 1); /* ours alone now */
    hk__client_tree_unref(held);
    /* replaced under its key, then cleared, while a holder reads it */
    CHECK(hk__memo_get_tree(D, &held, kb, -1) && listing_is(held, HEAVY, "b"));
    tree *small = listing_of(3, "c");
    hk__memo_put_tree(D, kb, small);
    hk__client_tree_unref(small);
    const tree *now = NULL;
    CHECK(hk__memo_get_tree(D, &now, kb, -1) && now == small && listing_is(now, 3, "c"));
    hk__memo_clear(D);
    CHECK(listing_is(held, HEAVY, "b") && listing_is(now, 3, "c"));
    hk__client_tree_unref(now);
    hk__client_tree_unref(held);
    free(ka);
    free(kb);
    hk_hub_free(h);
}

/* Holders on several threads take and drop references to one listing while another thread
 * replaces and clears it (the memo is shared across threads; ThreadSanitizer runs this too). */
typedef struct tree_reader {
    const char *key;
    int hits;
} tree_reader;

static void *read_trees(void *arg) {
    tree_reader *r = arg;
    for (int i = 0; i < 2000; i++) {
        const tree *t;
        if (!hk__memo_get_tree(D, &t, r->key, -1)) continue;
        r->hits += listing_is(t, 4, "t");
        hk__client_tree_unref(t);
    }
    return NULL;
}

static void test_tree_shared_across_threads(void) {
    hk_hub *h = hub_for("http://127.0.0.1:8", "");
    char *k = hk__memo_key(h, "tree", "org/threads", "c");
    tree *t = listing_of(4, "t");
    hk__memo_put_tree(D, k, t);
    hk__client_tree_unref(t);
    tree_reader rd[3] = {{k, 0}, {k, 0}, {k, 0}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, read_trees, &rd[i]) == 0);
    for (int i = 0; i < 200; i++) {
        tree *n = listing_of(4, "t");
        hk__memo_put_tree(D, k, n); /* the one it replaces may still be read elsewhere */
        hk__client_tree_unref(n);
        if (i % 50 == 49) hk__memo_clear(D);
    }
    t = listing_of(4, "t"); /* there for readers that start late */
    hk__memo_put_tree(D, k, t);
    hk__client_tree_unref(t);
    int hits = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        hits += rd[i].hits;
    }
    CHECK(hits > 0);
    hk__memo_clear(D);
    free(k);
    hk_hub_free(h);
}

static void *lookup_elsewhere(void *key) { return hk__memo_get(D, key, 0); }

static void test_operations(void) {
    setenv("HUBKERN_FRESHNESS_S", "0", 1); /* the window off */
    hk_hub *h = hub_for("http://127.0.0.1:7", "");
    unsetenv("HUBKERN_FRESHNESS_S");
    CHECK(!hk__memo_on(h)); /* window off, outside an operation: nothing is reused */
    char *k = hk__memo_key(h, "refs", "org/op", NULL), *kt = hk__memo_key(h, "tree", "org/op", "c0");
    hk__memo_put(D, k, "before");
    CHECK(hk__memo_get(D, k, 0) == NULL);
    tree *t;
    CHECK_RC(hk__client_tree_new(&t), HK_OK);
    CHECK_RC(hk__client_tree_add(t, "build/v/x", false, 0, NULL, NULL), HK_OK);
    hk__memo_op_begin();
    CHECK(hk__memo_on(h));
    CHECK(hk__memo_get(D, k, 0) == NULL); /* stored before this operation */
    hk__memo_put(D, k, "during");
    hk__memo_put_tree(D, kt, t);
    char *v = hk__memo_get(D, k, 0);
    CHECK(v && strcmp(v, "during") == 0);
    free(v);
    pthread_t th;
    void *seen = (void *)1;
    CHECK(pthread_create(&th, NULL, lookup_elsewhere, k) == 0 && pthread_join(th, &seen) == 0);
    CHECK(seen == NULL); /* another thread is not in this operation */
    hk__memo_op_begin(); /* nested: the same operation */
    const tree *got;
    CHECK(hk__memo_get_tree(D, &got, kt, 0) && got->n == 1);
    hk__client_tree_unref(got);
    hk__memo_op_end();
    v = hk__memo_get(D, k, 0);
    CHECK(v != NULL); /* still the outer operation */
    free(v);
    hk__memo_op_end();
    CHECK(!hk__memo_on(h) && hk__memo_get(D, k, 0) == NULL && !hk__memo_get_tree(D, &got, kt, 0));
    hk__memo_op_begin(); /* the next call asks again */
    CHECK(hk__memo_get(D, k, 0) == NULL && !hk__memo_get_tree(D, &got, kt, 0));
    hk__memo_op_end();
    v = hk__memo_get(D, k, 60000); /* a window that is on still takes the answer */
    CHECK(v && strcmp(v, "during") == 0);
    free(v);
    hk__memo_op_end(); /* unbalanced: harmless */
    hk__client_tree_unref(t);
    free(k);
    free(kt);
    hk_hub_free(h);
}

/* hk_share: a client given a share of its own sees only that share's answers, two clients given
 * the same share see each other's, and one given none uses the default share. */
static void test_shares(void) {
    hk_share *s1 = NULL, *s2 = NULL;
    CHECK_RC(hk_share_new(&s1), HK_OK);
    CHECK_RC(hk_share_new(&s2), HK_OK);
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = "http://127.0.0.1:5";
    o.offline = 1;
    o.cache_dir = hk_test_tmpdir();
    hk_hub *a = NULL, *b = NULL, *c = NULL, *dflt = NULL;
    o.share = s1;
    CHECK_RC(hk_hub_new(&a, &o), HK_OK);
    CHECK_RC(hk_hub_new(&b, &o), HK_OK);
    o.share = s2;
    CHECK_RC(hk_hub_new(&c, &o), HK_OK);
    o.share = NULL;
    CHECK_RC(hk_hub_new(&dflt, &o), HK_OK);
    char *k = hk__memo_key(a, "trust", "org", NULL);
    CHECK(a->share == s1 && b->share == s1 && c->share == s2 && dflt->share == hk__memo_default());
    hk__memo_put(a->share, k, "1");
    char *v = hk__memo_get(b->share, k, -1);
    CHECK(v && strcmp(v, "1") == 0); /* same share */
    free(v);
    CHECK(hk__memo_get(c->share, k, -1) == NULL);    /* a share of its own */
    CHECK(hk__memo_get(dflt->share, k, -1) == NULL); /* the default share is another */
    /* a version-3 options struct (no share field) gets the default share */
    hk_hub_options o3;
    CHECK_RC(hk_hub_options_init(&o3, 3), HK_OK);
    o3.offline = 1;
    o3.cache_dir = hk_test_tmpdir();
    hk_hub *old = NULL;
    CHECK_RC(hk_hub_new(&old, &o3), HK_OK);
    CHECK(old && old->share == hk__memo_default());
    hk_hub_free(old);
    free(k);
    hk_hub_free(a);
    hk_hub_free(b);
    hk_hub_free(c);
    hk_hub_free(dflt);
    hk_share_free(s1);
    hk_share_free(s2);
    hk_share_free(NULL);
}

int main(void) {
    CHECK_RC(hk_init(), HK_OK);
    test_shares();
    test_keys_and_windows();
    test_trees_and_bounds();
    test_tree_outlives_eviction();
    test_tree_shared_across_threads();
    test_operations();
    char *k = NULL;
    hk_hub *h = hub_for("http://127.0.0.1:4", "");
    k = hk__memo_key(h, "trust", "org", NULL);
    hk__memo_put(D, k, "1");
    CHECK(hk_shutdown() == 0); /* the last reference: the memo goes with it */
    CHECK(hk__memo_get(D, k, -1) == NULL);
    free(k);
    hk_hub_free(h);
    return hk_test_finish();
}
