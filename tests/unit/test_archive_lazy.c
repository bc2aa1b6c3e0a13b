/* cache/archive_lib: libarchive is not loaded until a bundle call needs it, and when it cannot be
 * loaded the call fails with HK_ERR_RUNTIME_MISSING saying what to install. */
#include "support.h"

#include "hubkern/cache.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether this process has libarchive mapped. */
static bool archive_mapped(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, "libarchive.so") != NULL;
    fclose(f);
    return found;
}

static void count_entry(void *ud, const char *path, char kind, uint64_t size, const char *link) {
    (void)path, (void)kind, (void)size, (void)link;
    (*(int *)ud)++;
}

int main(void) {
    /* linking libhubkern brought no libarchive in */
    CHECK(!archive_mapped());

    char bundle[4096];
    snprintf(bundle, sizeof bundle, "%s/absent.tar", hk_test_tmpdir());
    int n = 0;

    /* in a child (the load is tried once per process): a libarchive that is not there */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HUBKERN_LIBARCHIVE_LIB", "/nonexistent/libarchive.so.13", 1);
        int rc = hk_bundle_list(bundle, count_entry, &n);
        const char *msg = hk_last_error();
        bool says_what = strstr(msg, "bundles need libarchive") && strstr(msg, "install") &&
                         strstr(msg, "HUBKERN_LIBARCHIVE_LIB");
        if (rc != HK_ERR_RUNTIME_MISSING || !says_what) fprintf(stderr, "child: %s: %s\n", hk_error_name(rc), msg);
        _exit(rc == HK_ERR_RUNTIME_MISSING && says_what ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* here: the system's libarchive is loaded by the first bundle call, which then reads the file */
    CHECK_RC(hk_bundle_list(bundle, count_entry, &n), HK_ERR_NOT_FOUND);
    CHECK(archive_mapped());
    CHECK(n == 0);
    return hk_test_finish();
}
