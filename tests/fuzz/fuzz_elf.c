/* The ELF reader (kernel/elf.c) and the fat-binary reader (hk_library_code_objects): a kernel's
 * library comes from a mirror and is read before anything is loaded. */
#include "fuzz_util.h"
#include "hubkern.h"
#include "kernel/kernel_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = hk_fuzz_write(hk_fuzz_dir("elf"), "lib.so", data, size);
    char **v = NULL;
    size_t n = 0;
    if (hk__elf_exported_with_prefix(&v, &n, path, "TVMFFI") == HK_OK) hk__kstrv_free(v, n);
    v = NULL;
    n = 0;
    if (hk__elf_needed_libs(&v, &n, path) == HK_OK) hk__kstrv_free(v, n);
    hk_code_objects *objs = NULL;
    if (hk_library_code_objects(&objs, path) == HK_OK) {
        size_t c = hk_code_objects_count(objs);
        for (size_t i = 0; i < c; i++) {
            (void)hk_code_object_sm(objs, i);
            (void)hk_code_object_is_ptx(objs, i);
            (void)hk_code_object_fits(objs, i, 9, 0);
        }
        (void)hk_code_objects_fit(objs, 8, 0);
        free(hk__code_objects_describe(objs));
        hk_code_objects_free(objs);
    }
    return 0;
}
