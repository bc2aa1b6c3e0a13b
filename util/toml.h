/* TOML 1.0 reader (util layer): a document parsed into a tree of tables, arrays and scalars, for
 * pyproject.toml ([tool.kernels.dependencies]) and other small configuration files. Bounded: at most
 * HK_TOML_MAX_DEPTH nested arrays / inline tables, input at most a few MiB (the caller reads it). */
#ifndef HK_UTIL_TOML_H
#define HK_UTIL_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HK_TOML_MAX_DEPTH 64

typedef enum hk_toml_kind {
    HK_TOML_TABLE,
    HK_TOML_ARRAY,
    HK_TOML_STRING,
    HK_TOML_INT,
    HK_TOML_FLOAT,
    HK_TOML_BOOL,
    HK_TOML_DATETIME /* kept as its text in str */
} hk_toml_kind;

typedef struct hk_toml hk_toml;
struct hk_toml {
    hk_toml_kind kind;
    char *key;        /* the key in the parent table; NULL for array items and the root */
    char *str;        /* STRING (UTF-8, may hold no NUL), DATETIME */
    size_t str_len;
    int64_t i;        /* INT */
    double f;         /* FLOAT */
    bool b;           /* BOOL */
    hk_toml **items;  /* TABLE: its key/value pairs in file order; ARRAY: its elements */
    size_t n, cap;
    /* TABLE of more than a few keys: a hash index of items (slot = position + 1, 0 = free; open
     * addressing, at most half full), so that a table of many keys parses in linear time */
    size_t *index, index_cap;
    /* parser state: a [header] defined it / an inline table or static array (closed for additions) /
     * created by a dotted key / an array of tables */
    bool defined, sealed, dotted, aot;
};

/* Parse text (len bytes; need not be NUL-terminated). *out: the root table; free with
 * hk__toml_free. HK_ERR_PARSE naming `what`, line and column. */
int hk__toml_parse(hk_toml **out, const char *text, size_t len, const char *what);
void hk__toml_free(hk_toml *t);
/* The value under key in a table (NULL when absent or t is not a table); constant time. */
const hk_toml *hk__toml_get(const hk_toml *t, const char *key);

#endif
