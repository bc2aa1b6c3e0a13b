/* Bundle tars (cache/bundle*.c): hk_bundle_list, then hk_bundle_extract into an empty cache. The
 * archive is hostile: whatever it holds, nothing may land outside the cache root (checked by
 * extracting into <dir>/cache and looking for anything else under <dir>). */
#include "fuzz_util.h"
#include "hubkern/cache.h"

#include <dirent.h>

static void visit(void *ud, const char *path, char kind, uint64_t size, const char *target) {
    size_t *n = ud;
    *n += strlen(path) + (target ? strlen(target) : 0) + (size_t)kind + (size_t)(size & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    const char *dir = hk_fuzz_dir("bundle");
    char path[1024], cache[1024];
    snprintf(path, sizeof path, "%s", hk_fuzz_write(dir, "in.tar", data, size));
    snprintf(cache, sizeof cache, "%s/cache", dir);
    size_t n = 0;
    (void)hk_bundle_list(path, visit, &n);
    hk_bundle_options o = HK_BUNDLE_OPTIONS_INIT;
    o.cache_dir = cache;
    hk_bundle_report *r = NULL;
    if (hk_bundle_extract(&r, path, &o) == HK_OK) {
        (void)hk_bundle_report_repos(r);
        (void)hk_bundle_report_links(r);
    }
    hk_bundle_report_free(r);
    /* only in.tar and cache/ may exist next to each other */
    DIR *d = opendir(dir);
    if (!d) abort();
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "in.tar") &&
            strcmp(e->d_name, "cache"))
            abort(); /* an entry escaped the cache root */
    }
    closedir(d);
    hk__rmtree(cache);
    return 0;
}
