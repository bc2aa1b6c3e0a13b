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
