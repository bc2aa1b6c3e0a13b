/* Minimal test harness: CHECK records a failure and continues; the test's main returns
 * hk_test_finish(). Every failure prints file:line and the expression. */
#ifndef HK_TEST_SUPPORT_H
#define HK_TEST_SUPPORT_H

#include <stdio.h>
#include <string.h>

extern int hk_test_failures;
extern int hk_test_checks;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        hk_test_checks++;                                                                \
        if (!(cond)) {                                                                   \
            hk_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

/* CHECK with a printf-style account of what failed (for values the expression does not show) */
#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        hk_test_checks++;                                                                \
        if (!(cond)) {                                                                   \
            hk_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

#define CHECK_STR(a, b)                                                                  \
    do {                                                                                 \
        const char *a_ = (a), *b_ = (b);                                                 \
        hk_test_checks++;                                                                \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                         \
            hk_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s == \"%s\", expected \"%s\"\n",  \
                    __FILE__, __LINE__, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
        }                                                                                \
    } while (0)

#define CHECK_RC(expr, want)                                                             \
    do {                                                                                 \
        int rc_ = (expr);                                                                \
        hk_test_checks++;                                                                \
        if (rc_ != (want)) {                                                             \
            hk_test_failures++;                                                          \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (last error: %s)\n",     \
                    __FILE__, __LINE__, #expr, hk_error_name(rc_), hk_error_name(want),  \
                    hk_last_error());                                                    \
        }                                                                                \
    } while (0)

/* A fresh empty directory under $TMPDIR (removed by hk_test_finish). Caller must not free. */
const char *hk_test_tmpdir(void);
/* Write a file, creating parent directories. */
void hk_test_write(const char *path, const char *content);
int hk_test_finish(void);

#endif
