/* Small text helpers of the HTTP answers: sanitising text that goes into a header value or a log
 * line, query flags, dates, the client's address. Percent-encoding and JSON string literals are the
 * util layer's (util/text.h). */
#include "server/srv_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

char *srv_sanitize(const char *s, size_t max) {
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

bool srv_query_true(struct MHD_Connection *c, const char *key) {
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

void srv_iso_time(char out[32], time_t t) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

void srv_client_ip(char *out, size_t cap, struct MHD_Connection *c) {
    snprintf(out, cap, "?");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}
