/* Internal to variant/: the layout behind the opaque hk_variant (hubkern/variant.h). Unit tests
 * include it to build variants by hand (to_string's refusals). */
#ifndef HK_VARIANT_INTERNAL_H
#define HK_VARIANT_INTERNAL_H

#include "internal.h"
#include "hubkern/variant.h"

#include <stdint.h>

/* A parsed variant name. Plain data: copied by value inside the library. */
struct hk_variant {
    hk_variant_family family;
    uint32_t fw_major, fw_minor; /* torch / stable-ABI / tvm-ffi major.minor; 0.0 for noarch */
    int cxx11;                   /* exact torch: -1 untagged, 1 "-cxx11", 0 "-cxx98"; else -1 */
    hk_backend_kind backend;
    uint32_t backend_major, backend_minor;
    char cpu[32]; /* arch families: "x86_64"; empty for noarch */
    char os[32];  /* arch families: "linux"; empty for noarch */
    char noarch[32]; /* noarch: the name after "torch-"; empty otherwise */
};

/* hk_variant_parse into caller storage (zeroed, family HK_FAMILY_INVALID on failure). */
int hk__variant_parse_into(hk_variant *out, const char *name);

#endif
