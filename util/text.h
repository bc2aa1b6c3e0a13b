/* Text encodings used across the project, each written once (util layer): hex, percent-encoding,
 * JSON string escaping, commit ids. */
#ifndef HK_UTIL_TEXT_H
#define HK_UTIL_TEXT_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* Value of one hex digit (either case), -1 otherwise. */
int hk__hex_digit(char c);
/* Decode exactly 2n hex chars (either case) of hex into out[n]. HK_OK or HK_ERR_PARSE (nothing
 * recorded as last error: the caller says what was malformed). */
int hk__unhex(unsigned char *out, const char *hex, size_t n);
/* A git commit id: 40 (SHA-1) or 64 (SHA-256 object format) lowercase hex chars. */
bool hk__is_commit_id(const char *s);
/* Shortest-form UTF-8 (no overlong forms such as a "%c0%ae" dot in disguise, no surrogates). */
bool hk__utf8_valid(const char *s, size_t n);
#define HK_REVISION_MAX 255
#define HK_REPO_PATH_MAX 4096
/* A revision name as it may enter from outside (an API argument, a kernel-depends or lock entry, a
 * kernel-status.toml, a route of the mirror): the one rule of the project. A branch, tag or commit
 * name under git's ref rules that is also a safe relative path (refs/<rev> and URLs are built from
 * it): 1..HK_REVISION_MAX bytes of shortest-form UTF-8; no "..", "//", "@{", "@", leading '/' or
 * '-', trailing '/' or '.'; none of ' ~^:?*[\\%' or control characters (a '%' left after the one
 * percent-decoding is a second encoding); no component starting with '.' or ending in ".lock". */
bool hk__revision_valid(const char *s);
/* A file path of a repo as it may enter from outside: hk__path_is_safe_relative, shortest-form
 * UTF-8, at most HK_REPO_PATH_MAX bytes and 255 a component. */
bool hk__repo_path_valid(const char *path);
/* A byte count as a JSON number from outside gives it (a listing's size): a non-negative integer
 * that a double holds exactly (<= 2^53). 1e30, -1, 1.5, NaN are none (false), never a cast with an
 * undefined or truncated result. */
bool hk__byte_count(uint64_t *out, double d);
/* A build variant's name as a caller or a listing gives it: one component of the repo path rule
 * (the directory under build/), not starting with '.'. */
bool hk__variant_name_valid(const char *name);

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
