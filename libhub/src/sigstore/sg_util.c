/* Small helpers of the sigstore layer: base64 as protobuf JSON writes it, int64 fields, RFC 3339
 * times, SHA-256. */
#include "sigstore/sg_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

bool hk__sg_b64_decode(hk_sg_bytes *out, const char *s) {
    out->data = NULL;
    out->len = 0;
    if (!s) return false;
    size_t n = strlen(s);
    size_t pad = 0;
    while (n > 0 && s[n - 1] == '=' && pad < 2) {
        n--;
        pad++;
    }
    if (n % 4 == 1 || (pad && (n + pad) % 4 != 0)) return false;
    unsigned char *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return false;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(buf);
            return false;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* leftover bits must be zero (canonical encoding) */
    if (bits && (acc & ((1u << bits) - 1))) {
        free(buf);
        return false;
    }
    out->data = buf;
    out->len = o;
    return true;
}

char *hk__sg_b64_encode(const unsigned char *data, size_t len) {
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out) return NULL;
    hk__base64(out, data, len);
    return out;
}

bool hk__sg_json_int64(int64_t *out, const cJSON *item) {
    if (!item) return false;
    if (cJSON_IsString(item)) {
        const char *s = item->valuestring;
        if (!*s || strlen(s) > 19) return false;
        int64_t v = 0;
        bool neg = false;
        if (*s == '-') {
            neg = true;
            s++;
            if (!*s) return false;
        }
        for (; *s; s++) {
            if (*s < '0' || *s > '9') return false;
            if (v > (INT64_MAX - (*s - '0')) / 10) return false;
            v = v * 10 + (*s - '0');
        }
        *out = neg ? -v : v;
        return true;
    }
    if (cJSON_IsNumber(item)) {
        double d = item->valuedouble;
        if (d != (double)(int64_t)d || d > 9007199254740992.0 || d < -9007199254740992.0) return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

const char *hk__sg_json_str(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

void hk__sg_sha256(unsigned char out[32], const void *data, size_t len) {
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

static bool digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

bool hk__sg_parse_rfc3339(int64_t *out, const char *s) {
    int y, mo, d, h, mi, se;
    if (!s || strlen(s) < 20) return false;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &se))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9') return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    int64_t offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om)) return false;
        offset = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p) return false;
    /* days from civil (proleptic Gregorian), no timezone database involved */
    int yy = mo <= 2 ? y - 1 : y;
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    *out = days * 86400 + h * 3600 + mi * 60 + se - offset;
    return true;
}

void hk__sg_certs_free(STACK_OF(X509) *certs) {
    sk_X509_pop_free(certs, X509_free);
}

/* ---- exact JSON ------------------------------------------------------------------------------- */
static bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

/* Length of the UTF-8 sequence at p (RFC 3629: shortest form, no surrogates, at most U+10FFFF),
 * 0 if it is not one. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n || (size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xf0 && p[1] < 0x90)) return 0; /* overlong */
    if ((c == 0xed && p[1] > 0x9f) || (c == 0xf4 && p[1] > 0x8f)) return 0; /* surrogate, > U+10FFFF */
    return n;
}

/* Length of the RFC 8259 number at p (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), 0 if none.
 * cJSON hands its characters to strtod, which also takes 01 or 1. */
static size_t json_number(const unsigned char *p, const unsigned char *end) {
    const unsigned char *q = p;
    if (q < end && *q == '-') q++;
    if (q >= end || !is_digit(*q)) return 0;
    if (*q == '0') q++;
    else
        while (q < end && is_digit(*q)) q++;
    if (q < end && *q == '.') {
        if (++q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        if (++q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    if (q < end && (is_digit(*q) || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-')) return 0;
    return (size_t)(q - p);
}

/* The lexical rules cJSON does not hold: it takes any byte <= 0x20 as whitespace, a UTF-8 BOM,
 * control characters and invalid UTF-8 inside strings, \u0000 (and then cuts the string). */
static const char *json_lexical(const unsigned char *p, size_t len) {
    const unsigned char *end = p + len;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            for (p++;; p++) {
                if (p >= end) return NULL; /* unterminated: cJSON refuses it */
                if (*p == '"') break;
                if (*p < 0x20) return "control character in a JSON string";
                if (*p == '\\') {
                    if (++p >= end) return NULL;
                    if (*p == 'u' && end - p > 4 && memcmp(p + 1, "0000", 4) == 0) return "\\u0000 in a JSON string";
                } else if (*p >= 0x80) {
                    size_t n = utf8_seq(p, end);
                    if (!n) return "a JSON string is not valid UTF-8";
                    p += n - 1;
                }
            }
            p++;
        } else if (c == '-' || is_digit(c)) {
            size_t n = json_number(p, end);
            if (!n) return "malformed JSON number";
            p += n;
        } else if (c >= 0x80 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
            return "a byte that is not JSON outside a string";
        } else {
            p++;
        }
    }
    return NULL;
}

bool hk__sg_utf8_valid(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, p + n);
        if (!k) return false;
        i += k;
    }
    return true;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate keys refused and null members dropped, in every object of the tree. */
static int json_tree(cJSON *node, const char **why) {
    if (!cJSON_IsObject(node) && !cJSON_IsArray(node)) return HK_OK;
    if (cJSON_IsObject(node)) {
        size_t n = 0;
        for (const cJSON *c = node->child; c; c = c->next) n++;
        if (n > 1) { /* sorted, so a huge object costs n log n, not n^2 */
            const char **keys = malloc(n * sizeof *keys);
            if (!keys) return HK_ERR_NOMEM;
            size_t i = 0;
            for (const cJSON *c = node->child; c; c = c->next) keys[i++] = c->string;
            qsort(keys, n, sizeof *keys, key_cmp);
            bool dup = false;
            for (i = 1; i < n && !dup; i++) dup = strcmp(keys[i - 1], keys[i]) == 0;
            free(keys);
            if (dup) {
                *why = "a JSON object has a duplicate key";
                return HK_ERR_PARSE;
            }
        }
    }
    for (cJSON *c = node->child, *next; c; c = next) {
        next = c->next;
        if (cJSON_IsObject(node) && cJSON_IsNull(c)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(node, c));
            continue;
        }
        int rc = json_tree(c, why);
        if (rc != HK_OK) return rc;
    }
    return HK_OK;
}

int hk__sg_json_parse(cJSON **out, const char *json, size_t len, const char **why) {
    *out = NULL;
    *why = "out of memory";
    if (!json) {
        *why = "no JSON text";
        return HK_ERR_PARSE;
    }
    const char *lex = json_lexical((const unsigned char *)json, len);
    if (lex) {
        *why = lex;
        return HK_ERR_PARSE;
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!doc) {
        *why = "not valid JSON";
        return HK_ERR_PARSE;
    }
    while (end < json + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end != json + len) {
        cJSON_Delete(doc);
        *why = "text after the JSON value";
        return HK_ERR_PARSE;
    }
    int rc = json_tree(doc, why);
    if (rc != HK_OK) {
        cJSON_Delete(doc);
        return rc;
    }
    *out = doc;
    return HK_OK;
}
