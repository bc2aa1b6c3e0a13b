/* Repo-path globs as huggingface_hub's filter_repo_objects applies them: Python's fnmatchcase
 * (case-sensitive; '*' crosses '/'; '?' one character; '[...]' sets with '!' negation, ranges,
 * and no escape character), after '\' is read as '/' in pattern and path and a pattern ending in
 * '/' gets a '*'. Matched per Unicode code point, as Python matches str. */
#include "util/pathglob.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One code point of the UTF-8 at *s (advanced past it); a stray byte counts as itself. '\' is '/'. */
static uint32_t next_cp(const char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    uint32_t c = p[0];
    int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    uint32_t cp = more == 3 ? c & 7 : more == 2 ? c & 15 : more == 1 ? c & 31 : c;
    int k = 1;
    for (; k <= more && (p[k] & 0xc0) == 0x80; k++) cp = cp << 6 | (p[k] & 0x3f);
    if (k <= more) cp = c, k = 1; /* truncated sequence: the byte alone */
    *s += k;
    return cp == '\\' ? '/' : cp;
}

static uint32_t *decode(const char *s, size_t *n) {
    size_t cap = strlen(s) + 2;
    uint32_t *out = malloc(cap * sizeof *out);
    if (!out) return NULL;
    *n = 0;
    while (*s) out[(*n)++] = next_cp(&s);
    return out;
}

/* A '[' set at pat[i] (i just past the '['), read as fnmatch.translate reads it: *end gets the index
 * past its ']', or i - 1 when there is no ']' (then the '[' is a literal). Does c belong to it? */
#define JOIN UINT32_MAX
static bool set_match(const uint32_t *pat, size_t n, size_t i, size_t *end, uint32_t c) {
    size_t j = i;
    if (j < n && pat[j] == '!') j++;
    if (j < n && pat[j] == ']') j++;
    while (j < n && pat[j] != ']') j++;
    if (j >= n) {
        *end = i - 1;
        return false;
    }
    *end = j + 1;
    /* the set as chunks joined by range dashes: the first dash is looked for from the second
     * character (the third after '!'), each next one from two past the previous dash; a dash
     * ending the set is a literal; other dashes are literals */
    uint32_t *f = malloc((2 * (j - i) + 2) * sizeof *f);
    if (!f) return false;
    size_t nf = 0, k = pat[i] == '!' ? i + 2 : i + 1, a = i;
    for (;;) {
        while (k < j && pat[k] != '-') k++;
        if (k >= j) break;
        for (size_t q = a; q < k; q++) f[nf++] = pat[q];
        f[nf++] = JOIN;
        a = k + 1;
        k += 3;
    }
    for (size_t q = a; q < j; q++) f[nf++] = pat[q];
    if (nf && f[nf - 1] == JOIN) f[nf - 1] = '-';
    /* a reversed range goes, with both of its ends (right to left, as Python merges the chunks) */
    for (size_t q = nf; q-- > 1;) {
        if (f[q] != JOIN || q + 1 >= nf || f[q - 1] <= f[q + 1]) continue;
        memmove(&f[q - 1], &f[q + 2], (nf - q - 2) * sizeof *f);
        nf -= 3;
        q--;
    }
    bool in = false, neg = nf && f[0] == '!'; /* '^' or '[' first: literals */
    if (nf == 0) in = false;                    /* an empty set never matches */
    else if (nf == 1 && neg) neg = false, in = true; /* "[!]"-like: any character */
    else
        for (size_t q = neg ? 1 : 0; q < nf && !in; q++)
            in = f[q] == JOIN ? q + 1 < nf && f[q - 1] <= c && c <= f[q + 1] : f[q] == c;
    free(f);
    return neg ? !in : in;
}

static bool match_cp(const uint32_t *pat, size_t np, const uint32_t *s, size_t ns) {
    size_t p = 0, i = 0, star_p = (size_t)-1, star_i = 0;
    while (i < ns) {
        if (p < np && pat[p] == '*') {
            while (p < np && pat[p] == '*') p++;
            star_p = p, star_i = i;
            continue;
        }
        if (p < np) {
            size_t next = p + 1;
            bool ok;
            if (pat[p] == '?') ok = true;
            else if (pat[p] == '[') {
                size_t end;
                ok = set_match(pat, np, p + 1, &end, s[i]);
                if (end == p) ok = s[i] == '['; /* no closing ']': a literal '[' */
                else next = end;
            } else ok = pat[p] == s[i];
            if (ok) {
                p = next, i++;
                continue;
            }
        }
        if (star_p == (size_t)-1) return false;
        p = star_p, i = ++star_i; /* the last '*' takes one more character */
    }
    while (p < np && pat[p] == '*') p++;
    return p == np;
}

bool hk__glob_match(const char *pattern, const char *path) {
    size_t np = 0, ns = 0;
    uint32_t *p = decode(pattern, &np), *s = decode(path, &ns);
    bool ok = false;
    if (p && s) {
        if (np && p[np - 1] == '/') p[np++] = '*'; /* "dir/" selects what is under dir */
        ok = match_cp(p, np, s, ns);
    }
    free(p);
    free(s);
    return ok;
}

bool hk__glob_select(const char *path, const char *const *include, const char *const *exclude) {
    bool in = !include || !include[0];
    for (size_t i = 0; include && include[i] && !in; i++) in = hk__glob_match(include[i], path);
    for (size_t i = 0; in && exclude && exclude[i]; i++) in = !hk__glob_match(exclude[i], path);
    return in;
}
