/* Growable strings and small string helpers. */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void hk__sb_init(hk_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void hk__sb_free(hk_strbuf *sb) {
    free(sb->data);
    hk__sb_init(sb);
}

static bool sb_reserve(hk_strbuf *sb, size_t extra) {
    if (sb->oom) return false;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->oom = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

void hk__sb_reserve_exact(hk_strbuf *sb, size_t extra) {
    if (sb->oom || extra > SIZE_MAX - sb->len - 1 || sb->len + extra + 1 <= sb->cap) return;
    char *p = realloc(sb->data, sb->len + extra + 1);
    if (!p) {
        sb->oom = true;
        return;
    }
    sb->data = p;
    sb->cap = sb->len + extra + 1;
}

void hk__sb_append_n(hk_strbuf *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void hk__sb_append(hk_strbuf *sb, const char *s) { hk__sb_append_n(sb, s, strlen(s)); }

void hk__sb_vprintf(hk_strbuf *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !sb_reserve(sb, (size_t)n)) return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void hk__sb_printf(hk_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hk__sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *hk__sb_steal(hk_strbuf *sb) {
    if (sb->oom) {
        hk__sb_free(sb);
        return NULL;
    }
    char *p = sb->data ? sb->data : hk__strdup("");
    hk__sb_init(sb);
    return p;
}

char *hk__strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *hk__strndup(const char *s, size_t n) {
    if (!s) return NULL;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *hk__asprintf(const char *fmt, ...) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    va_list ap;
    va_start(ap, fmt);
    hk__sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    return hk__sb_steal(&sb);
}

char *hk__concat(const char *first, ...) {
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) n += strlen(s);
    va_end(ap);
    char *out = malloc(n + 1), *p = out;
    if (!out) return NULL;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) {
        size_t l = strlen(s);
        memcpy(p, s, l);
        p += l;
    }
    va_end(ap);
    *p = '\0';
    return out;
}

bool hk__str_starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool hk__str_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

bool hk__is_hex(const char *s, size_t n) {
    if (!s) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return s[n] == '\0';
}

const char *hk__getenv(const char *name) {
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

bool hk__env_true(const char *name) {
    const char *v = hk__getenv(name);
    if (!v) return false;
    return strcasecmp(v, "1") == 0 || strcasecmp(v, "on") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "true") == 0;
}
