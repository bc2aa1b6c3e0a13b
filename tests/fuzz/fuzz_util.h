/* Shared helpers of the libFuzzer harnesses (tests/fuzz/fuzz_*.c): a private scratch directory per
 * process, writing an input to a file for the parsers that read paths, and splitting an input into
 * NUL-terminated lines. Header-only so that each harness is one translation unit. */
#ifndef HK_FUZZ_UTIL_H
#define HK_FUZZ_UTIL_H

#include "internal.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* $TMPDIR/hkfuzz-<name>-XXXXXX, created once and removed at exit (one per fuzzer process, so
 * that parallel jobs never share files). */
static char hk_fuzz_dir_path[512];
static void hk_fuzz_dir_cleanup(void) {
    if (hk_fuzz_dir_path[0]) hk__rmtree(hk_fuzz_dir_path);
}
static inline const char *hk_fuzz_dir(const char *name) {
    if (!hk_fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(hk_fuzz_dir_path, sizeof hk_fuzz_dir_path, "%s/hkfuzz-%s-XXXXXX", t && *t ? t : "/tmp", name);
        if (!mkdtemp(hk_fuzz_dir_path)) abort();
        atexit(hk_fuzz_dir_cleanup);
    }
    return hk_fuzz_dir_path;
}

/* Write data to <dir>/<file>; returns the path (static storage, valid until the next call). */
static inline const char *hk_fuzz_write(const char *dir, const char *file, const uint8_t *data, size_t size) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    close(fd);
    return path;
}

/* A NUL-terminated copy of data (embedded NULs stay: parsers of C strings see the prefix). */
static inline char *hk_fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Split s in place at '\n' into at most max lines; returns how many. */
static inline size_t hk_fuzz_lines(char **lines, size_t max, char *s) {
    size_t n = 0;
    while (s && n < max) {
        lines[n++] = s;
        char *nl = strchr(s, '\n');
        if (!nl) break;
        *nl = '\0';
        s = nl + 1;
    }
    return n;
}

#endif
