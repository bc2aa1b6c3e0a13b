/* util/toml.c: the TOML 1.0 reader behind `hubkern lock PROJECT_DIR` — values, tables, the
 * redefinition rules, and a mutation fuzz loop (run under ASan in the sanitizer build: no crash, no
 * leak, every input either parses or fails with HK_ERR_PARSE). */
#include "support.h"

#include "internal.h"
#include "util/toml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static hk_toml *parse(const char *s) {
    hk_toml *t = NULL;
    if (hk__toml_parse(&t, s, strlen(s), "t.toml") != HK_OK) return NULL;
    return t;
}

static const char *PYPROJECT =
    "\xEF\xBB\xBF# a project\n"
    "[project]\nname = \"demo\"  # trailing\nversion = '0.1'\n"
    "authors = [ { name = \"A\", email = \"a@b\" },\n  { name = \"B\" }, ]\n"
    "description = \"\"\"\\\n   multi \\\n   line\"\"\"\n"
    "raw = '''C:\\path\n'''\n"
    "[tool.kernels.dependencies]\n\"kernels-community/activation\" = 1\n'org/x' = 0x10\n"
    "[tool.other]\nf = 6.5e-1\nneg = -inf\nd = 1979-05-27T07:32:00Z\nd2 = 1979-05-27 07:32:00\n"
    "big = 9_223_372_036_854_775_807\nb = true\nu = \"\\u00e9\\U0001F600\"\n"
    "[[tool.list]]\na = 1\n[[tool.list]]\na = 2\n"
    "dotted.key.here = \"x\"\n";

static void test_values(void) {
    hk_toml *t = parse(PYPROJECT);
    CHECK(t != NULL);
    if (!t) {
        fprintf(stderr, "%s\n", hk_last_error());
        return;
    }
    const hk_toml *deps = hk__toml_get(hk__toml_get(hk__toml_get(t, "tool"), "kernels"), "dependencies");
    CHECK(deps && deps->kind == HK_TOML_TABLE && deps->n == 2);
    if (deps && deps->n == 2) {
        CHECK_STR(deps->items[0]->key, "kernels-community/activation");
        CHECK(deps->items[0]->kind == HK_TOML_INT && deps->items[0]->i == 1);
        CHECK(deps->items[1]->i == 16);
    }
    const hk_toml *proj = hk__toml_get(t, "project");
    const hk_toml *desc = hk__toml_get(proj, "description");
    CHECK(desc && desc->kind == HK_TOML_STRING);
    if (desc) CHECK_STR(desc->str, "multi line");
    const hk_toml *raw = hk__toml_get(proj, "raw");
    if (raw) CHECK_STR(raw->str, "C:\\path\n");
    const hk_toml *au = hk__toml_get(proj, "authors");
    CHECK(au && au->kind == HK_TOML_ARRAY && au->n == 2);
    const hk_toml *other = hk__toml_get(t, "tool") ? hk__toml_get(hk__toml_get(t, "tool"), "other") : NULL;
    const hk_toml *big = hk__toml_get(other, "big");
    CHECK(big && big->i == INT64_MAX);
    const hk_toml *u = hk__toml_get(other, "u");
    if (u) CHECK_STR(u->str, "\xC3\xA9\xF0\x9F\x98\x80");
    CHECK(hk__toml_get(other, "d") && hk__toml_get(other, "d")->kind == HK_TOML_DATETIME);
    CHECK(hk__toml_get(other, "d2") && hk__toml_get(other, "d2")->kind == HK_TOML_DATETIME);
    const hk_toml *list = hk__toml_get(hk__toml_get(t, "tool"), "list");
    CHECK(list && list->kind == HK_TOML_ARRAY && list->n == 2);
    if (list && list->n == 2) CHECK(hk__toml_get(list->items[1], "dotted") != NULL);
    hk__toml_free(t);
}

static void test_invalid(void) {
    static const char *bad[] = {
        "a = 1\na = 2\n", "[a]\n[a]\n", "a = {b = 1}\na.c = 2\n", "a = [1]\n[[a]]\n", "a = \"x\n",
        "a = 01\n", "a = 1__0\n", "a = +0x10\n", "a = 99999999999999999999\n", "a = \"\\q\"\n",
        "a = 1 b = 2\n", "= 1\n", "a = \"\\uD800\"\n", "[a.b]\nx=1\n[a]\nb.y = 2\n", "a = .5\n",
        "a = [1,,2]\n", "a = {x = 1,}\n", "a = \"\x01\"\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hk_toml *t = NULL;
        int rc = hk__toml_parse(&t, bad[i], strlen(bad[i]), "bad.toml");
        if (rc != HK_ERR_PARSE) fprintf(stderr, "accepted: %s", bad[i]);
        CHECK(rc == HK_ERR_PARSE && t == NULL);
    }
    /* nesting is bounded */
    char deep[400];
    memset(deep, '[', sizeof deep);
    memcpy(deep, "a = ", 4);
    hk_toml *t = NULL;
    CHECK(hk__toml_parse(&t, deep, sizeof deep, "deep.toml") == HK_ERR_PARSE);
}

/* A key of more than 64 dotted parts is refused wherever a key is read (key/value, header, inline
 * table), naming the limit, and the parts read so far are freed (the ASan build's LeakSanitizer
 * finds the 64 strings of a leak at exit). */
