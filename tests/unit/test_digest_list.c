/* cache/digest_list.c, the one parser of a variant's metadata.json digest list that the pull's
 * check, `cache verify` and the stray scan read: what it accepts, how it sorts and finds, and the
 * specific error of each list no pull may accept (a name listed twice among them). */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <string.h>

static int parse(hk_digest_list *l, const char *text) { return hk__digest_list_parse(l, text, strlen(text), "v"); }

static void test_sorted_and_found(void) {
    hk_digest_list l;
    CHECK_RC(parse(&l, "{\"digest\": {\"algorithm\": \"sha256\", \"files\": {\"b.py\": \"B\", \"a/x.so\": \"A\", "
                       "\"c\": 3}}}"), HK_OK);
    CHECK(l.has_digest && l.has_files && l.kind == HK_HASH_SHA256 && l.n == 3);
    CHECK(strcmp(l.e[0].rel, "a/x.so") == 0 && strcmp(l.e[1].rel, "b.py") == 0 && strcmp(l.e[2].rel, "c") == 0);
    const hk_digest_entry *f = hk__digest_list_find(&l, "b.py");
    CHECK(f && strcmp(f->want, "B") == 0);
    f = hk__digest_list_find(&l, "c");
    CHECK(f && f->want == NULL); /* not a string: never matches a hash */
    CHECK(hk__digest_list_find(&l, "a") == NULL && hk__digest_list_find(&l, "b.py/") == NULL);
    hk__digest_list_free(&l);
    CHECK_RC(parse(&l, "{\"digest\": {\"algorithm\": \"sha512\", \"files\": {}}}"), HK_OK);
    CHECK(l.kind == HK_HASH_SHA512 && l.n == 0 && hk__digest_list_find(&l, "x") == NULL);
    hk__digest_list_free(&l);
}

static void test_refused(void) {
    hk_digest_list l;
    CHECK_RC(parse(&l, "{not json"), HK_ERR_PARSE);
    CHECK(strstr(hk_last_error(), "v/metadata.json is not valid JSON") != NULL);
    hk__digest_list_free(&l);
    CHECK_RC(parse(&l, "{\"name\": \"k\"}"), HK_OK);
    CHECK(!l.has_digest && !l.has_files);
    hk__digest_list_free(&l);
    /* an unknown algorithm: refused, with the list still read (the stray scan uses it) */
    CHECK_RC(parse(&l, "{\"digest\": {\"algorithm\": \"md5\", \"files\": {\"a\": \"x\"}}}"), HK_ERR_DIGEST);
    CHECK(strstr(hk_last_error(), "AlgorithmMismatch") != NULL && l.has_files && l.n == 1);
    hk__digest_list_free(&l);
    CHECK_RC(parse(&l, "{\"digest\": {\"algorithm\": \"sha256\", \"files\": [\"a\"]}}"), HK_ERR_DIGEST);
    CHECK(strstr(hk_last_error(), "no files object") != NULL);
    hk__digest_list_free(&l);
    /* two expectations for one file */
    CHECK_RC(parse(&l, "{\"digest\": {\"algorithm\": \"sha256\", \"files\": {\"a\": \"x\", \"b\": \"y\", \"a\": \"z\"}}}"),
             HK_ERR_DIGEST);
    CHECK(strstr(hk_last_error(), "lists a twice") != NULL);
    hk__digest_list_free(&l);
    hk_clear_error();
}

int main(void) {
    test_sorted_and_found();
    test_refused();
    return hk_test_finish();
}
