/* util/toml.c: the TOML 1.0 reader behind `hubkern lock PROJECT_DIR` — values, tables, the
 * redefinition rules, and a mutation fuzz loop (run under ASan in the sanitizer build: no crash, no
 * leak, every input either parses or fails with HK_ERR_PARSE). */
#include "support.h"

#include "internal.h"
#include "util/toml.h"

#include <stdlib.h>
#include <string.h>

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
    test_fuzz();
    return hk_test_finish();
}
