/* Text encodings used across the project, each written once (util layer): hex, percent-encoding,
 * JSON string escaping, commit ids. */
#ifndef HK_UTIL_TEXT_H
#define HK_UTIL_TEXT_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

/* Value of one hex digit (either case), -1 otherwise. */
int hk__hex_digit(char c);
/* Decode exactly 2n hex chars (either case) of hex into out[n]. HK_OK or HK_ERR_PARSE (nothing
 * recorded as last error: the caller says what was malformed). */
int hk__unhex(unsigned char *out, const char *hex, size_t n);
/* A git commit id: 40 (SHA-1) or 64 (SHA-256 object format) lowercase hex chars. */
bool hk__is_commit_id(const char *s);
/* A revision name as it may enter from outside (an API argument, a kernel-depends or lock entry,
 * a kernel-status.toml, a route): a branch, tag or commit name under git's ref rules that is also
 * a safe relative path (refs/<rev> and URLs are built from it): 1-255 bytes, no "." / ".." / empty
 * segment, no leading '/' or '-', none of ' ~^:?*[\\' or control characters, no "@{", not ending in
 * ".lock" or '.'. */
bool hk__revision_valid(const char *s);

/* Append s percent-encoded: RFC 3986 unreserved characters kept (and '/' when keep_slash), every
 * other byte as %XX (uppercase), bytes >= 0x80 included. */
void hk__sb_pct_encode(hk_strbuf *sb, const char *s, bool keep_slash);
/* Same, as a new string (NULL: out of memory). Caller frees. */
char *hk__pct_encode(const char *s, bool keep_slash);
/* Decode s[0..n); NULL for a malformed escape, an encoded or raw NUL, or out of memory.
 * plus_space: '+' means ' ' (form bodies). Caller frees. */
char *hk__pct_decode(const char *s, size_t n, bool plus_space);

/* Append s as a JSON string literal (quotes included): '"', '\\' and control characters escaped;
 * other bytes (UTF-8) as they are. */
void hk__sb_json_str(hk_strbuf *sb, const char *s);

#endif
