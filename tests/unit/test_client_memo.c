/* The client's memo (libhub/src/client/memo.c), in the default share and in shares of their own
 * (hk_share, hubkern/hub.h): keys name the endpoint and token,
 * string answers expire with the window (and never with a window < 0), listings are deep copies,
 * bounds evict the oldest, an operation reuses its own answers with the window off (and only its
 * own, on its own thread), hk_shutdown of the last reference clears it. */
#include "support.h"

#include "client/client.h"
#include "client/memo.h"
#include "hubkern/hub.h"

#include <pthread.h>
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
    tree t;
    memset(&t, 0, sizeof t);
    t.e = calloc(2, sizeof *t.e);
    t.cap = 2;
    t.e[0].path = strdup("build/v/a.so");
    t.e[0].lfs_oid = strdup("ab");
    t.e[0].size = 7;
    t.e[1].path = strdup("build/v");
    t.e[1].dir = true;
    t.n = 2;
    char *k = hk__memo_key(h, "tree", "org/x", "0123");
    hk__memo_put_tree(D, k, &t);
    hk__client_tree_free(&t);
    tree got;
    CHECK(hk__memo_get_tree(D, &got, k, -1));
    CHECK(got.n == 2 && strcmp(got.e[0].path, "build/v/a.so") == 0 && got.e[0].size == 7 &&
          strcmp(got.e[0].lfs_oid, "ab") == 0 && !got.e[0].oid && got.e[1].dir);
    hk__client_tree_free(&got);
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

static void *lookup_elsewhere(void *key) { return hk__memo_get(D, key, 0); }

static void test_operations(void) {
    setenv("HUBKERN_FRESHNESS_S", "0", 1); /* the window off */
    hk_hub *h = hub_for("http://127.0.0.1:7", "");
    unsetenv("HUBKERN_FRESHNESS_S");
    CHECK(!hk__memo_on(h)); /* window off, outside an operation: nothing is reused */
    char *k = hk__memo_key(h, "refs", "org/op", NULL), *kt = hk__memo_key(h, "tree", "org/op", "c0");
    hk__memo_put(D, k, "before");
    CHECK(hk__memo_get(D, k, 0) == NULL);
    tree t;
    memset(&t, 0, sizeof t);
    t.e = calloc(1, sizeof *t.e);
    t.cap = 1;
    t.e[0].path = strdup("build/v/x");
    t.n = 1;
    hk__memo_op_begin();
    CHECK(hk__memo_on(h));
    CHECK(hk__memo_get(D, k, 0) == NULL); /* stored before this operation */
    hk__memo_put(D, k, "during");
    hk__memo_put_tree(D, kt, &t);
    char *v = hk__memo_get(D, k, 0);
    CHECK(v && strcmp(v, "during") == 0);
    free(v);
    pthread_t th;
    void *seen = (void *)1;
    CHECK(pthread_create(&th, NULL, lookup_elsewhere, k) == 0 && pthread_join(th, &seen) == 0);
    CHECK(seen == NULL); /* another thread is not in this operation */
    hk__memo_op_begin(); /* nested: the same operation */
    tree got;
    CHECK(hk__memo_get_tree(D, &got, kt, 0) && got.n == 1);
    hk__client_tree_free(&got);
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
    hk__client_tree_free(&t);
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
