/* hk-get-repeat: one process that calls hk_get_kernel again and again on the test's command, so that
 * tests/integration/test_request_economy.py can count the requests a repeat get sends (the mirror's
 * access log, read between commands). Public API only.
 *
 *   hk-get-repeat ENDPOINT CACHE REPO VERSION [FRESHNESS_S]
 *   stdin: one "get" per line (anything else ends it); stdout: "ok <commit> <same|new>" per get,
 *   "same" when the handle is the one the first get returned, or "err <code> <message>". */
#include "hubkern/common.h"
#include "hubkern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: hk-get-repeat ENDPOINT CACHE REPO VERSION [FRESHNESS_S]\n");
        return 2;
    }
    if (hk_init() != HK_OK) return 1;
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.hub_options.endpoint = argv[1];
    o.hub_options.cache_dir = argv[2];
    o.repo_id = argv[3];
    o.kernel_version = atoi(argv[4]);
    o.backend = "cpu";
    o.no_local_kernels = 1;
    if (argc > 5) o.hub_options.freshness_s = atof(argv[5]);
    hk_kernel *first = NULL;
    char line[64];
    int rc = 0;
    while (fgets(line, sizeof line, stdin) && strncmp(line, "get", 3) == 0) {
        hk_kernel *k = NULL;
        if (hk_get_kernel(&k, &o) != HK_OK) {
            printf("err %s %s\n", hk_error_name(hk_last_error_code()), hk_last_error());
            rc = 1;
        } else {
            printf("ok %s %s\n", hk_kernel_commit(k), !first || k == first ? "same" : "new");
            if (!first) first = k;
            else hk_kernel_unref(k);
        }
        fflush(stdout);
    }
    hk_kernel_unref(first);
    hk_shutdown();
    return rc;
}
