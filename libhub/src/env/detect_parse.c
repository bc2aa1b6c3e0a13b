/* Reading and parsing the text files of installed packages (torch/version.py, TorchConfig.cmake,
 * dist-info METADATA, torch/__init__.py): small, bounded, never executed. */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HK_TEXT_MAX (8u << 20) /* largest text file we read (torch/__init__.py is ~100 KiB) */

char *hk__env_read_text(const char *path) {
    char *text = NULL;
    if (hk__read_file(&text, NULL, path, HK_TEXT_MAX) != HK_OK) {
        hk_clear_error();
        return NULL;
    }
    return text;
}

bool hk__env_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void hk__env_put_version2(hk_env *env, hk_env_key k, const char *raw) {
    uint32_t ma, mi;
    if (!raw || !hk__env_ver2(raw, &ma, &mi)) return;
    char buf[32];
    snprintf(buf, sizeof buf, "%u.%u", ma, mi);
    hk__env_put(env, k, buf);
}

/* ---- parsers (exposed for tests) ------------------------------------------------------------ */

static const char *skip_blank(const char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

char *hk__py_assignment(const char *text, const char *name) {
    if (!text || !name) return NULL;
    size_t nlen = strlen(name);
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t llen = eol ? (size_t)(eol - line) : strlen(line);
        if (llen > nlen && strncmp(line, name, nlen) == 0 &&
            (line[nlen] == ' ' || line[nlen] == '\t' || line[nlen] == ':' || line[nlen] == '=')) {
            const char *p = skip_blank(line + nlen);
            if (*p == ':') /* annotation: skip to the '=' */
                while (p < line + llen && *p != '=') p++;
            if (p < line + llen && *p == '=' && p[1] != '=') {
                /* chained `a = b = 'x'`: the value is the last right-hand side */
                const char *q = p + 1;
                for (;;) {
                    q = skip_blank(q);
                    if (*q == '\'' || *q == '"') {
                        char quote = *q;
                        const char *end = q + 1;
                        while (end < line + llen && *end != quote && *end != '\\') end++;
                        if (end >= line + llen || *end != quote) break;
                        return hk__strndup(q + 1, (size_t)(end - q - 1));
                    }
                    if (strncmp(q, "None", 4) == 0 && !isalnum((unsigned char)q[4]) && q[4] != '_')
                        return hk__strdup("");
                    /* an identifier followed by '=': continue the chain */
                    const char *id = q;
                    while (id < line + llen && (isalnum((unsigned char)*id) || *id == '_')) id++;
                    if (id == q) break;
                    id = skip_blank(id);
                    if (*id != '=' || id[1] == '=') break;
                    q = id + 1;
                }
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

int hk__torch_cmake_cxx11(const char *text) {
    static const char needle[] = "-D_GLIBCXX_USE_CXX11_ABI=";
    const char *p = text ? strstr(text, needle) : NULL;
    for (; p; p = strstr(p + 1, needle)) {
        char c = p[sizeof needle - 1];
        if (c == '0' || c == '1') return c - '0';
    }
    return -1;
}

int hk__torch_init_cxx11(const char *text) {
    const char *p = text ? strstr(text, "def compiled_with_cxx11_abi") : NULL;
    if (!p) return -1;
    /* The body: skip the signature and an optional docstring, take the first statement. */
    const char *body = strchr(p, ':');
    if (!body) return -1;
    const char *end = strstr(body, "\ndef ");
    const char *ret = strstr(body, "return ");
    if (!ret || (end && ret > end)) return -1;
    ret += 7;
    if (strncmp(ret, "True", 4) == 0 && !isalnum((unsigned char)ret[4])) return 1;
    if (strncmp(ret, "False", 5) == 0 && !isalnum((unsigned char)ret[5])) return 0;
    return -1; /* e.g. `return _C._GLIBCXX_USE_CXX11_ABI`: decided at run time */
}

char *hk__metadata_version(const char *text) {
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (strncmp(line, "Version:", 8) == 0) {
            const char *v = skip_blank(line + 8);
            size_t n = eol ? (size_t)(eol - v) : strlen(v);
            while (n > 0 && isspace((unsigned char)v[n - 1])) n--;
            return n ? hk__strndup(v, n) : NULL;
        }
        if (line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) break; /* end of headers */
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

void hk__torch_local_tag(const char *version, char **cuda, char **hip) {
    *cuda = *hip = NULL;
    const char *plus = version ? strchr(version, '+') : NULL;
    if (!plus) return;
    const char *tag = plus + 1;
    if (strncmp(tag, "cu", 2) == 0 && isdigit((unsigned char)tag[2])) {
        /* cu130 → 13.0 (last digit is the minor, as in variant names) */
        size_t n = strspn(tag + 2, "0123456789");
        if (n >= 2 && n <= 4)
            *cuda = hk__asprintf("%.*s.%c", (int)(n - 1), tag + 2, tag[2 + n - 1]);
    } else if (strncmp(tag, "rocm", 4) == 0 && isdigit((unsigned char)tag[4])) {
        uint32_t ma, mi;
        if (hk__env_ver2(tag + 4, &ma, &mi)) *hip = hk__asprintf("%u.%u", ma, mi);
    }
}

