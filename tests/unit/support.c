#include "support.h"

#include "hubkern/common.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int hk_test_failures;
int hk_test_checks;
static char *g_tmp;

const char *hk_test_tmpdir(void) {
    if (!g_tmp) {
        const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        g_tmp = hk__asprintf("%s/hk-test-XXXXXX", base);
        if (!g_tmp || !mkdtemp(g_tmp)) {
            fprintf(stderr, "cannot create a temporary directory\n");
            exit(2);
        }
    }
    return g_tmp;
}

void hk_test_write(const char *path, const char *content) {
    char *dir = hk__strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        hk__mkdirs(dir, 0777);
    }
    free(dir);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fputs(content, f);
    fclose(f);
}

int hk_test_finish(void) {
    if (g_tmp) {
        hk__rmtree(g_tmp);
        free(g_tmp);
        g_tmp = NULL;
    }
    fprintf(stderr, "%d checks, %d failures\n", hk_test_checks, hk_test_failures);
    return hk_test_failures ? 1 : 0;
}
