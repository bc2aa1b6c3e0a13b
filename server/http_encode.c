/* Encoding helpers of the HTTP answers: percent-decoding of URL segments and form bodies,
 * percent-encoding of the URLs we emit, JSON string literals, and sanitising of text that goes into
 * a header value or a log line. */
#include "server/srv_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *hk_srv_pct_decode(const char *s, size_t n, bool plus_space) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int hi = i + 1 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
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

void hk_srv_url_encode(hk_strbuf *sb, const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || (c == '/' && keep_slash)) {
            char ch = (char)c;
            hk_sb_append_n(sb, &ch, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            hk_sb_append_n(sb, e, 3);
        }
    }
}

void hk_srv_json_str(hk_strbuf *sb, const char *s) {
    hk_sb_append_n(sb, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c == '"') hk_sb_append_n(sb, "\\\"", 2);
        else if (c == '\\') hk_sb_append_n(sb, "\\\\", 2);
        else if (c < 0x20) hk_sb_printf(sb, "\\u%04x", c);
        else {
            char ch = (char)c;
            hk_sb_append_n(sb, &ch, 1);
        }
    }
    hk_sb_append_n(sb, "\"", 1);
}

char *hk_srv_sanitize(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) n = max;
    char *o = malloc(n + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        o[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    o[n] = '\0';
    return o;
}

bool hk_srv_query_true(struct MHD_Connection *c, const char *key) {
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

void hk_srv_iso_time(char out[32], time_t t) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

void hk_srv_client_ip(char *out, size_t cap, struct MHD_Connection *c) {
    snprintf(out, cap, "?");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}
