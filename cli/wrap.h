/* Breaking a line of help text to a width (cli/wrap.c): --help fits 80 columns and the man page's
 * preformatted blocks the page's text width, whatever a command's spec says. */
#ifndef HK_CLI_WRAP_H
#define HK_CLI_WRAP_H

#include <stddef.h>

/* Receives one piece of a wrapped line (not NUL-terminated, no newline): index 0 is the first,
 * starting at the line's own beginning; later pieces are to be printed after `indent` spaces. */
typedef void (*cli_wrap_fn)(void *ud, size_t index, const char *piece, size_t len, size_t indent);

/* Break text[0..n) at spaces so that the first piece fits width columns and every later one, after
 * its hang of spaces, does too (a word longer than that stands alone); the spaces at a break are
 * dropped. Calls put once for a line that fits (an empty one included). */
void cli_wrap(const char *text, size_t n, size_t width, size_t hang, cli_wrap_fn put, void *ud);

/* The hang that keeps a "label  text" line's continuation under its text: when the first word
 * (after the leading indent) is followed by two or more spaces, the column where the text
 * resumes, if below max; else the leading indent itself. */
size_t cli_wrap_hang(const char *line, size_t n, size_t max);

/* The next block of text: its first line and the lines after it indented exactly to its hang (the
 * rest of a paragraph or of a "label  text" entry, which the spec broke for its own width; a line
 * that is a label entry itself, a blank line, and the line after one ending in ':' (or, in
 * prose, in '.') start a new block), joined by single spaces
 * into *out (free it; NULL when out of memory) of *out_len bytes, its hang in *hang (as
 * cli_wrap_hang). Returns how much of text the block takes, its last newline included. */
size_t cli_wrap_block(const char *text, size_t max_hang, char **out, size_t *out_len, size_t *hang);

#endif
