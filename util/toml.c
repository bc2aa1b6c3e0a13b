/* TOML 1.0 reader: keys (bare, quoted, dotted), [tables], [[arrays of tables]], basic / literal /
 * multi-line strings with every escape, integers (decimal, 0x, 0o, 0b, underscores), floats (inf,
 * nan, exponents), booleans, offset / local date-times (kept as text), arrays and inline tables;
 * redefinitions refused as the spec says. Recursive descent over a bounded nesting depth.
 * Kept in one file (about 700 lines) because the grammar is one recursive unit. */
#include "util/toml.h"

#include "internal.h"
#include "util/vec.h"

#include <errno.h>
#include <math.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct ps {
    const char *s, *end, *what;
    const char *line_start;
    int line;
    int depth;
} ps;

static int perr(ps *p, const char *msg) {
    return hk__fail(HK_ERR_PARSE, "%s: line %d, column %d: %s", p->what, p->line,
                   (int)(p->s - p->line_start) + 1, msg);
}

static bool at_end(const ps *p) { return p->s >= p->end; }
static int peek(const ps *p) { return p->s < p->end ? (unsigned char)*p->s : -1; }
static int peek_at(const ps *p, size_t k) { return p->s + k < p->end ? (unsigned char)p->s[k] : -1; }
static bool starts(const ps *p, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(p->end - p->s) >= n && memcmp(p->s, lit, n) == 0;
}
static void newline_seen(ps *p) {
    p->line++;
    p->line_start = p->s;
}

static void skip_ws(ps *p) {
    while (!at_end(p) && (*p->s == ' ' || *p->s == '\t')) p->s++;
}

static int skip_comment(ps *p) {
    if (peek(p) != '#') return HK_OK;
    while (!at_end(p) && *p->s != '\n') {
        unsigned char c = (unsigned char)*p->s;
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) return perr(p, "control character in a comment");
        p->s++;
    }
    return HK_OK;
}

/* whitespace, newlines and comments (inside arrays) */
static int skip_ws_nl(ps *p) {
    for (;;) {
        skip_ws(p);
        int rc = skip_comment(p);
        if (rc) return rc;
        if (starts(p, "\r\n")) p->s += 2;
        else if (peek(p) == '\n') p->s++;
        else return HK_OK;
        newline_seen(p);
    }
}

/* end of a line after a key/value or header: ws, optional comment, newline or EOF */
static int end_of_line(ps *p) {
    skip_ws(p);
    int rc = skip_comment(p);
    if (rc) return rc;
    if (at_end(p)) return HK_OK;
    if (starts(p, "\r\n")) p->s += 2;
    else if (peek(p) == '\n') p->s++;
    else return perr(p, "expected the end of the line");
    newline_seen(p);
    return HK_OK;
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static hk_toml *node_new(hk_toml_kind kind) {
    hk_toml *t = calloc(1, sizeof *t);
    if (t) t->kind = kind;
    return t;
}

void hk__toml_free(hk_toml *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) hk__toml_free(t->items[i]);
    free(t->items);
    free(t->index);
    free(t->key);
    free(t->str);
    free(t);
}

/* ---- the key index of a table --------------------------------------------------------------- */

/* Tables up to this many keys are scanned (most are small; no index to allocate). */
#define INDEX_FROM 8

/* The keys come from files a mirror serves: FNV-1a from a per-process random start, finished with
 * a 64-bit mixer so every bit counts, so that no one file can make every key collide. */
static uint64_t g_seed;
static pthread_once_t g_seed_once = PTHREAD_ONCE_INIT;
static void seed_init(void) {
    if (RAND_bytes((unsigned char *)&g_seed, sizeof g_seed) != 1) g_seed = (uint64_t)(uintptr_t)&g_seed;
}

