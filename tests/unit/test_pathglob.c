/* Repo-path globs (util/pathglob.c) against the expectations of Python's fnmatch.fnmatchcase as
 * huggingface_hub's filter_repo_objects applies it ('\\' read as '/', a trailing '/' gets a '*'):
 * the table below was generated with Python 3.11 from the same patterns and paths, so a
 * difference in '*' across '/', sets, negation, '^', reversed ranges, dashes, an unclosed '[' or
 * non-ASCII code points fails here. */
#include "support.h"

#include "util/pathglob.h"

#include <string.h>

static const char *const k_paths[] = {
    "build/v/_ops.so",
    "build/v/lib/a.txt",
    "build/v/metadata.json",
    "a-b",
    "-",
    "!x",
    "^x",
    "]x",
    "[x",
    "b",
    "x\\y",
    "build/v/[odd]name.txt",
    "ünicode-名.txt",
    "z",
    "ab",
    "abc",
    "a/b/c.so",
    ".hidden",
    "A.SO",
};
/* per pattern, '1' where Python's fnmatchcase (after hf's normalisation) matches k_paths[i] */
static const struct { const char *pattern, *matches; } k_cases[] = {
    {"*.so", "1000000000000000100"},
    {"build/*/lib/", "0100000000000000000"},
    {"*", "1111111111111111111"},
    {"?", "0000100001000100000"},
    {"[!a]*", "1110111111111100011"},
    {"[^a]*", "0001001000000011100"},
    {"[a-c]*", "1111000001010011100"},
    {"[z-a]*", "0000000000000000000"},
    {"[]]x", "0000000100000000000"},
    {"[!]]x", "0000011010000000000"},
    {"[[]x", "0000000010000000000"},
    {"*[odd", "0000000000000000000"},
    {"*[[]odd]*", "0000000000010000000"},
    {"[-a]*", "0001100000000011100"},
    {"[a-]*", "0001100000000011100"},
    {"[!b-a]*", "1111111111111111111"},
    {"[c-a!x]*", "1111111111011111111"},
    {"[b-a!]*", "1111111111111111111"},
    {"[a-b-c]*", "1111100001010011100"},
    {"?ab", "0000000000000000000"},
    {"*ü*", "0000000000001000000"},
    {"?nicode*", "0000000000001000000"},
    {"build\\*\\*.so", "1000000000000000000"},
    {"*.SO", "0000000000000000001"},
    {"[!-]", "0000000001000100000"},
    {"[a-c-e]*", "1111100001010011100"},
    {"a*b*c*", "0000000000000001100"},
    {"*/*/*.so", "1000000000000000100"},
    {"[*]", "0000000000000000000"},
    {"x\\y", "0000000000100000000"},
    {"[\\]*", "0000000000000000000"},
    {"[!b]*", "0001111110101111111"},
    {"*a*a*a*b", "0000000000000000000"},
};

static void test_fnmatch_table(void) {
    size_t np = sizeof k_paths / sizeof *k_paths;
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
        CHECK(strlen(k_cases[c].matches) == np);
        for (size_t i = 0; i < np; i++) {
            bool want = k_cases[c].matches[i] == '1';
            if (hk__glob_match(k_cases[c].pattern, k_paths[i]) != want)
                CHECK_MSG(0, "pattern '%s' on '%s': expected %s", k_cases[c].pattern, k_paths[i],
                          want ? "match" : "no match");
        }
    }
}

static void test_select(void) {
    const char *inc[] = {"*.so", "*/lib/*", NULL}, *exc[] = {"*/c.so", NULL}, *none[] = {NULL};
    CHECK(hk__glob_select("build/v/_ops.so", inc, exc));
    CHECK(!hk__glob_select("a/b/c.so", inc, exc));      /* included, then excluded */
    CHECK(!hk__glob_select("build/v/metadata.json", inc, NULL));
    CHECK(hk__glob_select("anything", NULL, NULL));      /* no patterns: every path */
    CHECK(hk__glob_select("anything", none, none));      /* empty lists: the same */
    CHECK(!hk__glob_select("x/c.so", NULL, exc));
}

int main(void) {
    test_fnmatch_table();
    test_select();
    return hk_test_finish();
}