static void test_key_parts(void) {
    char key[65 * 4 + 1];
    for (int parts = 64; parts <= 65; parts++) {
        char *w = key;
        for (int i = 0; i < parts; i++) w += sprintf(w, i ? ".k%d" : "k%d", i % 10);
        for (int s = 0; s < 5; s++) {
            char doc[sizeof key + 32];
            if (s == 0) snprintf(doc, sizeof doc, "%s = 1\n", key);
            else if (s == 1) snprintf(doc, sizeof doc, "[%s]\n", key);
            else if (s == 2) snprintf(doc, sizeof doc, "[[%s]]\n", key);
            else if (s == 3) snprintf(doc, sizeof doc, "t = { %s = 1 }\n", key);
            else snprintf(doc, sizeof doc, "a = 1\n%s.b = 2\n", key);
            hk_toml *t = NULL;
            int rc = hk__toml_parse(&t, doc, strlen(doc), "parts.toml");
            /* 64 parts: the last shape adds a 65th (".b") */
            if (parts == 64 && s != 4) {
                CHECK_RC(rc, HK_OK);
            } else {
                CHECK_RC(rc, HK_ERR_PARSE);
                CHECK(t == NULL);
                CHECK(strstr(hk_last_error(), "parts.toml: line ") == hk_last_error());
                CHECK(strstr(hk_last_error(), "at most 64") != NULL);
            }
            hk__toml_free(t);
        }
    }
    hk_clear_error();
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A table of 40,000 keys (one per line, or dotted into a table, or one [header] each): parsed in
 * linear time (each took seconds with the linear lookup; the bound is a generous sanity limit,
 * not a benchmark), every key found with its value, file order kept, a duplicate still refused. */
static void test_many_keys(void) {
    enum { N = 40000 };
    for (int s = 0; s < 3; s++) {
        hk_strbuf sb;
        hk__sb_init(&sb);
        if (s == 0) hk__sb_printf(&sb, "[big]\n\"\" = -1\n");
        for (int i = 0; i < N; i++) {
            if (s == 0) hk__sb_printf(&sb, "k%05d = %d\n", i, i);
            else if (s == 1) hk__sb_printf(&sb, "big.k%05d = %d\n", i, i);
            else hk__sb_printf(&sb, "[big.k%05d]\nv = %d\n", i, i);
        }
        CHECK(!sb.oom);
        if (sb.oom) return;
        hk_toml *t = NULL;
        double t0 = now_s();
        int rc = hk__toml_parse(&t, sb.data, sb.len, "many.toml");
        double took = now_s() - t0;
        CHECK_RC(rc, HK_OK);
        if (took >= 2.0) fprintf(stderr, "shape %d: %d keys took %.2f s\n", s, N, took);
        CHECK(took < 2.0);
        const hk_toml *big = hk__toml_get(t, "big");
        CHECK(big && big->kind == HK_TOML_TABLE && big->n == (size_t)N + (s == 0));
        if (big && big->n == (size_t)N + (s == 0)) {
            size_t bad = 0;
            for (int i = 0; i < N; i++) {
                char k[16];
                snprintf(k, sizeof k, "k%05d", i);
                const hk_toml *v = hk__toml_get(big, k);
                if (s == 2) v = hk__toml_get(v, "v");
                if (!v || v->kind != HK_TOML_INT || v->i != i || strcmp(big->items[i + (s == 0)]->key, k) != 0) bad++;
            }
            CHECK(bad == 0);
            CHECK(hk__toml_get(big, "k40000") == NULL && hk__toml_get(big, "k0000") == NULL);
            if (s == 0) CHECK(hk__toml_get(big, "") && hk__toml_get(big, "")->i == -1);
        }
        hk__toml_free(t);
        /* the same key once more, after the 40,000: refused at its line */
        static const char *const dup[] = {"k12345 = 1\n", "big.k12345 = 1\n", "[big.k12345]\n"};
        hk__sb_printf(&sb, "%s", dup[s]);
        t = NULL;
        rc = hk__toml_parse(&t, sb.data, sb.len, "many.toml");
        CHECK_RC(rc, HK_ERR_PARSE);
        CHECK(t == NULL);
        char want[64];
        snprintf(want, sizeof want, "many.toml: line %d,", s == 0 ? N + 3 : s == 1 ? N + 1 : 2 * N + 1);
        if (strstr(hk_last_error(), want) != hk_last_error()) fprintf(stderr, "%s\n", hk_last_error());
        CHECK(strstr(hk_last_error(), want) == hk_last_error());
        CHECK(strstr(hk_last_error(), "defined twice") != NULL);
        hk_clear_error();
        hk__sb_free(&sb);
    }
}

static void test_fuzz(void) {
    size_t n = strlen(PYPROJECT);
    char *buf = malloc(n + 16);
    unsigned seed = 12345;
    static const char alphabet[] = "[]{}=\"'\\.,#\n -_0xe+:T\x00\xff";
    for (int iter = 0; iter < 20000 && buf; iter++) {
        memcpy(buf, PYPROJECT, n);
        size_t len = n;
        int edits = 1 + (int)(seed % 4);
        for (int e = 0; e < edits; e++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            int op = (int)((seed >> 16) % 3);
            char c = alphabet[(seed >> 4) % (sizeof alphabet - 1)];
            if (op == 0) buf[pos] = c;
            else if (op == 1 && len > 1) {
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
            } else if (len < n + 15) {
                memmove(buf + pos + 1, buf + pos, len - pos);
                buf[pos] = c;
                len++;
            }
        }
        hk_toml *t = NULL;
        int rc = hk__toml_parse(&t, buf, len, "fuzz.toml");
        CHECK(rc == HK_OK || rc == HK_ERR_PARSE);
        CHECK((rc == HK_OK) == (t != NULL));
        hk__toml_free(t);
        hk_clear_error();
    }
    free(buf);
}

int main(void) {
    test_values();
    test_invalid();
    test_key_parts();
    test_many_keys();
    test_fuzz();
    return hk_test_finish();
}