static uint64_t key_hash(const char *s) {
    uint64_t h = 14695981039346656037ull ^ g_seed;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static void index_put(size_t *slots, size_t cap, const char *key, size_t pos) {
    size_t i = (size_t)key_hash(key) & (cap - 1);
    while (slots[i]) i = (i + 1) & (cap - 1);
    slots[i] = pos + 1;
}

/* Room in t's index for one more key (built when the table outgrows INDEX_FROM, doubled when half
 * full); on failure t is unchanged. */
static int index_reserve(hk_toml *t) {
    size_t want = t->n + 1;
    if (want <= INDEX_FROM || want * 2 <= t->index_cap) return HK_OK;
    size_t cap = t->index_cap ? t->index_cap : 4 * INDEX_FROM;
    while (cap < want * 2) cap *= 2;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n; i++) index_put(slots, cap, t->items[i]->key, i);
    free(t->index);
    t->index = slots;
    t->index_cap = cap;
    return HK_OK;
}

/* child: an element of an array, or a keyed value of a table (its key already set) */
static int add_item(hk_toml *parent, hk_toml *child) {
    int rc = HK_VEC_RESERVE(parent->items, parent->cap, parent->n + 1);
    if (rc == HK_OK && parent->kind == HK_TOML_TABLE) rc = index_reserve(parent);
    if (rc) return rc;
    if (parent->index) index_put(parent->index, parent->index_cap, child->key, parent->n);
    parent->items[parent->n++] = child;
    return HK_OK;
}

static hk_toml *find(const hk_toml *t, const char *key) {
    if (!t || t->kind != HK_TOML_TABLE) return NULL;
    if (t->index) {
        for (size_t i = (size_t)key_hash(key) & (t->index_cap - 1); t->index[i]; i = (i + 1) & (t->index_cap - 1))
            if (strcmp(t->items[t->index[i] - 1]->key, key) == 0) return t->items[t->index[i] - 1];
        return NULL;
    }
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i]->key, key) == 0) return t->items[i];
    return NULL;
}

const hk_toml *hk__toml_get(const hk_toml *t, const char *key) { return find(t, key); }

/* ---- strings -------------------------------------------------------------------------------- */

static int put_utf8(hk_strbuf *sb, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) b[0] = (char)cp, n = 1;
    else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    hk__sb_append_n(sb, b, n);
    return HK_OK;
}

static int escape(ps *p, hk_strbuf *sb) {
    p->s++; /* backslash */
    int c = peek(p);
    const char *map = "b\bt\tn\nf\fr\re\033\"\"\\\\";
    for (const char *m = map; *m; m += 2)
        if (c == m[0]) {
            hk__sb_append_n(sb, &m[1], 1);
            p->s++;
            return HK_OK;
        }
    if (c == 'u' || c == 'U') {
        int digits = c == 'u' ? 4 : 8;
        p->s++;
        uint32_t cp = 0;
        for (int i = 0; i < digits; i++) {
            int h = peek(p);
            int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                   : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0) return perr(p, "bad \\u escape");
            cp = cp * 16 + (uint32_t)v;
            p->s++;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return perr(p, "escape is not a Unicode scalar value");
        return put_utf8(sb, cp);
    }
    return perr(p, "unknown escape sequence");
}

static bool bad_ctrl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

