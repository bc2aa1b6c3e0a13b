/* metadata.json of a build variant (kernel/metadata.c), as a mirror or a cache would hand it over. */
#include "fuzz_util.h"
#include "kernel/kernel_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hk_metadata_owned md;
    memset(&md, 0, sizeof md);
    int rc = hk__metadata_parse(&md, (const char *)data, size, "fuzz/metadata.json");
    if (rc == HK_OK) {
        /* touch every string the parser promised */
        size_t sum = strlen(md.pub.name ? md.pub.name : "") + strlen(md.pub.backend ? md.pub.backend : "");
        for (size_t i = 0; i < md.pub.num_archs; i++) sum += strlen(md.pub.archs[i]);
        if (md.pub.upstream) sum += strlen(md.pub.upstream);
        if (md.pub.source) sum += strlen(md.pub.source);
        (void)sum;
        /* the arch checks read the same fields */
        (void)hk_kernel_check_rocm_arch(&md.pub, "gfx942:sramecc+:xnack-");
    } else if (!*hk_last_error()) {
        abort();
    }
    hk__metadata_free(&md);
    return 0;
}
