/* kernels.lock, both formats (kernel/lock.c): parse, walk every accessor, and write a parsed
 * new-format lock back out and read it again (it must parse to the same entries). */
#include "fuzz_util.h"
#include "hubkern.h"

static void walk(const hk_lockfile *l) {
    for (size_t i = 0; i < hk_lockfile_count(l); i++) {
        const hk_lock_entry *e = hk_lockfile_entry(l, i);
        const char *id = hk_lock_entry_repo_id(e);
        if (!id || !hk_lock_entry_commit(e)) abort();
        if (hk_lockfile_find(l, id) == NULL) abort();
        (void)hk_lock_entry_version(e);
        (void)hk_lock_entry_revision(e);
        for (size_t k = 0; k < hk_lock_entry_variant_count(e); k++) {
            if (!hk_lock_entry_variant_name(e, k) || !hk_lock_entry_variant_hash(e, k)) abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hk_lockfile *l = NULL;
    int rc = hk_lockfile_parse(&l, (const char *)data, size);
    if (rc != HK_OK) {
        if (!*hk_last_error()) abort();
        return 0;
    }
    walk(l);
    if (hk_lockfile_format(l) == HK_LOCK_NEW && hk_lockfile_count(l) > 0) {
        const char *path = hk_fuzz_write(hk_fuzz_dir("lockfile"), "kernels.lock", (const uint8_t *)"", 0);
        char p[1024];
        snprintf(p, sizeof p, "%s", path);
        if (hk_lockfile_write(p, l) == HK_OK) {
            hk_lockfile *again = NULL;
            if (hk_lockfile_read(&again, p) != HK_OK) abort(); /* what we write we must read */
            if (hk_lockfile_count(again) != hk_lockfile_count(l)) abort();
            hk_lockfile_free(again);
        }
    }
    hk_lockfile_free(l);
    return 0;
}