/* a string value or quoted key at p->s (on the opening quote); multiline allowed for values */
static int parse_string(ps *p, hk_strbuf *sb, bool allow_multi) {
    char q = *p->s;
    bool literal = q == '\'';
    const char *triple = literal ? "'''" : "\"\"\"";
    if (allow_multi && starts(p, triple)) {
        p->s += 3;
        if (starts(p, "\r\n")) p->s += 2, newline_seen(p);
        else if (peek(p) == '\n') p->s++, newline_seen(p);
        for (;;) {
            if (at_end(p)) return perr(p, "unterminated multi-line string");
            if (starts(p, triple)) {
                /* up to two quotes right before the closing three belong to the string */
                size_t extra = 0;
                while (extra < 2 && peek_at(p, 3 + extra) == q) extra++;
                hk__sb_append_n(sb, p->s, extra);
                p->s += 3 + extra;
                return HK_OK;
            }
            unsigned char c = (unsigned char)*p->s;
            if (!literal && c == '\\') {
                /* line-ending backslash: trim whitespace and newlines up to the next text */
                const char *t = p->s + 1;
                while (t < p->end && (*t == ' ' || *t == '\t')) t++;
                if (t < p->end && (*t == '\n' || (*t == '\r' && t + 1 < p->end && t[1] == '\n'))) {
                    p->s = t;
                    while (!at_end(p) && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) {
                        if (*p->s == '\n') {
                            p->s++;
                            newline_seen(p);
                        } else p->s++;
                    }
                    continue;
                }
                int rc = escape(p, sb);
                if (rc) return rc;
                continue;
            }
            if (c == '\n') {
                hk__sb_append_n(sb, "\n", 1);
                p->s++;
                newline_seen(p);
                continue;
            }
            if (c == '\r' && peek_at(p, 1) == '\n') {
                p->s++;
                continue;
            }
            if (bad_ctrl(c)) return perr(p, "control character in a string");
            hk__sb_append_n(sb, p->s, 1);
            p->s++;
        }
    }
    p->s++;
    for (;;) {
        if (at_end(p) || *p->s == '\n') return perr(p, "unterminated string");
        unsigned char c = (unsigned char)*p->s;
        if (c == (unsigned char)q) {
            p->s++;
            return HK_OK;
        }
        if (!literal && c == '\\') {
            int rc = escape(p, sb);
            if (rc) return rc;
            continue;
        }
        if (bad_ctrl(c)) return perr(p, "control character in a string");
        hk__sb_append_n(sb, p->s, 1);
        p->s++;
    }
}

/* ---- keys ----------------------------------------------------------------------------------- */

#define MAX_KEY_PARTS 64

typedef struct keypath {
    char *part[MAX_KEY_PARTS];
    size_t n;
} keypath;

static void keypath_free(keypath *k) {
    for (size_t i = 0; i < k->n; i++) free(k->part[i]);
    k->n = 0;
}

static bool bare_char(int c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* On failure k holds nothing (every part parsed so far freed). */
static int parse_key(ps *p, keypath *k) {
    k->n = 0;
    int rc = HK_OK;
    for (;;) {
        skip_ws(p);
        if (k->n == MAX_KEY_PARTS) {
            rc = perr(p, "key has too many dotted parts (at most 64)");
            break;
        }
        hk_strbuf sb;
        hk__sb_init(&sb);
        int c = peek(p);
        if (c == '"' || c == '\'') rc = parse_string(p, &sb, false);
        else if (bare_char(c)) {
            const char *b = p->s;
            while (bare_char(peek(p))) p->s++;
            hk__sb_append_n(&sb, b, (size_t)(p->s - b));
        } else rc = perr(p, "expected a key");
        if (rc == HK_OK && sb.oom) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK && memchr(sb.data ? sb.data : "", '\0', sb.len))
            rc = perr(p, "a key may not contain NUL");
        char *part = rc == HK_OK ? (sb.data ? sb.data : hk__strdup("")) : NULL;
        if (rc == HK_OK && !part) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc) {
            hk__sb_free(&sb);
            break;
        }
        k->part[k->n++] = part;
        skip_ws(p);
        if (peek(p) != '.') return HK_OK;
        p->s++;
    }
    keypath_free(k);
    return rc;
}

/* ---- values --------------------------------------------------------------------------------- */

static int parse_value(ps *p, hk_toml **out);

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

