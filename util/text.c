#include "util/text.h"

#include <stdlib.h>
#include <string.h>

int hk__hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int hk__unhex(unsigned char *out, const char *hex, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int hi = hk__hex_digit(hex[2 * i]);
        int lo = hi < 0 ? -1 : hk__hex_digit(hex[2 * i + 1]);
        if (lo < 0) return HK_ERR_PARSE;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return HK_OK;
}

bool hk__is_commit_id(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return (n == 40 || n == 64) && hk__is_hex(s, n);
}

bool hk__revision_valid(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > HK_REVISION_MAX || s[0] == '/' || s[0] == '-' || s[n - 1] == '/' || s[n - 1] == '.') return false;
    if (strstr(s, "..") || strstr(s, "//") || strstr(s, "@{") || strcmp(s, "@") == 0) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* '%' too: names are percent-decoded once where they enter, so one left is a second encoding */
        if (c < 0x20 || c == 0x7f || strchr(" ~^:?*[\\%", c)) return false;
    }
    for (const char *p = s; *p;) { /* no component "./x", "a/.b" or "x.lock" */
        size_t k = strcspn(p, "/");
        if (p[0] == '.' || (k >= 5 && memcmp(p + k - 5, ".lock", 5) == 0)) return false;
        p += k;
        if (*p == '/') p++;
    }
    return hk__utf8_valid(s, n);
}

bool hk__byte_count(uint64_t *out, double d) {
    if (!(d >= 0 && d <= 9007199254740992.0) || (double)(uint64_t)d != d) return false;
    *out = (uint64_t)d;
    return true;
}

bool hk__variant_name_valid(const char *name) {
    /* the path rule's component (at most 255 bytes, valid UTF-8), and not hidden: the cache's
     * path makers and the digest walk would refuse or skip it later */
    return name && name[0] != '.' && !strchr(name, '/') && hk__repo_path_valid(name);
}

bool hk__repo_path_valid(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n > HK_REPO_PATH_MAX || !hk__path_is_safe_relative(path)) return false;
    for (const char *p = path; *p;) {
        size_t k = strcspn(p, "/");
        if (k > 255) return false;
        p += k;
        if (*p == '/') p++;
    }
    return hk__utf8_valid(path, n);
}

static bool unreserved(unsigned char c, bool keep_slash) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.' || c == '~' || (keep_slash && c == '/');
}

void hk__sb_pct_encode(hk_strbuf *sb, const char *s, bool keep_slash) {
    static const char digits[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p, keep_slash)) {
            hk__sb_append_n(sb, (const char *)p, 1);
        } else {
            char e[3] = {'%', digits[*p >> 4], digits[*p & 15]};
            hk__sb_append_n(sb, e, 3);
        }
    }
}

char *hk__pct_encode(const char *s, bool keep_slash) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "");
    hk__sb_pct_encode(&sb, s, keep_slash);
    return hk__sb_steal(&sb);
}

char *hk__pct_decode(const char *s, size_t n, bool plus_space) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 1 < n ? hk__hex_digit(s[i + 1]) : -1, lo = i + 2 < n ? hk__hex_digit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            out[o++] = ' ';
        } else if (c == '\0') {
            free(out);
            return NULL;
        } else {
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return out;
}

void hk__sb_json_str(hk_strbuf *sb, const char *s) {
    hk__sb_append_n(sb, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"') hk__sb_append_n(sb, "\\\"", 2);
        else if (*p == '\\') hk__sb_append_n(sb, "\\\\", 2);
        else if (*p < 0x20) hk__sb_printf(sb, "\\u%04x", *p);
        else hk__sb_append_n(sb, (const char *)p, 1);
    }
    hk__sb_append_n(sb, "\"", 1);
}
