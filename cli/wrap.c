/* Word wrapping for --help and the man page (see cli/wrap.h). */
#include "cli/wrap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void cli_wrap(const char *text, size_t n, size_t width, size_t hang, cli_wrap_fn put, void *ud) {
    size_t start = 0, index = 0;
    do {
        size_t room = index ? (width > hang ? width - hang : 1) : width, len = n - start;
        if (len > room) { /* break at the last space that fits, else at the first after it */
            size_t cut = room;
            while (cut > 0 && text[start + cut] != ' ') cut--;
            if (cut == 0)
                while (cut < len && text[start + cut] != ' ') cut++;
            len = cut;
            while (len > 0 && text[start + len - 1] == ' ') len--; /* "a  b": no trailing space */
            if (len == 0) len = cut;
        }
        put(ud, index, text + start, len, index ? hang : 0);
        start += len;
        while (start < n && text[start] == ' ') start++;
        index++;
    } while (start < n);
}

size_t cli_wrap_hang(const char *line, size_t n, size_t max) {
    size_t lead = 0;
    while (lead < n && line[lead] == ' ') lead++;
    const char *gap = memchr(line + lead, ' ', n - lead);
    if (gap && (size_t)(gap - line) + 1 < n && gap[1] == ' ') { /* "verify  re-hash ...": a label */
        size_t k = (size_t)(gap - line);
        while (k < n && line[k] == ' ') k++;
        if (k < max) return k;
    }
    return lead;
}

size_t cli_wrap_block(const char *text, size_t max_hang, char **out, size_t *out_len, size_t *hang) {
    size_t n = strcspn(text, "\n"), used = n + (text[n] == '\n');
    *hang = cli_wrap_hang(text, n, max_hang);
    size_t total = n;
    /* a following line continues the block when it starts with exactly the block's hang of spaces
     * and is no "label  text" entry of its own, unless the line before it ends a heading (':') or,
     * in prose (no label), a sentence: the spec's own line breaks between sentences stay */
    size_t lead0 = 0;
    while (lead0 < n && text[lead0] == ' ') lead0++;
    const bool label = *hang != lead0;
    size_t last_end = n;
    while (n > 0 && text[used] != '\0' && text[last_end - 1] != ':' && (label || text[last_end - 1] != '.')) {
        const char *next = text + used;
        size_t m = strcspn(next, "\n"), lead = 0;
        while (lead < m && next[lead] == ' ') lead++;
        if (lead != *hang || lead == m || cli_wrap_hang(next, m, max_hang) != lead) break;
        total += 1 + m - lead;
        last_end = used + m;
        used += m + (next[m] == '\n');
    }
    char *b = malloc(total + 1);
    *out = b;
    *out_len = total;
    if (!b) return used;
    memcpy(b, text, n);
    size_t k = n;
    for (const char *p = text + n + (text[n] == '\n'); p < text + used;) {
        size_t m = strcspn(p, "\n");
        b[k++] = ' ';
        memcpy(b + k, p + *hang, m - *hang);
        k += m - *hang;
        p += m + (p[m] == '\n');
    }
    b[k] = '\0';
    return used;
}