/* numbers, booleans, date-times: scanned as one token */
static int parse_scalar(ps *p, hk_toml **out) {
    if (starts(p, "true") && !bare_char(peek_at(p, 4))) {
        p->s += 4;
        if (!(*out = node_new(HK_TOML_BOOL))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        (*out)->b = true;
        return HK_OK;
    }
    if (starts(p, "false") && !bare_char(peek_at(p, 5))) {
        p->s += 5;
        if (!(*out = node_new(HK_TOML_BOOL))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        return HK_OK;
    }
    const char *b = p->s;
    /* a date-time may hold one space between date and time: "1979-05-27 07:32:00" */
    while (!at_end(p)) {
        int c = peek(p);
        if (bare_char(c) || c == '+' || c == '.' || c == ':') p->s++;
        else if (c == ' ' && p->s - b == 10 && b[4] == '-' && is_digit(peek_at(p, 1))) p->s++;
        else break;
    }
    size_t n = (size_t)(p->s - b);
    if (n == 0 || n > 64) return perr(p, "expected a value");
    char tok[72], clean[72];
    memcpy(tok, b, n);
    tok[n] = '\0';
    /* date-time: digits then '-' at 4 or ':' at 2 */
    if ((n >= 10 && is_digit(tok[0]) && tok[4] == '-') || (n >= 8 && is_digit(tok[0]) && tok[2] == ':')) {
        for (size_t i = 0; i < n; i++)
            if (!is_digit(tok[i]) && !strchr("-:.TtZz+ ", tok[i])) return perr(p, "malformed date-time");
        if (!(*out = node_new(HK_TOML_DATETIME)) || !((*out)->str = hk__strdup(tok))) {
            hk__toml_free(*out);
            *out = NULL;
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        (*out)->str_len = n;
        return HK_OK;
    }
    const char *t = tok;
    bool neg = false, sign = false;
    if (*t == '+' || *t == '-') neg = *t == '-', sign = true, t++;
    if (strcmp(t, "inf") == 0 || strcmp(t, "nan") == 0) {
        if (!(*out = node_new(HK_TOML_FLOAT))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        (*out)->f = t[0] == 'i' ? (neg ? -HUGE_VAL : HUGE_VAL) : NAN;
        return HK_OK;
    }
    int base = 10;
    if (t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b')) {
        if (sign) return perr(p, "a sign is not allowed on hex / octal / binary integers");
        base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2;
        t += 2;
    }
    /* underscores only between digits */
    size_t w = 0;
    bool is_float = false;
    for (size_t i = 0; t[i]; i++) {
        char c = t[i];
        if (c == '_') {
            bool ok_prev = i > 0 && (base == 16 ? strchr("0123456789abcdefABCDEF", t[i - 1]) != NULL : is_digit(t[i - 1]));
            bool ok_next = base == 16 ? t[i + 1] && strchr("0123456789abcdefABCDEF", t[i + 1]) != NULL : is_digit(t[i + 1]);
            if (!ok_prev || !ok_next) return perr(p, "misplaced underscore in a number");
            continue;
        }
        if (base == 10 && (c == '.' || c == 'e' || c == 'E')) is_float = true;
        clean[w++] = c;
    }
    clean[w] = '\0';
    if (w == 0) return perr(p, "expected a value");
    char *endp = NULL;
    errno = 0;
    if (is_float) {
        /* TOML: digits on both sides of '.', an exponent has digits, no leading zeros */
        const char *dot = strchr(clean, '.');
        if (dot && (dot == clean || !is_digit(dot[-1]) || !is_digit(dot[1]))) return perr(p, "malformed float");
        if (clean[0] == '0' && is_digit(clean[1])) return perr(p, "leading zeros in a float");
        double d = strtod(clean, &endp);
        if (*endp || !is_digit(clean[0])) return perr(p, "malformed float");
        if (!(*out = node_new(HK_TOML_FLOAT))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        (*out)->f = neg ? -d : d;
        return HK_OK;
    }
    if (base == 10 && clean[0] == '0' && clean[1]) return perr(p, "leading zeros in an integer");
    for (size_t i = 0; clean[i]; i++) {
        char c = clean[i];
        bool ok = base == 16 ? strchr("0123456789abcdefABCDEF", c) != NULL : base == 8 ? c >= '0' && c <= '7'
                : base == 2 ? c == '0' || c == '1' : is_digit(c);
        if (!ok) return perr(p, "malformed number");
    }
    unsigned long long u = strtoull(clean, &endp, base);
    if (errno == ERANGE || *endp || u > (unsigned long long)INT64_MAX + (neg ? 1u : 0u))
        return perr(p, "integer out of the 64-bit range");
    if (!(*out = node_new(HK_TOML_INT))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    (*out)->i = neg ? (int64_t)(0 - u) : (int64_t)u;
    return HK_OK;
}

static int parse_array(ps *p, hk_toml **out) {
    p->s++; /* [ */
    hk_toml *a = node_new(HK_TOML_ARRAY);
    if (!a) return hk__fail(HK_ERR_NOMEM, "out of memory");
    a->sealed = true;
    int rc = HK_OK;
    for (;;) {
        if ((rc = skip_ws_nl(p))) break;
        if (peek(p) == ']') {
            p->s++;
            break;
        }
        hk_toml *v = NULL;
        if ((rc = parse_value(p, &v))) break;
        if ((rc = add_item(a, v))) {
            hk__toml_free(v);
            break;
        }
        if ((rc = skip_ws_nl(p))) break;
        if (peek(p) == ',') p->s++;
        else if (peek(p) == ']') {
            p->s++;
            break;
        } else {
            rc = perr(p, "expected ',' or ']' in an array");
            break;
        }
    }
    if (rc) hk__toml_free(a);
    else *out = a;
    return rc;
}

static int assign(ps *p, hk_toml *table, keypath *k, hk_toml *v);

static int parse_inline_table(ps *p, hk_toml **out) {
    p->s++; /* { */
    hk_toml *t = node_new(HK_TOML_TABLE);
    if (!t) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    skip_ws(p);
    if (peek(p) == '}') p->s++;
    else
        for (;;) {
            keypath k;
            if ((rc = parse_key(p, &k))) break;
            if (peek(p) != '=') {
                keypath_free(&k);
                rc = perr(p, "expected '=' after a key");
                break;
            }
            p->s++;
            skip_ws(p);
            hk_toml *v = NULL;
            rc = parse_value(p, &v);
            if (rc == HK_OK) rc = assign(p, t, &k, v);
            keypath_free(&k);
            if (rc) break;
            skip_ws(p);
            if (peek(p) == ',') {
                p->s++;
                continue;
            }
            if (peek(p) == '}') {
                p->s++;
                break;
            }
            rc = perr(p, "expected ',' or '}' in an inline table");
            break;
        }
    if (rc) {
        hk__toml_free(t);
        return rc;
    }
    t->sealed = true;
    *out = t;
    return HK_OK;
}

static int parse_value(ps *p, hk_toml **out) {
    *out = NULL;
    if (++p->depth > HK_TOML_MAX_DEPTH) {
        p->depth--;
        return perr(p, "values nested too deeply");
    }
    int rc;
    int c = peek(p);
    if (c == '"' || c == '\'') {
        hk_strbuf sb;
        hk__sb_init(&sb);
        rc = parse_string(p, &sb, true);
        if (rc == HK_OK && sb.oom) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK && !(*out = node_new(HK_TOML_STRING))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc == HK_OK) {
            (*out)->str_len = sb.len;
            (*out)->str = sb.data ? sb.data : hk__strdup("");
            sb.data = NULL;
            if (!(*out)->str) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        hk__sb_free(&sb);
    } else if (c == '[') rc = parse_array(p, out);
    else if (c == '{') rc = parse_inline_table(p, out);
    else rc = parse_scalar(p, out);
    p->depth--;
    if (rc) {
        hk__toml_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- tables --------------------------------------------------------------------------------- */

/* Walk/create the tables of k's parts [0, upto) below t. Dotted keys open implicit tables; they may
 * not enter sealed (inline) tables or static arrays. For headers, an array of tables leads into its
 * last element. */
static int descend(ps *p, hk_toml **t, keypath *k, size_t upto, bool header) {
    for (size_t i = 0; i < upto; i++) {
        hk_toml *c = find(*t, k->part[i]);
        if (!c) {
            if (!(c = node_new(HK_TOML_TABLE)) || !(c->key = hk__strdup(k->part[i]))) {
                hk__toml_free(c);
                return hk__fail(HK_ERR_NOMEM, "out of memory");
            }
            c->dotted = !header;
            int rc = add_item(*t, c);
            if (rc) {
                hk__toml_free(c);
                return rc;
            }
        } else if (c->kind == HK_TOML_ARRAY && c->aot && header) {
            c = c->items[c->n - 1];
        } else if (c->kind != HK_TOML_TABLE || c->sealed) {
            return perr(p, "a key is defined twice (or a value is extended)");
        } else if (!header && c->defined && !c->dotted) {
            return perr(p, "a dotted key may not extend a table defined by a header");
        }
        *t = c;
    }
    return HK_OK;
}

static int assign(ps *p, hk_toml *table, keypath *k, hk_toml *v) {
    hk_toml *t = table;
    int rc = descend(p, &t, k, k->n - 1, false);
    if (rc == HK_OK && find(t, k->part[k->n - 1])) rc = perr(p, "a key is defined twice");
    if (rc == HK_OK && !(v->key = hk__strdup(k->part[k->n - 1]))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK) rc = add_item(t, v);
    if (rc) hk__toml_free(v);
    return rc;
}

static int parse_header(ps *p, hk_toml *root, hk_toml **cur) {
    bool aot = starts(p, "[[");
    p->s += aot ? 2 : 1;
    keypath k;
    int rc = parse_key(p, &k);
    if (rc) return rc;
    if (aot ? !starts(p, "]]") : peek(p) != ']') rc = perr(p, aot ? "expected ']]'" : "expected ']'");
    else p->s += aot ? 2 : 1;
    hk_toml *t = root;
    if (rc == HK_OK) rc = descend(p, &t, &k, k.n - 1, true);
    if (rc == HK_OK) {
        const char *last = k.part[k.n - 1];
        hk_toml *c = find(t, last);
        if (aot) {
            if (!c) {
                if (!(c = node_new(HK_TOML_ARRAY)) || !(c->key = hk__strdup(last)) || (rc = add_item(t, c))) {
                    hk__toml_free(c);
                    rc = rc ? rc : hk__fail(HK_ERR_NOMEM, "out of memory");
                    c = NULL;
                } else c->aot = true;
            } else if (c->kind != HK_TOML_ARRAY || !c->aot) rc = perr(p, "not an array of tables");
            hk_toml *e = NULL;
            if (rc == HK_OK && (!(e = node_new(HK_TOML_TABLE)) || (rc = add_item(c, e)))) {
                hk__toml_free(e);
                rc = rc ? rc : hk__fail(HK_ERR_NOMEM, "out of memory");
            }
            if (rc == HK_OK) {
                e->defined = true;
                *cur = e;
            }
        } else {
            if (!c) {
                if (!(c = node_new(HK_TOML_TABLE)) || !(c->key = hk__strdup(last)) || (rc = add_item(t, c))) {
                    hk__toml_free(c);
                    rc = rc ? rc : hk__fail(HK_ERR_NOMEM, "out of memory");
                    c = NULL;
                }
            } else if (c->kind != HK_TOML_TABLE || c->sealed || c->defined || c->dotted)
                rc = perr(p, "a table is defined twice");
            if (rc == HK_OK) {
                c->defined = true;
                *cur = c;
            }
        }
    }
    keypath_free(&k);
    return rc;
}

int hk__toml_parse(hk_toml **out, const char *text, size_t len, const char *what) {
    *out = NULL;
    pthread_once(&g_seed_once, seed_init);
    ps p = {text, text + len, what ? what : "TOML", text, 1, 0};
    hk_toml *root = node_new(HK_TOML_TABLE);
    if (!root) return hk__fail(HK_ERR_NOMEM, "out of memory");
    root->defined = true;
    hk_toml *cur = root;
    int rc = HK_OK;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) p.s += 3; /* a UTF-8 BOM */
    while (rc == HK_OK && !at_end(&p)) {
        skip_ws(&p);
        int c = peek(&p);
        if (c == '#' || c == '\n' || c == '\r' || c < 0) {
            rc = end_of_line(&p);
        } else if (c == '[') {
            rc = parse_header(&p, root, &cur);
            if (rc == HK_OK) rc = end_of_line(&p);
        } else {
            keypath k;
            rc = parse_key(&p, &k);
            if (rc) break;
            if (peek(&p) != '=') {
                keypath_free(&k);
                rc = perr(&p, "expected '=' after a key");
                break;
            }
            p.s++;
            skip_ws(&p);
            hk_toml *v = NULL;
            rc = parse_value(&p, &v);
            if (rc == HK_OK) rc = assign(&p, cur, &k, v);
            keypath_free(&k);
            if (rc == HK_OK) rc = end_of_line(&p);
        }
    }
    if (rc) hk__toml_free(root);
    else *out = root;
    return rc;
}
