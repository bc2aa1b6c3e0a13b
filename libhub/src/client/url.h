/* URL helpers of the Hub client (url.c): origins, RFC 3986 resolution, percent-encoding, the
 * Link and ETag header values. Internal. */
#ifndef HK_CLIENT_URL_H
#define HK_CLIENT_URL_H

#include <stdbool.h>

/* Same scheme, host and port (case-insensitive host; default ports made explicit). */
bool hk__url_same_origin(const char *a, const char *b);
/* Resolve a (possibly relative) reference against base, RFC 3986 style. Caller frees. */
char *hk__url_resolve(const char *base, const char *ref);
/* Replace the origin of url by the endpoint's (Link headers may name huggingface.co). */
char *hk__url_rebase(const char *url, const char *endpoint);
/* rel="next" target of a Link header, or NULL. Caller frees. */
char *hk__link_next(const char *link);
/* Python's etag rule: strip leading 'W' and '/' characters, then '"' at both ends. Caller frees. */
char *hk__etag_normalize(const char *etag);
/* A URL taken from a server's header (Link) made safe to send: bytes >= 0x80, controls, space and
 * " < > \ ^ ` { | } percent-encoded (everything else, '%' included, kept). Caller frees. */
char *hk__url_escape_unsafe(const char *s);

#endif
