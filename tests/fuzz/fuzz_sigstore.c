/* Sigstore bundles (libhub/src/sigstore): the whole verification of a hostile bundle (parse, TSA
 * responses, certificate chain, SCT, policy, inclusion proof, checkpoint, SET, body, signature)
 * against the production trusted root over a fixed artifact. Nothing fuzzed may verify: a bundle
 * that passes would be a forged signature (the seeds are real bundles over other artifacts). */
#include "fuzz_util.h"
#include "sigstore/sigstore.h"

#ifndef HK_SOURCE_DIR
#define HK_SOURCE_DIR "."
#endif

static hk_sigstore_trust_root *root;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    if (hk__sigstore_trust_root_load(&root, HK_SOURCE_DIR "/data/sigstore/trusted_root.json") != HK_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char artifact[] = "hubkern fuzz artifact\n";
    hk_sigstore_result r;
    memset(&r, 0, sizeof r);
    int rc = hk__sigstore_verify(&r, root, NULL, 0, artifact, sizeof artifact - 1, (const char *)data, size);
    if (rc == HK_OK) abort(); /* a forgery */
    if (!*hk_last_error()) abort();
    hk__sigstore_result_free(&r);
    return 0;
}
