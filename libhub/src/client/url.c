/* URL helpers of the Hub client: origins (the token's boundary), RFC 3986 resolution through
 * libcurl's URL API, percent-encoding, and the values of the Link and ETag headers. */
#include "client/client.h"
#include "util/text.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- URLs ------------------------------------------------------------------------------------ */
static bool url_parts(const char *url, char **scheme, char **host, char **port) {
    CURLU *u = curl_url();
    if (!u) return false;
    bool ok = curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, scheme, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, host, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_PORT, port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    curl_url_cleanup(u);
    return ok;
}

bool hk__url_same_origin(const char *a, const char *b) {
    char *sa = NULL, *ha = NULL, *pa = NULL, *sb = NULL, *hb = NULL, *pb = NULL;
    bool same = url_parts(a, &sa, &ha, &pa) && url_parts(b, &sb, &hb, &pb) &&
                strcasecmp(sa, sb) == 0 && strcasecmp(ha, hb) == 0 && strcmp(pa, pb) == 0;
    curl_free(sa);
    curl_free(ha);
    curl_free(pa);
    curl_free(sb);
    curl_free(hb);
    curl_free(pb);
    return same;
}

char *hk__url_resolve(const char *base, const char *ref) {
    CURLU *u = curl_url();
    if (!u) return NULL;
    char *out = NULL, *res = NULL;
    if (curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_URL, ref, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &out, 0) == CURLUE_OK)
        res = hk__strdup(out);
    curl_free(out);
    curl_url_cleanup(u);
    return res;
}

char *hk__url_rebase(const char *url, const char *endpoint) {
    CURLU *u = curl_url();
    char *path = NULL, *query = NULL, *res = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK) {
        if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_OK) query = NULL;
        /* endpoint = origin [+ path prefix]; keep the prefix when the link lacks it */
        const char *sep = strstr(endpoint, "://");
        const char *pfx = sep ? strchr(sep + 3, '/') : NULL;
        size_t olen = pfx ? (size_t)(pfx - endpoint) : strlen(endpoint);
        size_t plen = pfx ? strlen(pfx) : 0;
        while (plen > 0 && pfx[plen - 1] == '/') plen--;
        bool need_prefix = plen > 0 && strncmp(path, pfx, plen) != 0;
        res = hk__asprintf("%.*s%.*s%s%s%s", (int)olen, endpoint, need_prefix ? (int)plen : 0,
                          need_prefix ? pfx : "", path, query ? "?" : "", query ? query : "");
    }
    curl_free(path);
    curl_free(query);
    if (u) curl_url_cleanup(u);
    return res;
}


char *hk__link_next(const char *link) {
    if (!link) return NULL;
    const char *p = link;
    while ((p = strchr(p, '<')) != NULL) {
        const char *q = strchr(p, '>');
        if (!q) return NULL;
        const char *next = strchr(q, '<');
        size_t span = next ? (size_t)(next - q) : strlen(q);
        /* look for rel="next" or rel=next within this link's parameters */
        char *params = hk__strndup(q, span);
        bool is_next = false;
        if (params) {
            for (char *r = params; (r = strstr(r, "rel")) != NULL; r += 3) {
                char *v = r + 3;
                while (*v == ' ') v++;
                if (*v != '=') continue;
                v++;
                while (*v == ' ' || *v == '"') v++;
                if (strncmp(v, "next", 4) == 0 && (v[4] == '"' || v[4] == ';' || v[4] == ',' ||
                                                   v[4] == ' ' || v[4] == '\0')) {
                    is_next = true;
                    break;
                }
            }
            free(params);
        }
        if (is_next) return hk__strndup(p + 1, (size_t)(q - p - 1));
        p = q;
    }
    return NULL;
}

char *hk__etag_normalize(const char *etag) {
    if (!etag) return NULL;
    const char *s = etag;
    while (*s == 'W' || *s == '/') s++;
    size_t n = strlen(s);
    while (n > 0 && *s == '"') {
        s++;
        n--;
    }
    while (n > 0 && s[n - 1] == '"') n--;
    return hk__strndup(s, n);
}


char *hk__url_escape_unsafe(const char *s) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c >= 0x80 || c <= 0x20 || c == 0x7f || strchr("\"<>\\^`{|}", c)) {
            hk__sb_printf(&sb, "%%%02X", c);
        } else {
            char ch = (char)c;
            hk__sb_append_n(&sb, &ch, 1);
        }
    }
    return hk__sb_steal(&sb);
}
